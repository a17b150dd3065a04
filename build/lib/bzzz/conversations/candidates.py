"""Choosing the best available agents to invite (reviews, experts, architects)."""

from __future__ import annotations

from collections.abc import Collection
from collections.abc import Set as AbstractSet

from bzzz import domain
from bzzz.store.directory import AgentDirectory


def best_available(
    directory: AgentDirectory,
    *,
    role: str | None = None,
    expertise: list[str] | None = None,
    required: bool = False,
    exclude: Collection[str] = (),
    limit: int = 1,
    visible: AbstractSet[str] | None = None,
) -> list[domain.Agent]:
    """Available agents ranked by availability, performance, capability match and load.

    With ``required`` an agent must have all of ``expertise``; otherwise expertise only ranks.
    ``visible``: only agents of these projects (None: any).
    """
    wanted = expertise or []
    if role is None and wanted and required:
        _total, ranked = directory.ranked(
            agent_id=None,
            role=None,
            project=None,
            task=None,
            available_only=True,
            min_performance=None,
            expertise=wanted,
            limit=limit + len(exclude),
            visible=visible,
        )
        return [a for _s, a in ranked if a.id not in exclude][:limit]
    pool = directory.matching(agent_id=None, role=role, project=None, task=None, online_only=True)
    if visible is not None:
        pool = [a for a in pool if a.project in visible]
    fits = [
        a
        for a in pool
        if a.available
        and a.id not in exclude
        and (not required or domain.expertise_fraction(a, wanted) == 1.0)
    ]
    fits.sort(key=lambda a: (-domain.score_agent(a, wanted), a.id))
    return fits[:limit]
