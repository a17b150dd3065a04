"""Any node is a front door: a call about a project this node does not serve runs on one that does.

:class:`FrontDoor` is the one place the faces (MCP tools, ``/api/v1`` routes) send reads of an
address (``bzzz_get``), posts, announcements and thread actions through. It finds the call's
project — the address's ``@project``, else the project of the agent it names (this node's store,
else the network's agent directory, :class:`bzzz.projects.AgentProjects`), else a thread's — and
runs the call here when ``bzzz.projects`` serves it. Otherwise it signs the call
(``bzzz.network.forward``) and sends it to the queue group of nodes serving that project; the
answer, result or error, is the one that node gave. A post names its sender as this node found
it (the caller acts as that agent here, in a project the serving node may not hold) and carries
a message id minted here, the same on every attempt: a post retried on another node after a
timeout is stored once. No node serves the project: :class:`bzzz.errors.NotServed`.

A client without a session (its ``agent_handle`` names its agent) may call any node: its
announcement of an agent of a project served elsewhere runs on a node serving that project (the
agent lives there, on its lease), and its posts and thread actions as that agent go to a node
serving the agent's project, which checks the handle. A post from there to a third
project's agent is forwarded once more, with the sender found there.

Requests and answers cross NATS sealed under the network key and signed by the node that sent
them (``bzzz.network.forward``). Where a request lands, :meth:`FrontDoor.serve` opens it (the
box, the signature, an admitted signer, the reply subject it names, a fresh timestamp, an id
no member of the network used before: :func:`used_ids`), runs it through the same service
methods and access checks as a local call with the caller's principal, records it on the audit
trail (``forwarded:<op>:<node>``; a refused one too, when an admitted node signed it) and
answers.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter, OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ulid import ULID

from bzzz import domain
from bzzz.access.keys import handle_agent, holder_of
from bzzz.address import parse_address
from bzzz.agents.service import AgentService, thread_project
from bzzz.audit.records import Action, digest, stamp, target_of
from bzzz.audit.trail import AuditTrail
from bzzz.clock import Clock
from bzzz.conversations.service import ConversationService
from bzzz.errors import BzzzError, NetworkError, NotServed, PermissionDenied
from bzzz.eventlog import Caller
from bzzz.network.base import Bus, Unanswered
from bzzz.network.forward import (
    ONCE_TTL,
    QUEUE,
    BadAnswer,
    ForwardGate,
    ForwardRefused,
    ForwardRequest,
    ForwardWire,
    Op,
    WireCaller,
    WirePrincipal,
    forward_subject,
    refusal,
)
from bzzz.network.identity import NodeIdentity
from bzzz.network.once import InMemoryOnce, UsedOnce
from bzzz.network.sealing import Keyring
from bzzz.principal import Scope
from bzzz.projects import NO_PROJECT, AgentProjects, ProjectSet
from bzzz.schemas import AnnounceInput, GetInput, PostInput, ThreadInput, validate_input
from bzzz.store.database import Database
from bzzz.store.repository import Repository

logger = logging.getLogger(__name__)

# How long one attempt waits for the serving node, and how many members are tried.
WITHIN = 5.0
ATTEMPTS = 3
ANNOUNCED_KEPT = 10_000


@dataclass(frozen=True, slots=True)
class Routing:
    """How this node forwards: the projects it serves, the network's directory, the patience."""

    served: ProjectSet
    directory: AgentProjects | None = None
    within: float = WITHIN
    attempts: int = ATTEMPTS


@dataclass(frozen=True, slots=True)
class Local:
    """What runs a call here: the services, their store, the audit trail."""

    agents: AgentService
    conversations: ConversationService
    db: Database
    audit: AuditTrail
    clock: Clock
    # Whether this node refuses callers without a credential: then it also refuses the
    # anonymous callers of a forwarding node that takes them (they hold every grant there).
    auth_required: Callable[[], bool] = lambda: False


class FrontDoor:
    """Runs a call here when this node serves its project, else on a node that does."""

    def __init__(
        self,
        identity: NodeIdentity,
        network: str,
        bus: Bus,
        local: Local,
        routing: Routing,
        admits: Callable[[str, str], bool],
        *,
        keyring: Keyring | None = None,
        used: UsedOnce | None = None,
    ) -> None:
        self._identity = identity
        self._network = network
        self._bus = bus
        self._agents = local.agents
        self._conversations = local.conversations
        self._db = local.db
        self._audit = local.audit
        self._clock = local.clock
        self._auth_required = local.auth_required
        self.routing = routing
        # Requests and answers sealed under the network key, signed by the node that sent them;
        # a request id runs once across the network (``used``: the network's record of them).
        self.wire = ForwardWire(identity, network, admits, keyring)
        self._gate = ForwardGate(self.wire, used if used is not None else InMemoryOnce(ONCE_TTL))
        self._posting: dict[str, asyncio.Future[dict[str, Any]]] = {}
        # Agents whose announcement this node forwarded, and their project: known at once,
        # before the serving node's directory entry reaches the network (bounded).
        self._announced: OrderedDict[str, str] = OrderedDict()
        # Forwarded calls by direction ("out": sent from here, "in": run here) and outcome.
        self.counts: dict[str, Counter[str]] = {"out": Counter(), "in": Counter()}

    def status(self) -> dict[str, Any]:
        """The forwarded calls so far, for /healthz and the metrics."""
        return {
            "served": str(self.routing.served),
            "out": dict(self.counts["out"]),
            "in": dict(self.counts["in"]),
        }

    # --- the calling side -------------------------------------------------------------------

    async def get(self, caller: Caller, params: GetInput) -> dict[str, Any]:
        """``bzzz_get``: here, or on a node serving the address's project."""
        project = await self.project_of_get(params)
        if self.routing.served.serves(project):
            return await self._agents.get(caller, params)
        assert project is not None
        return await self._forward(project, "get", caller, params.model_dump(mode="json"))

    async def post(
        self, caller: Caller, params: PostInput, *, as_principal: bool = False
    ) -> dict[str, Any]:
        """``bzzz_post``: here, or (sender found here) on a node serving the target's project.

        A caller acting as an agent served elsewhere posts from a node serving that agent.
        """
        body = params.model_dump(mode="json")
        acting = await self._project_of_acting(caller)
        if acting is not None:
            return await self._forward(acting, "post", caller, body, None, f"msg-{ULID()}")
        project = await self.project_of_post(params)
        if self.routing.served.serves(project):
            return await self._conversations.post(caller, params, as_principal=as_principal)
        assert project is not None
        caller.principal.require(Scope.WRITE, "posting")
        sender = await self._conversations.sender_for(caller, params.agent_id, as_principal)
        return await self._forward(project, "post", caller, body, sender, f"msg-{ULID()}")

    async def announce(self, caller: Caller, params: AnnounceInput) -> dict[str, Any]:
        """``bzzz_announce``: here, or (a client without a session) on a node serving its project.

        A session's agent lives where its session is: of a project served elsewhere, NotServed.
        """
        project = self._agents.project_of_announce(caller.principal, params)
        if self.routing.served.serves(project) or holder_of(caller) == "session":
            return await self._agents.announce(caller, params)
        body = params.model_dump(mode="json")
        made = await self._forward(project, "announce", caller, body)
        self._announced[params.agent_id] = project
        self._announced.move_to_end(params.agent_id)
        if len(self._announced) > ANNOUNCED_KEPT:
            self._announced.popitem(last=False)
        return made

    async def thread(self, caller: Caller, params: ThreadInput) -> dict[str, Any]:
        """``bzzz_thread``: here, or on a node serving the project of the agent the caller is."""
        acting = await self._project_of_acting(caller)
        if acting is None:
            return await self._conversations.thread(caller, params)
        return await self._forward(acting, "thread", caller, params.model_dump(mode="json"))

    async def _project_of_acting(self, caller: Caller) -> str | None:
        """The project of the agent a caller's handle names, when a node elsewhere serves it."""
        if caller.handle is None:
            return None
        agent_id = handle_agent(caller.handle)
        if self._agents.directory.get(agent_id) is not None:
            return None  # an agent of a project served here: the services check the handle
        project = await self._project_of_agent(agent_id)
        if project is None or self.routing.served.serves(project):
            return None
        return project

    async def project_of_get(self, params: GetInput) -> str | None:
        """The project an address read is about (None: this node answers)."""
        address = parse_address(params.address)
        if address.network not in (None, self._network):
            return None  # another network's agent: federation answers here
        if address.project is not None:
            return address.project
        if address.agent is not None:
            return await self._project_of_agent(address.agent)
        path = address.path or ""
        if path.startswith("/threads/"):
            return await self._project_of_thread(path.removeprefix("/threads/").strip("/"))
        return None

    async def project_of_post(self, params: PostInput) -> str | None:
        """The project a post is about: its target's, else its thread's (None: here)."""
        if params.target_address is not None:
            address = parse_address(params.target_address)
            if address.network not in (None, self._network):
                return None
            if address.project is not None:
                return address.project
            if address.agent is not None:
                return await self._project_of_agent(address.agent)
        if params.thread_id is not None:
            return await self._project_of_thread(params.thread_id)
        return None

    async def _project_of_agent(self, agent_id: str) -> str | None:
        agent = self._agents.directory.get(agent_id)
        if agent is not None:
            return agent.project or NO_PROJECT
        if agent_id in self._announced:
            return self._announced[agent_id]
        if self.routing.directory is not None:
            return await self.routing.directory.project_of(agent_id)
        return None

    async def _project_of_thread(self, thread_id: str) -> str | None:
        async with self._db.session() as session:
            thread = await Repository(session).thread(thread_id)
        return thread_project(thread) if thread is not None else None

    async def _forward(
        self,
        project: str,
        op: Op,
        caller: Caller,
        params: dict[str, Any],
        sender: str | None = None,
        key: str | None = None,
    ) -> dict[str, Any]:
        """Send the call to a member of the project's queue group; try another on a timeout."""
        subject = forward_subject(self._network, project)
        wire_caller = WireCaller(
            session_id=caller.session_id,
            principal=WirePrincipal.of(caller.principal),
            handle=caller.handle,
        )
        failure: NetworkError | None = None
        for attempt in range(self.routing.attempts):
            reply = self._bus.new_inbox()
            body = ForwardRequest(
                id=str(ULID()),
                network=self._network,
                project=project,
                op=op,
                params=params,
                caller=wire_caller,
                sender=sender,
                key=key,
                reply=reply,
                origin=self._identity.node_id,
                origin_key=self._identity.public_key_b64,
                at=time.time(),
            )
            try:
                answer = await self._bus.request(
                    subject, self.wire.request(body), self.routing.within, reply=reply
                )
                result = None if answer is None else self.wire.result_of(answer, body.id)
            except (BadAnswer, Unanswered) as exc:
                # The member did not answer (stopped, cut off): the queue group picks another.
                logger.warning("forwarded %s for %s: attempt %d: %s", op, project, attempt, exc)
                self.counts["out"]["retried"] += 1
                failure = exc
                continue
            except BzzzError:
                self.counts["out"]["error"] += 1
                raise
            if result is None:
                self.counts["out"]["not_served"] += 1
                raise NotServed(project)
            self.counts["out"]["ok"] += 1
            return result
        self.counts["out"]["unanswered"] += 1
        details: dict[str, Any] = {"project": project, "attempts": self.routing.attempts}
        if isinstance(failure, BadAnswer):
            # The last member answered what this node could not take (a refusal naming why:
            # this node not admitted, a network key it lacks): the caller's operator needs it.
            details["last_answer"] = failure.message
        raise NetworkError(
            f"no node serving project {project!r} answered in time", details=details
        ) from failure

    # --- the landing side -------------------------------------------------------------------

    async def serve(self) -> None:
        """Answer the forwarded calls of the projects this node serves. Runs until cancelled."""
        served = self.routing.served
        names = ["*"] if served.every else sorted(served.names)
        subjects = [forward_subject(self._network, name) for name in names]
        if subjects:
            await self._bus.serve_requests(subjects, QUEUE, self.answer)
        else:
            await asyncio.Event().wait()

    async def answer(self, data: bytes, reply: str) -> bytes:
        """The answer to one forwarded request that came with ``reply`` (its result, or the
        error it raised; a refusal when it may not run)."""
        try:
            request = await self._gate.open(data, reply)
        except ForwardRefused as exc:
            return self._refuse(exc)
        caller = Caller(
            request.caller.session_id, request.caller.principal.principal(), request.caller.handle
        )
        outcome = "ok"
        try:
            if not self.routing.served.serves(request.project):
                raise NotServed(request.project)
            if not caller.principal.authenticated and self._auth_required():
                raise PermissionDenied(
                    "this node takes no caller without a credential, and neither forwarded: "
                    "pass a token or JWT to the node you call",
                    details={"missing": "credential", "forwarded": True},
                )
            result = await self._run(request, caller)
        except BzzzError as exc:
            outcome = str(exc.code)
            self.counts["in"]["error"] += 1
            return self.wire.answer_error(request.id, exc)
        except Exception:
            # The forwarding node must hear an answer, never the internals.
            logger.exception("forwarded %s from %s failed", request.op, request.origin)
            outcome = "NETWORK_ERROR"
            self.counts["in"]["error"] += 1
            failure = NetworkError("internal error; the serving node logged it")
            return self.wire.answer_error(request.id, failure)
        finally:
            self._record(request, caller, outcome)
        self.counts["in"]["ok"] += 1
        return self.wire.answer_ok(request.id, result)

    def _refuse(self, refused: ForwardRefused) -> bytes:
        """Count and log a refused request; one an admitted node signed goes on the audit
        trail and is answered sealed, any other gets the reason alone."""
        self.counts["in"]["refused"] += 1
        request = refused.request
        if request is None:
            logger.warning("%s", refused.message)
            return refusal(refused.reason)
        logger.warning("%s (request %s from %s)", refused.message, request.id, request.origin)
        caller = Caller(
            request.caller.session_id, request.caller.principal.principal(), request.caller.handle
        )
        self._record(request, caller, f"refused:{refused.reason}")
        return self.wire.answer_error(request.id, refused)

    async def _run(self, request: ForwardRequest, caller: Caller) -> dict[str, Any]:
        if request.op == "get":
            return await self._agents.get(caller, validate_input(GetInput, request.params))
        if request.op == "announce":
            announced = validate_input(AnnounceInput, request.params)
            return await self._agents.announce(caller, announced)
        if request.op == "thread":
            action = validate_input(ThreadInput, request.params)
            return await self._conversations.thread(caller, action)
        params = validate_input(PostInput, request.params)
        key = request.key
        if key is None or not key.startswith("msg-"):
            return await self._conversations.post(caller, params, sender=request.sender)
        sender = request.sender
        if sender is None:
            # The caller acts as an agent of this node's project: it is found (and its handle
            # checked) here; a target in a project served elsewhere is one hop further.
            caller.principal.require(Scope.WRITE, "posting")
            sender = await self._conversations.sender_for(caller, params.agent_id, False)
            project = await self.project_of_post(params)
            if not self.routing.served.serves(project):
                assert project is not None
                return await self._forward(project, "post", caller, request.params, sender, key)
        running = self._posting.get(key)
        if running is not None:
            return await asyncio.shield(running)
        task = asyncio.ensure_future(self._post_once(caller, params, sender, key))
        self._posting[key] = task
        task.add_done_callback(lambda _: self._posting.pop(key, None))
        return await asyncio.shield(task)

    async def _post_once(
        self, caller: Caller, params: PostInput, sender: str | None, key: str
    ) -> dict[str, Any]:
        """A retried post whose first attempt this node already stored: what it stored."""
        async with self._db.session() as session:
            stored = await Repository(session).message(key)
        if stored is not None:
            return _posted(stored)
        return await self._conversations.post(caller, params, sender=sender, message_id=key)

    def _record(self, request: ForwardRequest, caller: Caller, outcome: str) -> None:
        sender = request.sender
        agent = sender[:128] if sender is not None and domain.names_an_agent(sender) else None
        self._audit.record(
            Action(
                at=stamp(self._clock.now()),
                principal=caller.principal.id[:256],
                session=caller.session_id[:128],
                action=f"forwarded:{request.op}:{request.origin}"[:128],
                outcome=outcome[:64],
                digest=digest(request.params),
                agent=agent,
                target=target_of(request.params),
            )
        )


def used_ids(bus: Bus, network: str, *, replicas: int = 1, timeout: float = 5.0) -> UsedOnce:
    """The network's record of used request ids on ``bus``: a KV bucket on nats-server, the
    in-memory bus's own (shared by its nodes), else one of this node's."""
    from bzzz.network.jetstream import JetStreamBus
    from bzzz.network.once import JetStreamOnce

    if isinstance(bus, JetStreamBus):
        return JetStreamOnce(bus.client, network, ONCE_TTL, replicas=replicas, timeout=timeout)
    found = getattr(bus, "once", None)
    return found if found is not None else InMemoryOnce(ONCE_TTL)


def _posted(message: domain.Message) -> dict[str, Any]:
    """A stored post's answer, as a retry of it sees it."""
    result: dict[str, Any] = {
        "success": True,
        "message_id": message.id,
        "target_address": message.target_address,
        "message_type": message.message_type,
        "delivery_results": {
            "delivered": bool(message.recipients),
            "recipients": list(message.recipients),
            "delivery_time": 0.0,
            "undelivered": [],
        },
        "posted_at": domain.iso(message.posted_at),
    }
    if message.thread_id:
        result["thread_id"] = message.thread_id
    return result
