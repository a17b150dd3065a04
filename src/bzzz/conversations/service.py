"""Messages, tasks and threads: bzzz_post and bzzz_thread."""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from ulid import ULID

from bzzz import domain
from bzzz.access.keys import STATELESS, holder_of, principal_key
from bzzz.access.limits import PostLimiter
from bzzz.address import Address, parse_address
from bzzz.agents.service import (
    AgentService,
    raise_store_failure,
    thread_project,
    thread_project_in,
)
from bzzz.agents.suggestions import agent_not_found, participants_not_found
from bzzz.agents.views import thread_info
from bzzz.clock import Clock, SystemClock
from bzzz.conversations.answers import post_result, target_of
from bzzz.conversations.facts import FactPoster, is_knowledge_post, post_fact
from bzzz.conversations.hooks import NoStanceModel, StanceClassifier, ThreadObserver
from bzzz.conversations.lifecycle import ThreadLifecycle
from bzzz.conversations.placement import message_project, require_of_project
from bzzz.conversations.review import ReviewDesk
from bzzz.conversations.summary import content_text, message_text, summarize_thread
from bzzz.domain import TASK_UPDATE_TYPES, THREAD_MESSAGE_TYPES, iso
from bzzz.errors import BzzzError, InvalidParameters, RateLimited, ThreadNotFound
from bzzz.eventlog import Caller, EventLog
from bzzz.principal import Principal, Scope
from bzzz.privacy.redact import redact_data
from bzzz.projects import NO_PROJECT
from bzzz.schemas import PostInput, ThreadInput
from bzzz.store.database import Database
from bzzz.store.directory import AgentDirectory
from bzzz.store.repository import Repository

THREAD_POST_TYPES = THREAD_MESSAGE_TYPES + TASK_UPDATE_TYPES + ("task_assignment",)
STATUS_ACTIONS = ("pause", "resume", "resolve", "close")
# The recent threads a credential acting as no agent is shown by `bzzz_thread list`.
PRINCIPAL_LISTED = 100

logger = logging.getLogger(__name__)

# Rewrites an extractive summary (a model, when one is configured): (thread, messages, summary).
Summarizer = Callable[
    [domain.Thread, list[domain.Message], dict[str, Any]], Awaitable[dict[str, Any]]
]


def no_thread(thread_id: str) -> ThreadNotFound:
    """The answer about a thread that does not exist, or that the caller may not see."""
    return ThreadNotFound(f"no thread '{thread_id}'", details={"thread_id": thread_id})


def visible_thread(who: Principal, thread_id: str, thread: domain.Thread | None) -> domain.Thread:
    """The thread if ``who`` sees its project; THREAD_NOT_FOUND otherwise, as for no thread.

    Every action on a thread answers so (post, pause, resume, resolve, close, join, leave,
    summarize, read): an answer such as "not a participant" would tell that it exists.
    """
    if thread is None or not who.may_see_project(thread_project(thread)):
        raise no_thread(thread_id)
    return thread


class ConversationService:
    """Posting messages and tasks; creating, joining, leaving, listing, summarizing threads."""

    def __init__(
        self,
        db: Database,
        log: EventLog,
        agents: AgentService,
        max_active_threads: int,
        *,
        clock: Clock | None = None,
        idle_timeout: float = 3600.0,
        classifier: StanceClassifier | None = None,
        limiter: PostLimiter | None = None,
        threads_per_principal: int = 0,
        redact_stored: bool = False,
    ) -> None:
        self._db = db
        self._redact_stored = redact_stored  # privacy.redact_stored: PII masked before storing
        self._limiter = limiter or PostLimiter(0, 0, 1)
        self._threads_per_principal = threads_per_principal
        self._log = log
        self._agents = agents
        self._max_active_threads = max_active_threads
        clock = clock or SystemClock()
        self.lifecycle = ThreadLifecycle(db, log, clock, idle_timeout)
        self._review = ReviewDesk(agents.directory, clock)
        self.classifier: StanceClassifier = classifier or NoStanceModel()
        self.observers: list[ThreadObserver] = []
        self.summarizer: Summarizer | None = None
        # Set by the node: states a fact posted to bzzz://*@PROJECT/knowledge.
        self.fact_poster: FactPoster | None = None

    async def sender_of(self, caller: Caller, agent_id: str | None) -> domain.Agent:
        """The agent this session acts as (``agent_id`` picks one of several)."""
        mine = await self._agents.agents_of(caller)
        if not mine and caller.session_id == STATELESS:
            raise InvalidParameters(
                "this call acts as no agent: send an agent token ('Authorization: Bearer "
                "<token>' from 'bzzz token create NAME --agent AGENT_ID --project P'), or pass "
                "the agent_handle that bzzz_announce returned",
                details={"hint": "agent_handle"},
            )
        holder = holder_of(caller)
        if not mine:
            raise InvalidParameters(
                f"this {holder} has not announced an agent; call bzzz_announce first",
                details={"hint": "bzzz_announce"},
            )
        if agent_id is not None:
            for agent in mine:
                if agent.id == agent_id:
                    return agent
            raise InvalidParameters(
                f"agent '{agent_id}' was not announced by this {holder}",
                details={"session_agents": [a.id for a in mine]},
            )
        if len(mine) > 1:
            raise InvalidParameters(
                f"this {holder} announced several agents; pass agent_id to choose one",
                details={"session_agents": [a.id for a in mine]},
            )
        return mine[0]

    async def sender_for(self, caller: Caller, agent_id: str | None, as_principal: bool) -> str:
        """Who sends: the caller's agent, else (``as_principal``) the principal itself."""
        if as_principal and agent_id is None and not await self._agents.agents_of(caller):
            return caller.principal.actor
        return (await self.sender_of(caller, agent_id)).id

    # --- bzzz_post ---------------------------------------------------------------------------

    async def post(
        self,
        caller: Caller,
        params: PostInput,
        *,
        as_principal: bool = False,
        sender: str | None = None,
        message_id: str | None = None,
    ) -> dict[str, Any]:
        """Deliver a message to an address or a thread; tasks are created or updated.

        ``as_principal``: a caller that acts as no agent sends as its principal (an
        orchestrator assigning a task, a person inviting an agent), recorded as
        ``token:…``; it posts to addresses, not into threads.

        A forwarded post (``bzzz.node.forward``) names ``sender`` (as the forwarding node found
        it) and ``message_id`` (``msg-<ULID>``, its envelope's id: a retry is stored once).
        """
        started = time.perf_counter()
        caller.principal.require(Scope.WRITE, "posting")
        address = parse_address(params.target_address) if params.target_address else None
        if address is not None and address.network not in (None, self._log.network):
            return await self._post_federated(caller, params, address, started)
        if address is not None and address.project is not None:
            # A post addressed into a project this node does not serve goes to a node that does.
            self._log.require_served(address.project)
        if sender is None:
            sender = await self.sender_for(caller, params.agent_id, as_principal)
        self._limiter.take(sender)
        if self.fact_poster is not None and is_knowledge_post(address):
            assert address is not None
            minted = message_id or f"msg-{ULID()}"
            return await post_fact(self.fact_poster, caller, params, address, sender, minted)
        recipients, stance = await self._recipients(caller, params, address, sender)
        task_id = None
        if params.message_type in TASK_UPDATE_TYPES:
            async with self._db.session() as session:
                task_id = await self._task_for_update(
                    Repository(session), params, sender, recipients
                )
        # A given message id is a forwarded post's, the same on every attempt: so is its envelope's.
        envelope_id = message_id.removeprefix("msg-") if message_id else None
        message_id = message_id or f"msg-{ULID()}"
        payload = {
            "message_id": message_id,
            "sender": sender,
            "target_address": target_of(params),
            "message_type": params.message_type,
            "content": redact_data(params.content) if self._redact_stored else params.content,
            "priority": params.priority,
            "thread_id": params.thread_id,
            "reply_to": params.reply_to,
            "recipients": recipients,
            "task_id": task_id,
        }
        if stance is not None:
            payload["stance"], payload["stance_source"] = stance
        # The subject names the sender; a principal's id (':', '.', '/' in a JWT issuer) is
        # no subject token, its key is.
        key = sender if domain.names_an_agent(sender) else principal_key(caller.principal)
        project = (
            await thread_project_in(self._db, params.thread_id)
            if params.thread_id
            else message_project(self._agents.directory, address, sender, recipients)
        )
        outcome = await self._log.emit(
            "message.posted", "msg", key, payload, envelope_id=envelope_id, project=project
        )
        raise_store_failure(outcome)
        if not outcome["ok"]:
            raise InvalidParameters(
                f"message refused: {outcome['reason']}", details={"reason": outcome["reason"]}
            )
        if params.thread_id:
            await self._observe(params.thread_id, outcome)
        result = post_result(params, message_id, recipients, outcome, started, self._online)
        if stance is not None:
            result["stance"] = {"stance": stance[0], "source": stance[1], "on": params.reply_to}
        if outcome.get("consensus"):
            result["consensus"] = outcome["consensus"]
        return result

    def _online(self, agent_id: str) -> bool:
        """Whether an agent is online (a post to one that is not waits in its inbox)."""
        agent = self._agents.directory.get(agent_id)
        return agent is not None and agent.online

    async def _recipients(
        self, caller: Caller, params: PostInput, address: Address | None, sender: str
    ) -> tuple[list[str], tuple[str, str] | None]:
        """Who a post reaches (a thread's other participants, or an address), and its stance."""
        if params.thread_id:
            if not domain.names_an_agent(sender):
                raise InvalidParameters(
                    "this call acts as no agent, and only a thread's participants post into "
                    "it: pass agent_id or agent_handle of an agent in the thread",
                    details={"field": "thread_id", "thread_id": params.thread_id},
                )
            async with self._db.session() as session:
                repo = Repository(session)
                recipients = await self._thread_recipients(repo, caller, params, sender)
                if address is not None:
                    await self._check_thread_target(repo, params.thread_id, address)
                return recipients, await self._stance(repo, params, sender)
        assert address is not None  # PostInput requires one without thread_id
        if params.stance is not None:
            raise InvalidParameters(
                "a stance needs thread_id and reply_to", details={"field": "stance"}
            )
        if await self._assigned_by_principal(params):
            # Its assigner acted without an agent: it has no inbox and reads the task.
            return [], None
        return self._address_recipients(address, sender, who=caller.principal), None

    async def _assigned_by_principal(self, params: PostInput) -> bool:
        """Whether a post updates a task that a principal assigned itself (``token:…``)."""
        task_id = params.content.get("task_id")
        if params.message_type not in TASK_UPDATE_TYPES or not isinstance(task_id, str):
            return False
        async with self._db.session() as session:
            task = await Repository(session).task(task_id)
        return task is not None and not domain.names_an_agent(task.assigner)

    async def _check_thread_target(
        self, repo: Repository, thread_id: str, address: Address
    ) -> None:
        """With thread_id, a target_address must name the thread or reach a participant."""
        thread = await repo.thread(thread_id)
        assert thread is not None  # _thread_recipients found it
        if address.path is not None:
            if address.path.strip("/") == f"threads/{thread_id}":
                return
            raise InvalidParameters(
                f"target_address names '{address.path}', not thread '{thread_id}'; "
                "leave target_address out when posting into a thread",
                details={"field": "target_address", "thread_id": thread_id},
            )
        for agent_id in thread.active_participants:
            agent = self._agents.directory.get(agent_id)
            if agent is not None and address.matches(
                agent.id, agent.role, agent.project, agent.task
            ):
                return
        raise InvalidParameters(
            f"target_address reaches no participant of thread '{thread_id}'; "
            "leave target_address out when posting into a thread",
            details={
                "field": "target_address",
                "thread_id": thread_id,
                "participants": thread.active_participants,
            },
        )

    async def _stance(
        self, repo: Repository, params: PostInput, sender: str
    ) -> tuple[str, str] | None:
        """The stance a thread message takes: declared, else classified by a model (if any)."""
        if params.reply_to is None:
            if params.stance is not None:
                raise InvalidParameters(
                    "a stance needs reply_to: the id of the message it agrees or disagrees with",
                    details={"field": "reply_to"},
                )
            return None
        target = await repo.message(params.reply_to)
        if target is None or target.thread_id != params.thread_id:
            raise InvalidParameters(
                f"reply_to '{params.reply_to}' is not a message of thread '{params.thread_id}'",
                details={"field": "reply_to", "thread_id": params.thread_id},
            )
        if params.stance is not None:
            if target.sender == sender:
                raise InvalidParameters(
                    "a stance is on someone else's message", details={"field": "stance"}
                )
            return params.stance, "agent"
        if target.sender == sender:
            return None
        text = content_text(params.content)
        classified = await self.classifier.classify(text, message_text(target))
        return (classified, "model") if classified in domain.STANCES else None

    async def _observe(self, thread_id: str, outcome: dict[str, Any]) -> None:
        for observer in self.observers:
            try:
                await observer.on_thread_message(thread_id, outcome)
            except BzzzError as exc:
                # The message is stored; the monitor's sweep checks the thread again later.
                logger.warning("after a message in %s: %s", thread_id, exc.message)

    async def _post_federated(
        self, caller: Caller, params: PostInput, address: Address, started: float
    ) -> dict[str, Any]:
        """Store a message in a federated network's log, for its nodes to deliver."""
        assert address.network is not None
        if params.thread_id or params.message_type in (*TASK_UPDATE_TYPES, "task_assignment"):
            raise InvalidParameters(
                "threads and tasks stay within one network; post a message to the other "
                "network's agent instead",
                details={"network": address.network, "message_type": params.message_type},
            )
        federation = self._agents.federation_of(address.network)
        sender = await self.sender_of(caller, params.agent_id)
        recipients = self._address_recipients(
            address, sender.id, federation.directory(address.network)
        )
        # Seen from the other network, the sender lives here: agent@network ('@' cannot
        # occur in an agent id, so it never names one of theirs).
        origin = f"{sender.id}@{self._log.network}"
        message_id = f"msg-{ULID()}"
        payload = {
            "message_id": message_id,
            "sender": origin[:128],
            "target_address": target_of(params),
            "message_type": params.message_type,
            "content": params.content,
            "priority": params.priority,
            "thread_id": None,
            "reply_to": params.reply_to,
            "recipients": recipients,
            "task_id": None,
        }
        if recipients:
            await federation.post(address.network, sender.id, payload)
        outcome = {"ok": True, "delivered": recipients}
        # The other network's directory says who is online there (its recipients are).
        result = post_result(params, message_id, recipients, outcome, started)
        result["network"] = address.network
        # Stored in that network's log; its nodes deliver it (and may refuse an untrusted node).
        result["delivery_results"]["stored_in_network_log"] = bool(recipients)
        return result

    async def _thread_recipients(
        self, repo: Repository, caller: Caller, params: PostInput, sender: str
    ) -> list[str]:
        assert params.thread_id is not None
        thread = visible_thread(
            caller.principal, params.thread_id, await repo.thread(params.thread_id)
        )
        if sender not in thread.active_participants:
            raise InvalidParameters(
                f"agent '{sender}' is not a participant of thread '{thread.id}'; "
                "join it with bzzz_thread first",
                details={"thread_id": thread.id},
            )
        if thread.status in ("completed", "paused"):
            raise InvalidParameters(
                f"thread '{thread.id}' is {thread.status}"
                + ("; resume it first" if thread.status == "paused" else ""),
                details={"thread_id": thread.id, "status": thread.status},
            )
        if params.message_type not in THREAD_POST_TYPES:
            raise InvalidParameters(
                f"message_type '{params.message_type}' cannot be posted to a thread; valid: "
                + ", ".join(THREAD_POST_TYPES),
                details={"valid": list(THREAD_POST_TYPES)},
            )
        return [a for a in thread.active_participants if a != sender]

    def _address_recipients(
        self,
        address: Address,
        sender: str,
        directory: AgentDirectory | None = None,
        who: Principal | None = None,
    ) -> list[str]:
        """Who an address reaches: within ``who``'s projects (None: another network's)."""
        directory = directory or self._agents.directory
        if address.agent is not None:
            agent = directory.get(address.agent)
            if agent is not None and who is not None and not who.may_see_project(agent.project):
                agent = None
            if agent is None or not address.matches(
                agent.id, agent.role, agent.project, agent.task
            ):
                raise agent_not_found(
                    directory,
                    who,
                    address.agent,
                    f"no agent '{address.agent}' at that address",
                    address.project,
                )
            return [agent.id]
        matches = directory.matching(
            agent_id=None,
            role=address.role,
            project=address.project,
            task=address.task,
            online_only=True,
        )
        if who is not None and not who.all_projects:
            matches = [a for a in matches if a.project in who.projects]
        return sorted(a.id for a in matches if a.id != sender)

    @staticmethod
    async def _task_for_update(
        repo: Repository, params: PostInput, sender: str, recipients: list[str]
    ) -> str | None:
        if params.message_type not in TASK_UPDATE_TYPES:
            return None
        task_id = params.content.get("task_id")
        if task_id is None:
            candidates = [t for r in recipients for t in await repo.active_tasks_between(sender, r)]
            if len(candidates) != 1:
                raise InvalidParameters(
                    f"{params.message_type} needs content.task_id (the task to update)",
                    details={
                        "field": "content.task_id",
                        "active_tasks": [t.id for t in candidates],
                    },
                )
            return candidates[0].id
        if not isinstance(task_id, str):
            raise InvalidParameters(
                "content.task_id must be a string", details={"field": "content.task_id"}
            )
        task = await repo.task(task_id)
        if task is None:
            raise InvalidParameters(f"no task '{task_id}'", details={"task_id": task_id})
        if task.agent_id != sender and not domain.cancels(
            task, sender, params.message_type, params.content
        ):
            raise InvalidParameters(
                f"task '{task_id}' is assigned to '{task.agent_id}', not to '{sender}'",
                details={"task_id": task_id},
            )
        if task.status not in domain.ACTIVE_TASK_STATUSES:
            raise InvalidParameters(
                f"task '{task_id}' is already {task.status}",
                details={"task_id": task_id, "status": task.status},
            )
        return task_id

    # --- bzzz_thread -------------------------------------------------------------------------

    async def thread(
        self, caller: Caller, params: ThreadInput, *, as_principal: bool = False
    ) -> dict[str, Any]:
        """Run one bzzz_thread action (``as_principal``: see :meth:`post`, for ``create``)."""
        handlers: dict[str, Any] = {
            "create": functools.partial(self._create, as_principal=as_principal),
            "join": self._join,
            "leave": self._leave,
            "list": self._list,
            "summarize": self._summarize,
            "review": self._open_review,
            **dict.fromkeys(STATUS_ACTIONS, self._status),
        }
        result = await handlers[params.action](caller, params)
        response: dict[str, Any] = {"success": True, "action": params.action}
        if params.action != "list":
            response["thread_id"] = result.get("id") or result.get("thread_id")
        return response | {"result": result, "timestamp": iso(domain.utcnow())}

    @staticmethod
    def _require(params: ThreadInput, *names: str) -> None:
        missing = [n for n in names if not getattr(params, n)]
        if missing:
            raise InvalidParameters(
                f"action '{params.action}' requires {', '.join(missing)}",
                details={"missing": missing, "action": params.action},
            )

    async def _create(
        self, caller: Caller, params: ThreadInput, as_principal: bool = False
    ) -> dict[str, Any]:
        self._require(params, "participants", "topic")
        assert params.participants is not None and params.topic is not None
        caller.principal.require(Scope.WRITE, "creating a thread")
        creator = await self.sender_for(caller, params.agent_id, as_principal)
        # A principal that creates a thread itself is not in it: the agents it names are.
        named = [creator] if domain.names_an_agent(creator) else []
        participants = list(dict.fromkeys([*named, *params.participants]))
        visible = [self._agents.visible_agent(caller.principal, p) for p in participants]
        unknown = [p for p, agent in zip(participants, visible, strict=True) if agent is None]
        if unknown:
            raise participants_not_found(self._agents.directory, caller.principal, unknown)
        # The thread is its creator's project's (the first participant's for a principal),
        # and its participants are of that project: a participant of another one could not
        # read the thread, nor be served by the nodes of its project.
        project = next(a.project for a in visible if a is not None)
        require_of_project(project, (a for a in visible if a is not None))
        self._log.require_served(project)
        await self._check_thread_room(caller)
        thread_id = f"thread-{ULID()}"
        outcome = await self._log.emit(
            "thread.created",
            "thread",
            thread_id,
            {
                "thread_id": thread_id,
                "topic": params.topic,
                "creator": creator,
                "participants": participants,
                "metadata": {"project": project},
            },
            project=project or NO_PROJECT,
        )
        raise_store_failure(outcome)
        if not outcome["ok"]:
            raise self._too_many()
        return await self._thread_dict(thread_id)

    async def _check_thread_room(self, caller: Caller) -> None:
        """The network's thread limit, and the share of it one principal may take.

        Without credentials (one anonymous principal) the share is per session: the agents
        the caller acts as.
        """
        who = caller.principal
        share = self._threads_per_principal or max(1, self._max_active_threads // 2)
        async with self._db.session() as session:
            repo = Repository(session)
            active = await repo.count_active_threads()
            mine = 0
            if active >= share:
                if who.authenticated:
                    creators = self._agents.directory.owned_by(who.id)
                else:
                    creators = [a.id for a in await self._agents.agents_of(caller)]
                mine = await repo.count_active_threads([*creators, who.actor])
        if active >= self._max_active_threads:
            raise self._too_many()
        if mine >= share:
            raise RateLimited(
                f"this credential's agents already hold {mine} active threads (at most {share})",
                details={"limit": "threads_per_principal", "retry_after": 60},
            )

    def _too_many(self) -> InvalidParameters:
        return InvalidParameters(
            f"the network already has maxActiveThreads ({self._max_active_threads}) active threads",
            details={"max_active_threads": self._max_active_threads},
        )

    async def _thread_dict(self, thread_id: str) -> dict[str, Any]:
        async with self._db.session() as session:
            thread = await Repository(session).thread(thread_id)
        if thread is None:
            raise ThreadNotFound(f"no thread '{thread_id}'", details={"thread_id": thread_id})
        return thread_info(thread)

    async def _membership(self, caller: Caller, params: ThreadInput, kind: str) -> dict[str, Any]:
        self._require(params, "thread_id")
        assert params.thread_id is not None
        caller.principal.require(Scope.WRITE, f"'{params.action}' of a thread")
        agent = await self.sender_of(caller, params.agent_id)
        thread = await self._thread_dict(params.thread_id)
        project = (thread.get("metadata") or {}).get("project")
        if not caller.principal.may_see_project(project):
            raise no_thread(params.thread_id)
        if kind == "thread.joined" and thread["status"] == "completed":
            raise InvalidParameters(f"thread '{params.thread_id}' is completed")
        if kind == "thread.joined":
            require_of_project(project, [agent])
        if kind == "thread.left" and agent.id not in thread["participants"]:
            raise InvalidParameters(f"agent '{agent.id}' is not in thread '{params.thread_id}'")
        outcome = await self._log.emit(
            kind,
            "thread",
            params.thread_id,
            {"thread_id": params.thread_id, "agent_id": agent.id},
            project=project or NO_PROJECT,
        )
        raise_store_failure(outcome)
        if not outcome["ok"]:
            raise InvalidParameters(f"refused: {outcome['reason']}")
        return await self._thread_dict(params.thread_id)

    async def _join(self, caller: Caller, params: ThreadInput) -> dict[str, Any]:
        return await self._membership(caller, params, "thread.joined")

    async def _leave(self, caller: Caller, params: ThreadInput) -> dict[str, Any]:
        return await self._membership(caller, params, "thread.left")

    async def _list(self, caller: Caller, params: ThreadInput) -> list[dict[str, Any]]:
        """The threads of the caller's agent; a credential acting as no agent lists the
        recent threads it reads (its projects', as the dashboard does)."""
        as_principal = params.agent_id is None and caller.principal.authenticated
        if as_principal and not await self._agents.agents_of(caller):
            async with self._db.session() as session:
                recent = await Repository(session).recent_threads(PRINCIPAL_LISTED)
            threads = [t for t in recent if self._agents.may_read_thread(caller, t)]
        else:
            agent = await self.sender_of(caller, params.agent_id)
            async with self._db.session() as session:
                threads = await Repository(session).threads_of([agent.id])
        return [
            {
                "id": t.id,
                "topic": t.topic,
                "participants": t.active_participants,
                "status": t.status,
                "last_activity": iso(t.last_activity),
                "message_count": t.message_count,
            }
            for t in threads
        ]

    async def _summarize(self, caller: Caller, params: ThreadInput) -> dict[str, Any]:
        self._require(params, "thread_id")
        assert params.thread_id is not None
        async with self._db.session() as session:
            repo = Repository(session)
            thread = await repo.thread(params.thread_id)
            if thread is None:
                raise ThreadNotFound(
                    f"no thread '{params.thread_id}'", details={"thread_id": params.thread_id}
                )
            self._agents.require_thread_reader(caller, thread)
            messages = await repo.thread_messages(thread.id)
        summary = summarize_thread(thread, messages)
        if self.summarizer is not None:
            summary = await self.summarizer(thread, messages, summary)
        await self._log.emit(
            "thread.summarized",
            "thread",
            thread.id,
            {"thread_id": thread.id, "summary": summary["summary"]},
            project=thread_project(thread) or NO_PROJECT,
        )
        return summary

    async def _status(self, caller: Caller, params: ThreadInput) -> dict[str, Any]:
        self._require(params, "thread_id")
        assert params.thread_id is not None
        caller.principal.require(Scope.WRITE, f"'{params.action}' of a thread")
        agent = await self.sender_of(caller, params.agent_id)
        thread = await self.lifecycle.change(
            params.thread_id, agent.id, params.action, params.reason, caller.principal
        )
        return thread_info(thread)

    def _task_of_project(self, task: domain.Task, creator: domain.Agent) -> bool:
        """Whether a task is the work of the creator's project (its assignee's project)."""
        assignee = self._agents.directory.get(task.agent_id)
        return assignee is not None and assignee.project == creator.project

    async def _open_review(self, caller: Caller, params: ThreadInput) -> dict[str, Any]:
        caller.principal.require(Scope.WRITE, "opening a review")
        creator = await self.sender_of(caller, params.agent_id)
        task = None
        if params.task_id:
            async with self._db.session() as session:
                task = await Repository(session).task(params.task_id)
            if task is not None and not self._task_of_project(task, creator):
                task = None  # another project's work is not put before this one's reviewers
            if task is None:
                raise InvalidParameters(
                    f"task_id '{params.task_id}' names no task", details={"task_id": params.task_id}
                )
        plan = self._review.plan(creator, params.roles, task, params.topic, params.criteria)
        payload = plan["payload"]
        await self._check_thread_room(caller)
        outcome = await self._log.emit(
            "thread.created",
            "thread",
            payload["thread_id"],
            payload,
            project=(payload.get("metadata") or {}).get("project") or NO_PROJECT,
        )
        raise_store_failure(outcome)
        if not outcome["ok"]:
            raise self._too_many()
        await self.post(
            caller,
            PostInput(
                message_type="text",
                content={"text": plan["opening"], "kind": "review_request"},
                thread_id=payload["thread_id"],
                agent_id=creator.id,
            ),
        )
        return await self._thread_dict(payload["thread_id"])
