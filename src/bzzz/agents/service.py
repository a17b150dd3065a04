"""Agents: announce, look up, retrieve; agents go offline when their session ends."""

from __future__ import annotations

import asyncio
import hmac
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import Any

from bzzz import domain
from bzzz.access.keys import (
    STATELESS,
    handle_agent,
    handle_hash,
    handle_key,
    holder_of,
    mint_handle,
    principal_key,
)
from bzzz.access.limits import CallLimiter
from bzzz.address import Address, parse_address
from bzzz.agents.federated import federated_get, federated_info
from bzzz.agents.history import ThreadHistory, thread_then, thread_view
from bzzz.agents.knowledge_get import KnowledgeReader, is_knowledge, knowledge_get, no_search
from bzzz.agents.leases import Leases
from bzzz.agents.listing import RemoteAgents
from bzzz.agents.suggestions import agent_not_found
from bzzz.agents.views import agent_info, message_info, task_info, thread_info
from bzzz.domain import RESERVED_AGENT_IDS, iso
from bzzz.errors import (
    BzzzError,
    ErrorCode,
    InvalidParameters,
    PermissionDenied,
    RateLimited,
    ThreadNotFound,
)
from bzzz.eventlog import Caller, EventLog
from bzzz.federation.service import FederationService, not_federated
from bzzz.principal import Principal, Scope
from bzzz.projects import NO_PROJECT
from bzzz.schemas import AnnounceInput, FilterCriteria, GetInput, LookupInput
from bzzz.store.database import Database
from bzzz.store.directory import AgentDirectory
from bzzz.store.pages import Cursor, PageReader
from bzzz.store.repository import Repository

logger = logging.getLogger(__name__)

INFO_CACHE_SIZE = 10_000
ENDED_KEPT = 10_000
# Reasons an envelope was not applied that say nothing about the request's own rules.
_FAILURE_REASONS = ("bad payload", "unknown envelope type", "the network rejected it")


def raise_store_failure(outcome: dict[str, Any]) -> None:
    """Raise NETWORK_ERROR when the store or the network, not a rule, refused an envelope.

    Callers translate the refusals their rules produce (an id held, a limit reached); anything
    else must not be shown as one of those.
    """
    reason = str(outcome.get("reason") or "")
    if not outcome.get("ok") and reason.startswith(_FAILURE_REASONS):
        raise BzzzError(
            f"the node could not apply the change ({reason}); the node logged the details",
            code=ErrorCode.NETWORK_ERROR,
            details={"reason": reason},
        )


class AgentService:
    """Announcement, discovery and retrieval of agents."""

    def __init__(
        self,
        db: Database,
        log: EventLog,
        directory: AgentDirectory,
        max_agents: int,
        *,
        lease_seconds: float = 120.0,
        agents_per_principal: int = 0,
    ) -> None:
        self._db = db
        self._log = log
        self.directory = directory
        self.leases = Leases(lease_seconds)
        self.agents_per_principal = agents_per_principal
        # Called with the ids of agents whose lease ran out, before they go offline (the
        # node ends their subscriptions, so the offline events are not fanned out to them).
        self.before_offline: Callable[[list[str]], Awaitable[int]] | None = None
        # Set by the node: waits for re-announcements after a false node.lost about this node
        # (peers.reclaim), True if there were any; its sessions' agents are then back online.
        self.settle_reclaim: Callable[[], Awaitable[bool]] | None = None
        self._infos: OrderedDict[str, tuple[domain.Agent, datetime, dict[str, Any]]] = OrderedDict()
        self._max_agents = max_agents
        # Set by the node when it federates with other networks.
        self.federation: FederationService | None = None
        # Set by the node: an agent's live path reservations (bzzz://agent/reservations).
        self.reservations_of: Callable[[str], Awaitable[list[dict[str, Any]]]] | None = None
        # Set by the node: a project's knowledge (bzzz://*@PROJECT/knowledge[/<fact_id>]).
        self.knowledge_of: KnowledgeReader | None = None
        # Set by the node: threads replayed from the log (bzzz_get with as_of), and how often
        # a principal may ask for one (a replay reads the log: an expensive call).
        self.history: ThreadHistory | None = None
        self.as_of_limits = CallLimiter("as_of_reads_per_minute", 0, 1)
        # Set by the node when it does not serve every project: lookups of the others read
        # the network's agent directory.
        self.remote: RemoteAgents | None = None
        # Sessions that ended here (the newest ENDED_KEPT): their agents a false loss took
        # offline stay offline (no agent.offline was needed, so none was written).
        self.ended_sessions: OrderedDict[str, None] = OrderedDict()

    async def announce(
        self, caller: Caller, params: AnnounceInput, *, extra: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """Put an agent on the network as the caller's; refuse an id another caller holds.

        ``extra``: more of the agent's metadata, from the node itself (where a bridged
        agent's messages go); a client's announcement carries none.
        """
        if params.agent_id.lower() in RESERVED_AGENT_IDS:
            raise InvalidParameters(
                f"agent id '{params.agent_id}' is reserved; choose another",
                details={"reserved": sorted(RESERVED_AGENT_IDS)},
            )
        _check_human(params)
        params = self._granted(caller.principal, params)
        # An agent of a project this node does not serve lives on a node that does.
        self._log.require_served(params.project or None)
        self._check_look_alike(params.agent_id)
        existing = self.directory.get(params.agent_id)
        held = existing is not None and existing.online
        handle = caller.handle if existing and self._handle_fits(caller, existing) else None
        if held and existing is not None and not (handle or self._holds_by_key(caller, existing)):
            raise self._exists(params.agent_id, caller)
        if not held:
            self._check_quota(caller.principal)
        handle = handle or mint_handle(params.agent_id)
        if held and existing is not None:
            key = existing.session_id  # the holder re-announces: the agent stays where it is
        else:
            key = handle_key(handle) if caller.session_id == STATELESS else caller.session_id
        metadata = (extra or {}) | {
            "owner": caller.principal.id,
            "handle_hash": handle_hash(handle),
        }
        payload = params.model_dump() | {"session_id": key, "metadata": metadata}
        outcome = await self._log.emit(
            "agent.announced",
            "agent",
            params.agent_id,
            payload,
            project=params.project or NO_PROJECT,
        )
        raise_store_failure(outcome)
        if not outcome["ok"]:
            if outcome.get("reason") == "max_agents":
                raise InvalidParameters(
                    f"the network already has its maximum of {self._max_agents} online agents",
                    details={"max_agents": self._max_agents},
                )
            raise self._exists(params.agent_id, caller)
        agent = self.directory.get(params.agent_id)
        assert agent is not None
        self.leases.renew(agent.id)
        return {
            "success": True,
            "message": f"Agent {agent.id} ({agent.role}) announced to BZZZ network",
            "agent": agent_info(agent),
            "agent_handle": handle,
        }

    async def rejoin(self, agents: Sequence[domain.Agent]) -> None:
        """Put agents of this node of one project back online after a false ``node.lost``:
        one ``agent.rejoined`` for them all (on their project's subject). An agent whose
        session ended meanwhile stays offline."""
        agents = [agent for agent in agents if agent.session_id not in self.ended_sessions]
        if not agents:
            return
        project = agents[0].project or NO_PROJECT
        assert all((agent.project or NO_PROJECT) == project for agent in agents)
        ids = [agent.id for agent in agents]
        payload = {"agent_ids": ids, "reason": "its node was taken for lost"}
        await self._log.emit("agent.rejoined", "agent", ids[0], payload, project=project)
        for agent_id in ids:
            self.leases.renew(agent_id)

    @classmethod
    def project_of_announce(cls, who: Principal, params: AnnounceInput) -> str:
        """The project an announcement puts its agent in (NO_PROJECT: none), as announce does."""
        return cls._granted(who, params).project or NO_PROJECT

    @staticmethod
    def _granted(who: Principal, params: AnnounceInput) -> AnnounceInput:
        """The announcement within the principal's grants (its one project by default)."""
        who.require(Scope.WRITE, "announcing an agent")
        who.require_agent(params.agent_id)
        if not who.may_role(params.role):
            raise PermissionDenied(
                f"this credential may not announce agents as '{params.role}' (roles: "
                f"{', '.join(sorted(who.roles)) or 'none'})",
                details={"missing": f"role:{params.role}"},
            )
        if params.project is None and not who.all_projects and len(who.projects) == 1:
            params = params.model_copy(update={"project": next(iter(who.projects))})
        who.require_project(params.project, "announcing an agent")
        return params

    def _check_quota(self, who: Principal) -> None:
        limit = self.agents_per_principal
        if not limit or not who.authenticated:
            return
        held = self.directory.count_owned(who.id)
        if held >= limit:
            raise RateLimited(
                f"this credential already holds {held} online agents (at most {limit})",
                details={"limit": limit, "retry_after": self.leases.seconds},
            )

    def _holds_by_key(self, caller: Caller, agent: domain.Agent) -> bool:
        """Whether the caller's own key (session, process, principal) holds ``agent``."""
        if _token_agent(caller, agent):
            return True
        if caller.session_id == STATELESS or agent.session_id != caller.session_id:
            return False
        return agent.node_id == self._log.node_id or domain.network_wide_key(agent.session_id)

    @staticmethod
    def _handle_fits(caller: Caller, agent: domain.Agent) -> bool:
        if caller.handle is None or not caller.handle.startswith(f"{agent.id}:"):
            return False
        if not hmac.compare_digest(handle_hash(caller.handle), agent.handle_hash or ""):
            return False
        # A handle is the agent's, not a way around another principal's grants.
        return not caller.principal.authenticated or agent.owner == caller.principal.id

    @staticmethod
    def _exists(agent_id: str, caller: Caller) -> InvalidParameters:
        return InvalidParameters(
            f"Agent ID already exists: '{agent_id}' is held by a live agent of another "
            f"{holder_of(caller)}",
            details={"agent_id": agent_id},
        )

    def _check_look_alike(self, agent_id: str) -> None:
        """Refuse an id that a live agent holds in another spelling (case, NFKC)."""
        other = self.directory.look_alike(agent_id)
        if other is not None:
            raise InvalidParameters(
                f"Agent ID already exists: '{agent_id}' is another spelling of live agent "
                f"'{other.id}' (ids are compared ignoring case and Unicode look-alikes)",
                details={"agent_id": agent_id, "look_alike": other.id},
            )

    def _info(self, agent: domain.Agent) -> dict[str, Any]:
        # Lookups show the same popular agents again and again; their JSON is kept while the
        # directory's object for them (and its last activity) stays the same.
        cached = self._infos.get(agent.id)
        if cached is not None and cached[0] is agent and cached[1] == agent.last_activity:
            self._infos.move_to_end(agent.id)
            return cached[2]
        info = agent_info(agent)
        self._infos[agent.id] = (agent, agent.last_activity, info)
        if len(self._infos) > INFO_CACHE_SIZE:
            self._infos.popitem(last=False)
        return info

    async def lookup(self, caller: Caller, params: LookupInput) -> dict[str, Any]:
        """Agents matching an address and filters, best first (federated networks too).

        Only agents of the caller's projects are seen.
        """
        if caller.handle is not None:
            await self.agents_of(caller)  # as every call that names its agent: renews its lease
        address = parse_address(params.semantic_address)
        criteria = params.filter_criteria or FilterCriteria()
        visible = visible_projects(caller.principal)
        total = 0
        found: list[tuple[float, dict[str, Any]]] = []
        searched = await self._searched(address, visible)
        for network, directory in searched:
            count, scored = directory.ranked(
                agent_id=address.agent,
                role=address.role,
                project=address.project,
                task=address.task,
                available_only=bool(criteria.availability),
                min_performance=criteria.performance_threshold,
                expertise=criteria.expertise,
                limit=params.limit,
                visible=visible,
            )
            total += count
            found.extend((score, self._match(agent, score, network)) for score, agent in scored)
        if len(searched) > 1:
            found = _merged(found, by_id=all(network is None for network, _ in searched))
        matches = [match for _, match in found[: params.limit]]
        return {
            "success": True,
            "address": params.semantic_address,
            "parsed_address": address.to_dict(params.semantic_address),
            "matches": matches,
            "count": len(matches),
            "total_matches": total,
            "query_time": iso(domain.utcnow()),
        }

    async def _searched(
        self, address: Address, visible: frozenset[str] | None
    ) -> list[tuple[str | None, AgentDirectory]]:
        """The directories a lookup reads: the network directory stands in for the projects
        this node does not serve."""
        searched = self._directories(address.network)
        if self.remote is None or address.network not in (None, self._log.network):
            return searched
        own = await self.remote.searched(address.project, visible, self.directory)
        return [(None, directory) for directory in own] + searched[1:]

    def _directories(self, network: str | None) -> list[tuple[str | None, AgentDirectory]]:
        """Where a lookup searches: this network (None) and the federated ones it names."""
        own: list[tuple[str | None, AgentDirectory]] = [(None, self.directory)]
        if network == self._log.network:
            return own
        if network is not None:
            return [(network, self.federation_of(network).directory(network))]
        if self.federation is None:
            return own
        return own + list(self.federation.directories().items())

    def federation_of(self, network: str) -> FederationService:
        """The federation that reaches ``network``; INVALID_PARAMETERS when there is none."""
        if self.federation is None:
            raise not_federated(network, [])
        return self.federation

    def _match(self, agent: domain.Agent, score: float, network: str | None) -> dict[str, Any]:
        if network is None:
            return self._info(agent) | {"score": score}
        return federated_info(agent, network) | {"score": score, "network": network}

    async def get(self, caller: Caller, params: GetInput) -> dict[str, Any]:
        """The content at an address: an agent, its inbox, its tasks, or a thread.

        An agent is seen only in the caller's projects; its inbox, tasks, activity and
        threads only by its owner and its project's admins; a thread only by its participants
        and its project's admins.
        """
        address = parse_address(params.address)
        path = address.path or ""
        if self.knowledge_of is not None and is_knowledge(address):
            self._log.require_served(address.project)
            return await knowledge_get(self.knowledge_of, caller, address, params)
        no_search(params)
        if params.as_of is not None and not path.startswith("/threads/"):
            raise InvalidParameters(
                "as_of reads a thread as it stood: bzzz://…/threads/<thread_id>",
                details={"field": "as_of", "address": params.address},
            )
        if address.network is not None and address.network != self._log.network:
            assert address.network is not None
            return federated_get(self.federation_of(address.network), params, address)
        async with self._db.session() as session:
            repo = Repository(session)
            if path.startswith("/threads/"):
                content = await self._thread_content(repo, caller, address, params)
                kind = "thread"
            else:
                agent = self._agent_at(caller, address)
                content, kind = await self._agent_content(repo, caller, agent, path, params)
        result: dict[str, Any] = {
            "success": True,
            "address": params.address,
            "content": content,
            "retrieved_at": iso(domain.utcnow()),
        }
        if params.include_metadata:
            result["metadata"] = {
                "last_updated": content.get("last_updated"),
                "content_type": kind,
                "version": "1.0",
            }
        return result

    def _agent_at(self, caller: Caller, address: Address) -> domain.Agent:
        if address.agent is None:
            raise InvalidParameters(
                "bzzz_get needs a concrete agent id in the address (use bzzz_lookup for wildcards)",
                details={"address": address.to_dict("")},
            )
        agent = self.visible_agent(caller.principal, address.agent)
        if agent is None or not address.matches(agent.id, agent.role, agent.project, agent.task):
            raise agent_not_found(
                self.directory,
                caller.principal,
                address.agent,
                f"no agent '{address.agent}' at that address",
                address.project,
            )
        return agent

    async def _agent_content(
        self,
        repo: Repository,
        caller: Caller,
        agent: domain.Agent,
        path: str,
        params: GetInput,
    ) -> tuple[dict[str, Any], str]:
        if self.holds(caller, agent):
            self.leases.renew(agent.id)  # its owner named it
        info = agent_info(agent)
        base = {"agent_info": info, "last_updated": info["last_activity"]}
        if path == "" and self.reservations_of is not None:
            # How many paths it holds, as anyone of its project may list them.
            base["reservation_count"] = len(await self.reservations_of(agent.id))
        n = params.max_history
        if path == "/threads":
            self._no_cursor(params, path)
            threads = await repo.threads_of([agent.id], limit=max(n, 1))
            shown = [t for t in threads if self.may_read_thread(caller, t)]
            return base | {"threads": [thread_info(t) for t in shown]}, "threads"
        if path == "/reservations":
            # What an agent holds is what bzzz_reserve list shows everyone in its project.
            self._no_cursor(params, path)
            held = await self.reservations_of(agent.id) if self.reservations_of else []
            return base | {"reservations": held, "count": len(held)}, "reservations"
        if path == "/tasks" and self.may_read_tasks(caller, agent):
            pass  # the team reads its project's tasks
        elif path in ("", "/inbox", "/tasks") and not self.may_read(caller, agent):
            if path == "":
                # Anyone who sees the agent sees what a lookup shows; its work is private.
                return base, "agent_data"
            self.require_reader(caller, agent)
        pages = PageReader(repo.session)
        cursor = Cursor(params.before, params.after)
        if path == "":
            activity = await pages.activity(agent.id, n, cursor)
            tasks = await repo.tasks(agent.id, active_only=True, limit=agent.max_tasks + 50)
            return base | {
                "recent_activity": [
                    {
                        "id": entry_id,
                        "type": a.kind,
                        "summary": a.summary,
                        "ref": a.ref,
                        "timestamp": iso(a.at),
                    }
                    for entry_id, a in zip(activity.ids, activity.entries, strict=True)
                ],
                "current_tasks": [task_info(t) for t in tasks],
                "page": activity.info(),
            }, "agent_data"
        if path == "/inbox":
            inbox = await pages.inbox(agent.id, n, cursor)
            messages = [message_info(m) for m in inbox.entries]
            return base | {"messages": messages, "page": inbox.info()}, "inbox"
        if path == "/tasks":
            listed = await pages.tasks(agent.id, n, cursor)
            return base | {
                "tasks": [task_info(t) for t in listed.entries],
                "page": listed.info(),
            }, "tasks"
        raise InvalidParameters(
            f"unknown path '{path}'; valid paths: /inbox, /tasks, /threads, /threads/<id>, "
            "/reservations",
            details={"path": path},
        )

    async def _thread_content(
        self, repo: Repository, caller: Caller, address: Address, params: GetInput
    ) -> dict[str, Any]:
        assert address.path is not None
        thread_id = address.path.removeprefix("/threads/").strip("/")
        thread = await repo.thread(thread_id)
        if thread is None or "/" in thread_id:
            raise ThreadNotFound(f"no thread '{thread_id}'", details={"thread_id": thread_id})
        if address.agent is not None:
            self._agent_at(caller, address)
        self.require_thread_reader(caller, thread)
        if params.as_of is not None:
            self.as_of_limits.take(caller.principal.id)
            return await thread_then(self.history, thread_id, params, thread_view)
        return await thread_view(repo, thread, params)

    async def thread_envelopes(self, caller: Caller, thread_id: str) -> list[dict[str, Any]]:
        """A thread's envelopes in log order, each verified again (for who reads the thread)."""
        async with self._db.session() as session:
            thread = await Repository(session).thread(thread_id)
        if thread is None:
            raise ThreadNotFound(f"no thread '{thread_id}'", details={"thread_id": thread_id})
        self.require_thread_reader(caller, thread)
        if self.history is None:
            raise InvalidParameters("this node does not replay threads")
        self.as_of_limits.take(caller.principal.id)
        return [entry.to_json() for entry in await self.history.entries(thread_id)]

    @staticmethod
    def _no_cursor(params: GetInput, path: str) -> None:
        if params.before is not None or params.after is not None:
            raise InvalidParameters(
                f"'{path}' cannot be paged; before / after page an inbox, tasks, activity "
                "(bzzz://agent-id) or a thread",
                details={"path": path},
            )

    async def session_ended(self, caller: Caller, reason: str = "session ended") -> list[str]:
        """Take the agents a session announced offline; returns their ids."""
        self.ended_sessions[caller.session_id] = None
        while len(self.ended_sessions) > ENDED_KEPT:
            self.ended_sessions.popitem(last=False)
        agents = self.directory.of_session(self._log.node_id, caller.session_id)
        if not agents:
            return []
        await self._offline(agents, caller.session_id, reason)
        return [a.id for a in agents]

    async def _offline(self, agents: list[domain.Agent], session_id: str, reason: str) -> None:
        """One ``agent.offline`` per project of ``agents`` (each on its project's subject)."""
        by_project: dict[str, list[str]] = {}
        for agent in agents:
            by_project.setdefault(agent.project or NO_PROJECT, []).append(agent.id)
        for project, ids in by_project.items():
            if not self._log.projects.serves(project):
                # Held here before this node stopped serving the project: its nodes' leases
                # take the agents offline; this node writes no content of it.
                logger.warning("agents %s of project %s not taken offline here", ids, project)
                continue
            await self._log.emit(
                "agent.offline",
                "agent",
                ids[0],
                {"agent_ids": ids, "session_id": session_id, "reason": reason},
                project=project,
            )

    async def release_stale(self, reason: str = "node restarted") -> int:
        """Take every online agent this node hosts offline (start-up after a crash, shutdown)."""
        agents = self.directory.online_of_node(self._log.node_id)
        by_session: dict[str, list[domain.Agent]] = {}
        for agent in agents:
            by_session.setdefault(agent.session_id, []).append(agent)
        for session_id, held in by_session.items():
            await self._offline(held, session_id, reason)
        return len(agents)

    async def agents_of(self, caller: Caller) -> list[domain.Agent]:
        """The online agents the caller may act as: its key's, and its handle's agent.

        Acting as an agent renews its lease.
        """
        mine = self._acting(caller)
        if not mine and self.settle_reclaim is not None and await self.settle_reclaim():
            # Peers took this node for lost while it was alive: its agents come back.
            mine = self._acting(caller)
        if caller.handle is not None and all(a.id != handle_agent(caller.handle) for a in mine):
            agent = self.directory.get(handle_agent(caller.handle))
            if agent is not None and agent.online:
                raise PermissionDenied(
                    "agent_handle does not match the agent (announce it again for a new one)",
                    details={"missing": "agent_handle", "agent_id": agent.id},
                )
        for agent in mine:
            self.leases.renew(agent.id)
        return mine

    def holds(self, caller: Caller, agent: domain.Agent) -> bool:
        """Whether the caller may act as ``agent``."""
        return self._holds_by_key(caller, agent) or self._handle_fits(caller, agent)

    def may_read(self, caller: Caller, agent: domain.Agent) -> bool:
        """Owner or project admin: may read the agent's inbox, tasks, activity and threads."""
        who = caller.principal
        if who.is_admin_of(agent.project) or self.holds(caller, agent):
            return True
        return who.authenticated and agent.owner == who.id

    def require_reader(self, caller: Caller, agent: domain.Agent) -> None:
        """PERMISSION_DENIED unless the caller may read the agent's private content."""
        if not self.may_read(caller, agent):
            raise PermissionDenied(
                f"only the owner of '{agent.id}' and admins of its project read its inbox, "
                "tasks and activity",
                details={"missing": "owner_or_admin", "agent_id": agent.id},
            )

    def visible_agent(self, who: Principal, agent_id: str) -> domain.Agent | None:
        """The agent if it exists in one of the principal's projects, else None."""
        agent = self.directory.get(agent_id)
        if agent is None or not who.may_see_project(agent.project):
            return None
        return agent

    def may_read_tasks(self, caller: Caller, agent: domain.Agent) -> bool:
        """Its owner, its project's admins, and every credential of its project (the team
        sees the project's work; its inbox stays its owner's)."""
        return self.may_read(caller, agent) or _teammate(caller.principal, agent.project)

    def may_read_thread(self, caller: Caller, thread: domain.Thread) -> bool:
        """A participant (through an agent the caller acts as, or one its principal owns,
        whatever client announced it), the principal that created it, every credential of
        its project (the team reads the project's threads), an admin of its project, or a
        person (role ``human``) of its project once it escalated to humans."""
        who = caller.principal
        project = thread_project(thread)
        if who.is_admin_of(project):
            return True
        if who.is_human and who.may_see_project(project) and thread.asks_a_human:
            return True
        if _teammate(who, project):
            return True
        members = set(thread.active_participants)
        if any(a.id in members for a in self._acting(caller)):
            return True
        if not who.authenticated or not who.may_see_project(project):
            return False
        return thread.creator == who.actor or any(
            agent is not None and agent.owner == who.id
            for agent in map(self.directory.get, members)
        )

    def require_thread_reader(self, caller: Caller, thread: domain.Thread) -> None:
        """THREAD_NOT_FOUND outside the thread's project; PERMISSION_DENIED for a non-member."""
        if not caller.principal.may_see_project(thread_project(thread)):
            raise ThreadNotFound(f"no thread '{thread.id}'", details={"thread_id": thread.id})
        if not self.may_read_thread(caller, thread):
            raise PermissionDenied(
                f"only participants of thread '{thread.id}' read it",
                details={"missing": "participant", "thread_id": thread.id},
            )

    def _acting(self, caller: Caller) -> list[domain.Agent]:
        mine: list[domain.Agent] = []
        if caller.session_id != STATELESS:
            mine = self.directory.of_session(self._log.node_id, caller.session_id)
        if caller.handle is not None:
            agent = self.directory.get(handle_agent(caller.handle))
            fits = agent is not None and agent.online and self._handle_fits(caller, agent)
            if fits and agent is not None and agent not in mine:
                mine.append(agent)
        if caller.principal.agent is not None:
            agent = self.directory.get(caller.principal.agent)
            if agent is not None and agent.online and _token_agent(caller, agent):
                mine = [agent]  # an agent token acts as its agent alone, whatever else
        return mine

    async def expire_leases(self) -> list[str]:
        """Take this node's sessionless agents whose lease ran out offline; their ids."""
        expired = self.leases.expired(self.directory.online_of_node(self._log.node_id))
        by_key: dict[str, list[domain.Agent]] = {}
        for agent in expired:
            by_key.setdefault(agent.session_id, []).append(agent)
        if expired and self.before_offline is not None:
            await self.before_offline([a.id for a in expired])
        for key, held in by_key.items():
            await self._offline(held, key, "lease expired")
            self.leases.forget([a.id for a in held])
        return [a.id for a in expired]

    async def run_leases(self) -> None:
        """Expire leases until cancelled (a node's background task)."""
        interval = min(max(self.leases.seconds / 4, 0.05), 5.0)
        while True:
            await asyncio.sleep(interval)
            try:
                await self.expire_leases()
            except BzzzError as exc:
                logger.warning("could not expire agent leases: %s", exc.message)


def _teammate(who: Principal, project: str | None) -> bool:
    """A named credential granted ``project`` (any scope): it reads the project's threads
    and tasks. Not for what belongs to no project."""
    return who.authenticated and project is not None and who.may_see_project(project)


def _token_agent(caller: Caller, agent: domain.Agent) -> bool:
    """Whether the caller's agent token is ``agent``: the token's agent id, announced with
    this token (in any session: a legacy client's stays online while its session lives) or
    sessionless with any token of that agent (the key every token of one agent shares)."""
    who = caller.principal
    if who.agent is None or agent.id != who.agent:
        return False
    return agent.owner == who.id or agent.session_id == principal_key(who)


def _check_human(params: AnnounceInput) -> None:
    """``human-…`` ids are for agents of role ``human``, and the other way round: an agent
    cannot pass for a person in a thread."""
    human_id = params.agent_id.lower().startswith(domain.HUMAN_AGENT_PREFIX)
    if human_id != (params.role == domain.HUMAN_ROLE):
        raise InvalidParameters(
            f"agent ids starting with '{domain.HUMAN_AGENT_PREFIX}' are for the role "
            f"'{domain.HUMAN_ROLE}' (people in the human console), and that role takes such ids "
            "only",
            details={"field": "agent_id" if human_id else "role"},
        )


def _merged(
    found: list[tuple[float, dict[str, Any]]], *, by_id: bool
) -> list[tuple[float, dict[str, Any]]]:
    """Matches of several directories, best first. This network's parts (store and network
    directory) rank as one store does, ties by id, each agent once; federated networks' keep
    their own order on ties."""
    if not by_id:
        return sorted(found, key=lambda pair: -pair[0])
    seen: set[str] = set()
    unique = []
    for score, match in found:
        if match["id"] not in seen:
            seen.add(match["id"])
            unique.append((score, match))
    return sorted(unique, key=lambda pair: (-pair[0], pair[1]["id"]))


def visible_projects(who: Principal) -> frozenset[str] | None:
    """The projects whose agents a principal sees; None: every agent."""
    return None if who.all_projects else who.projects


async def thread_project_in(db: Database, thread_id: str) -> str:
    """The project a thread's envelopes go to: its own, NO_PROJECT for none (or no thread)."""
    async with db.session() as session:
        thread = await Repository(session).thread(thread_id)
    return (thread_project(thread) if thread is not None else None) or NO_PROJECT


def thread_project(thread: domain.Thread) -> str | None:
    """The project a thread belongs to (its creator's, recorded when it was created)."""
    project = thread.metadata.get("project")
    return project if isinstance(project, str) else None
