"""The agent directory: an in-memory read model of every agent, indexed for lookups.

Lookups and the per-call "who is this session" checks are the hot reads of the network; serving
them from memory keeps them in microseconds. The projector updates the directory after each
commit with the agent rows the commit touched, so it never runs ahead of the database.
"""

from __future__ import annotations

import bisect
from collections import OrderedDict, defaultdict
from collections.abc import Iterable
from collections.abc import Set as AbstractSet
from datetime import datetime

from bzzz import domain
from bzzz.address import agent_address
from bzzz.domain import canonical_agent_id

_ANY = ""
SPECIAL_TERMS_KEPT = 256
DENSE_SHARE = 50  # matches above 1/50 of all agents: walking the order beats sorting them


class AgentDirectory:
    """Agents by id, with indexes by role, project and session."""

    def __init__(self) -> None:
        self._agents: dict[str, domain.Agent] = {}
        self._by_role: defaultdict[str, set[str]] = defaultdict(set)
        self._by_project: defaultdict[str, set[str]] = defaultdict(set)
        self._by_session: defaultdict[tuple[str, str], set[str]] = defaultdict(set)
        # Ids by canonical form (NFKC, case-folded): spellings of one id (ISO-A, iso-a).
        self._by_canonical: defaultdict[str, set[str]] = defaultdict(set)
        # Ids by hosting node and by owning principal: a heartbeat, a lease sweep and a
        # principal's quota read their own few agents, not a million of the network's.
        self._by_node: defaultdict[str, set[str]] = defaultdict(set)
        self._by_owner: defaultdict[str, set[str]] = defaultdict(set)
        self._online = 0
        # Per agent: its rank key (-score, id) as a lookup that every filter passes would give
        # it (filters only exclude; expertise that passes is always complete), its lowercased
        # capabilities and specialization. Lookups then rank thousands of matches in C.
        self._keys: dict[str, tuple[int, str]] = {}
        self._by_cap: defaultdict[str, set[str]] = defaultdict(set)
        self._special: dict[str, str] = {}
        self._available: set[str] = set()
        # Every agent's rank key, kept sorted: a lookup matching many agents walks it from the
        # top and stops after ``limit`` hits instead of sorting all its matches.
        self._order: list[tuple[int, str]] = []
        # The same per role: a role-wide lookup walks its role's few thousand, not everyone.
        self._role_order: defaultdict[str, list[tuple[int, str]]] = defaultdict(list)
        # Which agents' specializations contain a wanted term (kept for recent terms).
        self._special_hits: OrderedDict[str, set[str]] = OrderedDict()

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
        score = domain.score_agent(agent, [])
        key = self._keys[agent.id] = (-score, agent.id)
        bisect.insort(self._order, key)
        bisect.insort(self._role_order[agent.role], key)
        for cap in agent.capabilities:
            self._by_cap[cap.lower()].add(agent.id)
        if agent.specialization:
            special = self._special[agent.id] = agent.specialization.lower()
            for term, hits in self._special_hits.items():
                if term in special:
                    hits.add(agent.id)
        if agent.available:
            self._available.add(agent.id)
        self._agents[agent.id] = agent
        self._by_role[agent.role].add(agent.id)
        self._by_project[agent.project or _ANY].add(agent.id)
        self._by_session[_session_index(agent.node_id, agent.session_id)].add(agent.id)
        self._by_canonical[canonical_agent_id(agent.id)].add(agent.id)
        self._by_node[agent.node_id].add(agent.id)
        if agent.owner is not None:
            self._by_owner[agent.owner].add(agent.id)

    def remove(self, agent_id: str) -> None:
        """Take an agent out (a copy of the network's directory losing an entry)."""
        old = self._agents.pop(agent_id, None)
        if old is not None:
            self._unindex(old)
            del self._keys[agent_id]
            self._online -= old.online

    def _unindex(self, agent: domain.Agent) -> None:
        key = self._keys[agent.id]
        _remove_sorted(self._order, key)
        _remove_sorted(self._role_order[agent.role], key)
        for cap in agent.capabilities:
            self._by_cap[cap.lower()].discard(agent.id)
        if self._special.pop(agent.id, None) is not None:
            for hits in self._special_hits.values():
                hits.discard(agent.id)
        self._available.discard(agent.id)
        self._by_role[agent.role].discard(agent.id)
        self._by_project[agent.project or _ANY].discard(agent.id)
        self._by_session[_session_index(agent.node_id, agent.session_id)].discard(agent.id)
        self._by_canonical[canonical_agent_id(agent.id)].discard(agent.id)
        self._by_node[agent.node_id].discard(agent.id)
        if agent.owner is not None:
            self._by_owner[agent.owner].discard(agent.id)

    def touch(self, seen: dict[str, datetime]) -> None:
        """Move agents' last activity forward (from a batch's messages)."""
        for agent_id, at in seen.items():
            agent = self._agents.get(agent_id)
            if agent is not None and agent.last_activity < at:
                agent.last_activity = at

    def get(self, agent_id: str) -> domain.Agent | None:
        """One agent by id."""
        return self._agents.get(agent_id)

    def look_alike(self, agent_id: str) -> domain.Agent | None:
        """An online agent whose id is another spelling of ``agent_id`` (case, NFKC)."""
        for other in sorted(self._by_canonical.get(canonical_agent_id(agent_id), ())):
            agent = self._agents[other]
            if other != agent_id and agent.online:
                return agent
        return None

    def of_session(self, node_id: str, session_id: str) -> list[domain.Agent]:
        """Online agents a session of a node announced (or a principal or handle), by id."""
        ids = self._by_session.get(_session_index(node_id, session_id), set())
        agents = (self._agents[i] for i in sorted(ids))
        return [a for a in agents if a.online]

    def online_of_node(self, node_id: str) -> list[domain.Agent]:
        """Online agents hosted by a node, by id."""
        agents = (self._agents[i] for i in sorted(self._by_node.get(node_id, ())))
        return [a for a in agents if a.online]

    def count_owned(self, owner: str) -> int:
        """How many online agents ``owner`` (a principal id) holds."""
        return sum(1 for i in self._by_owner.get(owner, ()) if self._agents[i].online)

    def owned_by(self, owner: str) -> list[str]:
        """Ids of every agent ``owner`` (a principal id) announced, online or not, sorted."""
        return sorted(self._by_owner.get(owner, ()))

    @property
    def online_count(self) -> int:
        """How many agents are online (kept as agents change)."""
        return self._online

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
        agents = (self._agents[i] for i in self._id_set(agent_id, role, project))
        return [
            a
            for a in agents
            if (task is None or a.task in (None, task)) and (not online_only or a.online)
        ]

    def ranked(
        self,
        *,
        agent_id: str | None,
        role: str | None,
        project: str | None,
        task: str | None,
        available_only: bool,
        min_performance: float | None,
        expertise: list[str],
        limit: int,
        visible: AbstractSet[str] | None = None,
    ) -> tuple[int, list[tuple[int, domain.Agent]]]:
        """(how many match, the best ``limit`` as (score, agent)), best first, ties by id.

        ``visible``: only agents of these projects (a caller's grants); None: every agent.
        """
        # Set algebra and C-level key lookups: a lookup over thousands of matches stays fast.
        # The base set may be an index's own set: every step below builds a new one. The most
        # selective filter (expertise) goes first, so the later ones work on a few hundred ids.
        ids = self._id_set(agent_id, role, project)
        if visible is not None:
            ids = ids & self.of_projects(visible)
        for want in (w.lower() for w in expertise):
            by_cap = self._by_cap.get(want, set())
            ids = (ids & by_cap) | (ids & self._special_containing(want))
        if available_only:
            ids = ids & self._available
        if task is not None:
            ids = {i for i in ids if self._agents[i].task in (None, task)}
        if min_performance is not None:
            ids = {i for i in ids if self._agents[i].performance >= min_performance}
        order = self._order
        if agent_id is None and role is not None and project is None:
            order = self._role_order.get(role, [])
        return len(ids), [(score, self._agents[i]) for score, i in self._best(ids, order, limit)]

    def of_projects(self, projects: AbstractSet[str]) -> set[str]:
        """Ids of the agents that declared one of ``projects``."""
        empty: set[str] = set()
        return set().union(*(self._by_project.get(p, empty) for p in projects if p != _ANY))

    def _special_containing(self, term: str) -> set[str]:
        hits = self._special_hits.get(term)
        if hits is None:
            hits = {i for i, special in self._special.items() if term in special}
            self._special_hits[term] = hits
            if len(self._special_hits) > SPECIAL_TERMS_KEPT:
                self._special_hits.popitem(last=False)
        else:
            self._special_hits.move_to_end(term)
        return hits

    def _best(
        self, ids: AbstractSet[str], order: list[tuple[int, str]], limit: int
    ) -> list[tuple[int, str]]:
        """The best ``limit`` of ``ids``; ``order`` is a ranked list holding all of them."""
        if len(ids) * DENSE_SHARE < len(order):
            # Few matches: sort just them.
            keys = sorted(map(self._keys.__getitem__, ids))[:limit]
            return [(-negated, agent_id) for negated, agent_id in keys]
        # Many matches: walk the order from the top until ``limit`` of them are seen.
        best: list[tuple[int, str]] = []
        if limit <= 0:
            return best
        for negated, agent_id in order:
            if agent_id in ids:
                best.append((-negated, agent_id))
                if len(best) >= limit:
                    break
        return best

    def _id_set(
        self, agent_id: str | None, role: str | None, project: str | None
    ) -> AbstractSet[str]:
        """Ids the address parts fit; read-only (it may be an index's own set)."""
        if agent_id is not None:
            agent = self._agents.get(agent_id)
            if agent is None or (role is not None and agent.role != role):
                return set()
            if project is not None and agent.project not in (None, project):
                return set()
            return {agent_id}
        empty: set[str] = set()
        anywhere = self._by_project.get(_ANY, empty)
        if role is not None:
            by_role = self._by_role.get(role, empty)
            if project is None:
                return by_role
            return (by_role & self._by_project.get(project, empty)) | (by_role & anywhere)
        if project is not None:
            return self._by_project.get(project, empty) | anywhere
        return self._agents.keys()

    def completions(
        self, prefix: str, limit: int, visible: AbstractSet[str] | None = None
    ) -> list[str]:
        """Concrete addresses (without the scheme) of agents whose id starts with ``prefix``.

        ``visible``: only agents of these projects; None: every agent.
        """
        stem = prefix.removeprefix("bzzz://").split(":", 1)[0]
        pool: Iterable[str] = self._agents if visible is None else self.of_projects(visible)
        ids = sorted(i for i in pool if i.startswith(stem))[:limit]
        return [
            agent_address(a.id, a.role, a.project, a.task).removeprefix("bzzz://")
            for a in (self._agents[i] for i in ids)
        ]


def _session_index(node_id: str, session_id: str) -> tuple[str, str]:
    # A principal's or handle's agents are theirs on every node: indexed without the node.
    return ("*" if domain.network_wide_key(session_id) else node_id), session_id


def _remove_sorted(order: list[tuple[int, str]], key: tuple[int, str]) -> None:
    at = bisect.bisect_left(order, key)
    if at < len(order) and order[at] == key:
        del order[at]
