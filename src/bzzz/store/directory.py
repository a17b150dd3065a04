"""The agent directory: an in-memory read model of every agent, indexed for lookups.

Lookups and the per-call "who is this session" checks are the hot reads of the network; serving
them from memory keeps them in microseconds. The projector updates the directory after each
commit with the agent rows the commit touched, so it never runs ahead of the database.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from datetime import datetime

from bzzz import domain
from bzzz.address import agent_address

_ANY = ""


class AgentDirectory:
    """Agents by id, with indexes by role, project and session."""

    def __init__(self) -> None:
        self._agents: dict[str, domain.Agent] = {}
        self._by_role: defaultdict[str, set[str]] = defaultdict(set)
        self._by_project: defaultdict[str, set[str]] = defaultdict(set)
        self._by_session: defaultdict[tuple[str, str], set[str]] = defaultdict(set)
        self._online = 0

    def __len__(self) -> int:
        return len(self._agents)

    def load(self, agents: Iterable[domain.Agent]) -> None:
        """Fill the directory (start-up)."""
        for agent in agents:
            self.put(agent)

    def put(self, agent: domain.Agent) -> None:
        """Insert or replace an agent."""
        old = self._agents.get(agent.id)
        if old is not None:
            self._unindex(old)
            self._online -= old.online
        self._online += agent.online
        self._agents[agent.id] = agent
        self._by_role[agent.role].add(agent.id)
        self._by_project[agent.project or _ANY].add(agent.id)
        self._by_session[(agent.node_id, agent.session_id)].add(agent.id)

    def _unindex(self, agent: domain.Agent) -> None:
        self._by_role[agent.role].discard(agent.id)
        self._by_project[agent.project or _ANY].discard(agent.id)
        self._by_session[(agent.node_id, agent.session_id)].discard(agent.id)

    def touch(self, seen: dict[str, datetime]) -> None:
        """Move agents' last activity forward (from a batch's messages)."""
        for agent_id, at in seen.items():
            agent = self._agents.get(agent_id)
            if agent is not None and agent.last_activity < at:
                agent.last_activity = at

    def get(self, agent_id: str) -> domain.Agent | None:
        """One agent by id."""
        return self._agents.get(agent_id)

    def of_session(self, node_id: str, session_id: str) -> list[domain.Agent]:
        """Online agents a session of a node announced, by id."""
        ids = self._by_session.get((node_id, session_id), set())
        agents = (self._agents[i] for i in sorted(ids))
        return [a for a in agents if a.online]

    def online_of_node(self, node_id: str) -> list[domain.Agent]:
        """Online agents hosted by a node."""
        return [a for a in self._agents.values() if a.node_id == node_id and a.online]

    @property
    def online_count(self) -> int:
        """How many agents are online (kept as agents change)."""
        return self._online

    def _candidates(self, role: str | None, project: str | None) -> Iterable[str]:
        if role is not None and project is not None:
            by_role = self._by_role.get(role, set())
            in_project = self._by_project.get(project, set()) | self._by_project.get(_ANY, set())
            return by_role & in_project if len(by_role) > len(in_project) else by_role
        if role is not None:
            return self._by_role.get(role, set())
        if project is not None:
            return self._by_project.get(project, set()) | self._by_project.get(_ANY, set())
        return self._agents.keys()

    def matching(
        self,
        *,
        agent_id: str | None,
        role: str | None,
        project: str | None,
        task: str | None,
        online_only: bool = False,
    ) -> list[domain.Agent]:
        """Agents whose declared id/role/project/task fit; undeclared project/task fit any."""
        if agent_id is not None:
            one = self._agents.get(agent_id)
            candidates: Iterable[domain.Agent] = [one] if one is not None else []
        else:
            candidates = (self._agents[i] for i in self._candidates(role, project))
        found = []
        for agent in candidates:
            if role is not None and agent.role != role:
                continue
            if project is not None and agent.project not in (None, project):
                continue
            if task is not None and agent.task not in (None, task):
                continue
            if online_only and not agent.online:
                continue
            found.append(agent)
        return found

    def completions(self, prefix: str, limit: int) -> list[str]:
        """Concrete addresses (without the scheme) of agents whose id starts with ``prefix``."""
        stem = prefix.removeprefix("bzzz://").split(":", 1)[0]
        ids = sorted(i for i in self._agents if i.startswith(stem))[:limit]
        return [
            agent_address(a.id, a.role, a.project, a.task).removeprefix("bzzz://")
            for a in (self._agents[i] for i in ids)
        ]
