"""Choosing the best available agents to invite (reviews, experts, architects).

Whatever a rule or a review chooses for a thread stays in the thread's project: a candidate
must have declared that very project (an agent of no project, for a thread of none). An agent
of another project, or of no project, is never invited into a project's thread: its holder's
grants may not reach that project.
"""

from __future__ import annotations

from collections.abc import Collection

from bzzz import domain
from bzzz.store.directory import AgentDirectory


def best_available(
    directory: AgentDirectory,
    *,
    project: str | None,
    role: str | None = None,
    expertise: list[str] | None = None,
    required: bool = False,
    exclude: Collection[str] = (),
    limit: int = 1,
) -> list[domain.Agent]:
    """Available agents of ``project`` ranked by performance, capability match and load.

    With ``required`` an agent must have all of ``expertise``; otherwise expertise only ranks.
    """
    wanted = expertise or []
    pool = directory.matching(
        agent_id=None, role=role, project=project, task=None, online_only=True
    )
    fits = [
        a
        for a in pool
        if a.project == project
        and a.available
        and a.id not in exclude
        and (not required or domain.expertise_fraction(a, wanted) == 1.0)
    ]
    fits.sort(key=lambda a: (-domain.score_agent(a, wanted), a.id))
    return fits[:limit]
