"""AGENT_NOT_FOUND with the closest agent ids the caller may see (a typo gets its fix).

Only ids of the caller's projects are compared, so the answer never names an agent of another
project. The comparison (difflib) is bounded: at most ``SCANNED`` ids are compared, those of
the address's project first, then the rest of the caller's in the directory's rank order (a
walk that stops there, never the whole directory), so a typo costs the same on a network of a
million agents as on one of a thousand; past the bound a close id may be missed, never a
foreign one shown. An agent the caller sees whose role, project or task the address got wrong
is named with its own address instead.
"""

from __future__ import annotations

import difflib
import itertools
from collections.abc import Iterable

from bzzz.address import agent_address
from bzzz.errors import AgentNotFound
from bzzz.principal import Principal
from bzzz.store.directory import AgentDirectory

SCANNED = 1_000
SUGGESTED = 3
CUTOFF = 0.6


def _ranked_ids(
    directory: AgentDirectory, who: Principal, project: str | None, limit: int
) -> list[str]:
    """The ids of the first ``limit`` agents ``who`` may see (of ``project`` if given), in the
    directory's rank order: a walk that stops at ``limit`` (never the whole directory)."""
    _, found = directory.ranked(
        agent_id=None,
        role=None,
        project=project,
        task=None,
        available_only=False,
        min_performance=None,
        expertise=[],
        limit=limit,
        visible=None if who.all_projects else who.projects,
    )
    return [agent.id for _, agent in found]


def _visible_ids(directory: AgentDirectory, who: Principal, project: str | None) -> Iterable[str]:
    """Up to ``SCANNED`` ids ``who`` may see, those of ``project`` first (each once)."""
    first = _ranked_ids(directory, who, project, SCANNED) if project is not None else []
    rest = _ranked_ids(directory, who, None, SCANNED)
    return dict.fromkeys(itertools.chain(first, rest))


def close_ids(
    directory: AgentDirectory, who: Principal, agent_id: str, project: str | None = None
) -> list[str]:
    """The ids closest to ``agent_id`` among those ``who`` may see (at most ``SUGGESTED``)."""
    candidates = list(itertools.islice(_visible_ids(directory, who, project), SCANNED))
    return difflib.get_close_matches(agent_id, candidates, n=SUGGESTED, cutoff=CUTOFF)


def agent_not_found(
    directory: AgentDirectory,
    who: Principal | None,
    agent_id: str,
    message: str,
    project: str | None = None,
) -> AgentNotFound:
    """AGENT_NOT_FOUND for ``agent_id``; ``details.did_you_mean`` lists the close ids.

    ``who`` None: the directory is another network's, whose agents are not named here.
    """
    details: dict[str, object] = {"agent_id": agent_id}
    if who is None:
        return AgentNotFound(message, details=details)
    there = directory.get(agent_id)
    if there is not None and who.may_see_project(there.project):
        # The id is right and visible: the address's other parts are not.
        address = agent_address(there.id, there.role, there.project, there.task)
        details["address"] = address
        return AgentNotFound(f"{message}; '{agent_id}' is at {address}", details=details)
    close = close_ids(directory, who, agent_id, project)
    hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    if close:
        details["did_you_mean"] = close
    return AgentNotFound(f"{message}{hint}", details=details)


def participants_not_found(
    directory: AgentDirectory, who: Principal, unknown: list[str]
) -> AgentNotFound:
    """AGENT_NOT_FOUND naming a thread's unknown participants, each with its close ids."""
    close = {p: ids for p in unknown if (ids := close_ids(directory, who, p))}
    hints = "".join(
        f"; for '{p}' did you mean {', '.join(repr(i) for i in ids)}?" for p, ids in close.items()
    )
    details: dict[str, object] = {"unknown": unknown}
    if close:
        details["did_you_mean"] = close
    return AgentNotFound(f"unknown participants: {', '.join(unknown)}{hints}", details=details)
