"""Agents: announce, look up, retrieve; agents go offline when their session ends."""

from __future__ import annotations

import logging
from collections import OrderedDict
from datetime import datetime
from typing import Any

from bzzz import domain
from bzzz.address import Address, agent_address, parse_address
from bzzz.domain import RESERVED_AGENT_IDS, iso
from bzzz.errors import AgentNotFound, BzzzError, ErrorCode, InvalidParameters, ThreadNotFound
from bzzz.eventlog import Caller, EventLog
from bzzz.federation.service import FederationService, not_federated
from bzzz.schemas import AnnounceInput, FilterCriteria, GetInput, LookupInput
from bzzz.store.database import Database
from bzzz.store.directory import AgentDirectory
from bzzz.store.pages import Cursor, PageReader
from bzzz.store.repository import Repository

logger = logging.getLogger(__name__)

INFO_CACHE_SIZE = 10_000
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


def agent_info(agent: domain.Agent) -> dict[str, Any]:
    """The agent as the tools show it."""
    return {
        "id": agent.id,
        "role": agent.role,
        "capabilities": agent.capabilities,
        "specialization": agent.specialization,
        "status": agent.status,
        "available": agent.available,
        "performance": agent.performance,
        "max_tasks": agent.max_tasks,
        "active_tasks": agent.active_tasks,
        "project": agent.project,
        "task": agent.task,
        "address": agent_address(agent.id, agent.role, agent.project, agent.task),
        "node_id": agent.node_id,
        "created_at": iso(agent.created_at),
        "last_activity": iso(agent.last_activity),
    }


def task_info(task: domain.Task) -> dict[str, Any]:
    """A task as the tools show it (the reference's AgentTask plus who assigned it)."""
    return {
        "id": task.id,
        "type": task.type,
        "description": task.description,
        "status": task.status,
        "priority": task.priority,
        "assigner": task.assigner,
        "data": task.data,
        "thread_id": task.thread_id,
        "progress": task.progress,
        "result": task.result,
        "error": task.error,
        "startTime": iso(task.start_time),
        "endTime": iso(task.end_time),
    }


def message_info(message: domain.Message) -> dict[str, Any]:
    """A message as the tools show it."""
    return {
        "id": message.id,
        "sender": message.sender,
        "message_type": message.message_type,
        "content": message.content,
        "priority": message.priority,
        "thread_id": message.thread_id,
        "reply_to": message.reply_to,
        "recipients": message.recipients,
        "target_address": message.target_address,
        "timestamp": iso(message.posted_at),
    }


def thread_info(
    thread: domain.Thread,
    messages: list[domain.Message] | None = None,
    reactions: list[domain.Reaction] | None = None,
) -> dict[str, Any]:
    """A thread as the tools show it (the reference's ConversationThread, with the design's
    shared context, decision log and consensus)."""
    info: dict[str, Any] = {
        "id": thread.id,
        "topic": thread.topic,
        "participants": thread.active_participants,
        "former_participants": [p.agent_id for p in thread.participants if not p.active],
        "creator": thread.creator,
        "status": thread.status,
        "created_at": iso(thread.created_at),
        "last_activity": iso(thread.last_activity),
        "message_count": thread.message_count,
        "summary": thread.summary,
        "metadata": thread.metadata,
        "escalation_history": thread.escalation_history,
        "shared_context": thread.shared_context,
        "decision_log": thread.decision_log,
        "consensus": thread.consensus,
    }
    if messages is not None:
        # Grouped once: a message's own stance, and the stances taken on it.
        stance_of: dict[str, domain.Reaction] = {}
        taken_on: dict[str, list[domain.Reaction]] = {}
        for r in reactions or []:
            stance_of.setdefault(r.message_id, r)
            taken_on.setdefault(r.target_id, []).append(r)
        info["messages"] = [
            _thread_message(m, stance_of.get(m.id), taken_on.get(m.id, [])) for m in messages
        ]
    return info


def _thread_message(
    message: domain.Message, own: domain.Reaction | None, on_it: list[domain.Reaction]
) -> dict[str, Any]:
    return {
        "id": message.id,
        "threadId": message.thread_id,
        "sender": message.sender,
        "content": message.content.get("text", message.content) if message.content else "",
        "messageType": message.message_type,
        "timestamp": iso(message.posted_at),
        "replyTo": message.reply_to,
        "stance": own.stance if own else None,
        "reactions": [
            {
                "agent_id": r.agent_id,
                "stance": r.stance,
                "source": r.source,
                "message_id": r.message_id,
                "timestamp": iso(r.at),
            }
            for r in on_it
        ],
        "metadata": {k: v for k, v in message.content.items() if k != "text"},
    }


class AgentService:
    """Announcement, discovery and retrieval of agents."""

    def __init__(
        self, db: Database, log: EventLog, directory: AgentDirectory, max_agents: int
    ) -> None:
        self._db = db
        self._log = log
        self.directory = directory
        self._infos: OrderedDict[str, tuple[domain.Agent, datetime, dict[str, Any]]] = OrderedDict()
        self._max_agents = max_agents
        # Set by the node when it federates with other networks.
        self.federation: FederationService | None = None

    async def announce(self, caller: Caller, params: AnnounceInput) -> dict[str, Any]:
        """Put an agent on the network as this session's; refuse an id a live session holds."""
        if params.agent_id.lower() in RESERVED_AGENT_IDS:
            raise InvalidParameters(
                f"agent id '{params.agent_id}' is reserved; choose another",
                details={"reserved": sorted(RESERVED_AGENT_IDS)},
            )
        existing = self.directory.get(params.agent_id)
        if (
            existing is not None
            and existing.online
            and ((existing.node_id, existing.session_id) != (self._log.node_id, caller.session_id))
        ):
            raise self._exists(params.agent_id)
        payload = params.model_dump() | {"session_id": caller.session_id, "metadata": {}}
        outcome = await self._log.emit("agent.announced", "agent", params.agent_id, payload)
        raise_store_failure(outcome)
        if not outcome["ok"]:
            if outcome.get("reason") == "max_agents":
                raise InvalidParameters(
                    f"the network already has its maximum of {self._max_agents} online agents",
                    details={"max_agents": self._max_agents},
                )
            raise self._exists(params.agent_id)
        agent = self.directory.get(params.agent_id)
        assert agent is not None
        return {
            "success": True,
            "message": f"Agent {agent.id} ({agent.role}) announced to BZZZ network",
            "agent": agent_info(agent),
        }

    @staticmethod
    def _exists(agent_id: str) -> InvalidParameters:
        return InvalidParameters(
            f"Agent ID already exists: '{agent_id}' is held by a live agent of another session",
            details={"agent_id": agent_id},
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

    async def lookup(self, params: LookupInput) -> dict[str, Any]:
        """Agents matching an address and filters, best first (federated networks too)."""
        address = parse_address(params.semantic_address)
        criteria = params.filter_criteria or FilterCriteria()
        total = 0
        found: list[tuple[float, dict[str, Any]]] = []
        searched = self._directories(address.network)
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
            )
            total += count
            found.extend((score, self._match(agent, score, network)) for score, agent in scored)
        if len(searched) > 1:
            found.sort(key=lambda pair: -pair[0])  # stable: ties keep each network's order
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
        # Another network's agent: its address says where it lives, for bzzz_post.
        remote = agent_info(agent)
        remote["address"] = f"{remote['address']}?network={network}"
        return remote | {"score": score, "network": network}

    async def get(self, params: GetInput) -> dict[str, Any]:
        """The content at an address: an agent, its inbox, its tasks, or a thread."""
        address = parse_address(params.address)
        if address.network is not None and address.network != self._log.network:
            return self._remote_get(params, address)
        path = address.path or ""
        async with self._db.session() as session:
            repo = Repository(session)
            if path.startswith("/threads/"):
                content, kind = await self._thread_content(repo, address, params), "thread"
            else:
                agent = await self._agent_at(repo, address)
                content, kind = await self._agent_content(repo, agent, path, params)
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

    def _remote_get(self, params: GetInput, address: Address) -> dict[str, Any]:
        """An agent of a federated network: what that network announced of it, nothing more."""
        assert address.network is not None
        directory = self.federation_of(address.network).directory(address.network)
        if address.path is not None or address.agent is None:
            raise InvalidParameters(
                "on another network only an agent itself can be read (no path, no wildcard); "
                "its inbox, tasks and threads stay with that network",
                details={"address": params.address},
            )
        agent = directory.get(address.agent)
        if agent is None:
            raise AgentNotFound(
                f"no agent '{address.agent}' on network '{address.network}'",
                details={"agent_id": address.agent, "network": address.network},
            )
        info = self._match(agent, 0, address.network)
        info.pop("score")
        content = {"agent_info": info, "last_updated": info["last_activity"]}
        result: dict[str, Any] = {
            "success": True,
            "address": params.address,
            "content": content | {"network": address.network},
            "retrieved_at": iso(domain.utcnow()),
        }
        if params.include_metadata:
            result["metadata"] = {
                "last_updated": content["last_updated"],
                "content_type": "agent_data",
                "version": "1.0",
            }
        return result

    async def _agent_at(self, repo: Repository, address: Address) -> domain.Agent:
        if address.agent is None:
            raise InvalidParameters(
                "bzzz_get needs a concrete agent id in the address (use bzzz_lookup for wildcards)",
                details={"address": address.to_dict("")},
            )
        agent = self.directory.get(address.agent)
        if agent is None or not address.matches(agent.id, agent.role, agent.project, agent.task):
            raise AgentNotFound(
                f"no agent '{address.agent}' at that address", details={"agent_id": address.agent}
            )
        return agent

    async def _agent_content(
        self, repo: Repository, agent: domain.Agent, path: str, params: GetInput
    ) -> tuple[dict[str, Any], str]:
        info = agent_info(agent)
        base = {"agent_info": info, "last_updated": info["last_activity"]}
        n = params.max_history
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
        self._no_cursor(params, path)
        if path == "/threads":
            threads = await repo.threads_of([agent.id], limit=max(n, 1))
            return base | {"threads": [thread_info(t) for t in threads]}, "threads"
        raise InvalidParameters(
            f"unknown path '{path}'; valid paths: /inbox, /tasks, /threads, /threads/<id>",
            details={"path": path},
        )

    async def _thread_content(
        self, repo: Repository, address: Address, params: GetInput
    ) -> dict[str, Any]:
        assert address.path is not None
        thread_id = address.path.removeprefix("/threads/").strip("/")
        thread = await repo.thread(thread_id)
        if thread is None or "/" in thread_id:
            raise ThreadNotFound(f"no thread '{thread_id}'", details={"thread_id": thread_id})
        if address.agent is not None:
            await self._agent_at(repo, address)
        page = await PageReader(repo.session).thread_messages(
            thread_id, params.max_history, Cursor(params.before, params.after)
        )
        messages = page.entries[::-1]  # oldest first, as a conversation reads
        info = thread_info(thread, messages, await repo.reactions(thread_id, page.ids))
        return {"thread": info, "last_updated": info["last_activity"], "page": page.info()}

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
        agents = self.directory.of_session(self._log.node_id, caller.session_id)
        if not agents:
            return []
        ids = [a.id for a in agents]
        await self._log.emit(
            "agent.offline",
            "agent",
            ids[0],
            {"agent_ids": ids, "session_id": caller.session_id, "reason": reason},
        )
        return ids

    async def release_stale(self, reason: str = "node restarted") -> int:
        """Take every online agent this node hosts offline (start-up after a crash, shutdown)."""
        agents = self.directory.online_of_node(self._log.node_id)
        by_session: dict[str, list[str]] = {}
        for agent in agents:
            by_session.setdefault(agent.session_id, []).append(agent.id)
        for session_id, ids in by_session.items():
            await self._log.emit(
                "agent.offline",
                "agent",
                ids[0],
                {"agent_ids": ids, "session_id": session_id, "reason": reason},
            )
        return len(agents)

    async def agents_of(self, caller: Caller) -> list[domain.Agent]:
        """The online agents this session announced."""
        return self.directory.of_session(self._log.node_id, caller.session_id)
