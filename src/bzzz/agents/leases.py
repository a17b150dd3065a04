"""Leases: a sessionless caller's agent stays online while its owner keeps using it."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from bzzz import domain

# Keys whose agents live as long as something else does: an MCP session, a stdio process,
# a hosted agent of this node. Every other key's agents live by their lease.
SESSION_KEYS = ("mcp-", "conn-", "proc-", "hosted-")


def lease_bound(session_id: str) -> bool:
    """Whether agents held under ``session_id`` go offline when their lease runs out."""
    return not session_id.startswith(SESSION_KEYS)


class Leases:
    """When each agent's owner last acted as it or named it (this node's clock)."""

    def __init__(self, seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.seconds = seconds
        self._clock = clock
        self._renewed: dict[str, float] = {}
        # An agent this node has not seen used since it started counts from the start.
        self._started = clock()

    def renew(self, agent_id: str) -> None:
        """The owner used the agent now."""
        self._renewed[agent_id] = self._clock()

    def expired(self, agents: Iterable[domain.Agent]) -> list[domain.Agent]:
        """The lease-bound ones among ``agents`` whose lease has run out."""
        cutoff = self._clock() - self.seconds
        return [
            a
            for a in agents
            if lease_bound(a.session_id) and self._renewed.get(a.id, self._started) < cutoff
        ]

    def forget(self, agent_ids: Iterable[str]) -> None:
        """Drop the leases of agents that went offline."""
        for agent_id in agent_ids:
            self._renewed.pop(agent_id, None)

    def remaining(self, agent: domain.Agent) -> float | None:
        """Seconds left on ``agent``'s lease by this node's clock; None when it lives by its
        session instead (an MCP session, a stdio process, a hosted agent)."""
        if not lease_bound(agent.session_id):
            return None
        renewed = self._renewed.get(agent.id, self._started)
        return max(0.0, renewed + self.seconds - self._clock())
