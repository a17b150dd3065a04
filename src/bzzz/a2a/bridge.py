"""The node's side of remote A2A agents: announce them, deliver their posts and tasks over A2A.

The node on a data directory hosts the agents of its registry (``bzzz a2a add``): it announces
them at start (as its own, under ``hosted-a2a-<id>``, so no lease ends them) and again when the
log shows one added. A task assigned to one is sent as an A2A message; the answer (a message,
or a task followed with ``tasks/get`` until it ends) comes back as ``task_complete`` or
``task_failed``. Any other post to one is sent too, and its answer is posted back to the sender.
Every request follows the webhook SSRF rules (``guard``) and reads at most
``a2a.max_answer_bytes`` of the answer. A request that does not get through (no connection, a
timeout, an HTTP error status) is retried with backoff for ``webhooks.max_age``; everything
else is final and fails the task with its reason: an A2A error answer, a target the rules
refuse, an answer past the limit, an answer that is not A2A. A task's reported result is cut
to ``MAX_RESULT_CHARS``; a report the network refuses is followed by a ``task_failed`` saying
why, so no task is left pending.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
from a2a.client import A2AClientError, ClientConfig, ClientFactory
from a2a.client.card_resolver import parse_agent_card
from a2a.client.errors import A2AClientTimeoutError
from a2a.types import GetTaskRequest, Message, Part, Role, SendMessageRequest, Task, TaskState
from a2a.utils.errors import A2AError
from google.protobuf.json_format import ParseDict, ParseError
from google.protobuf.struct_pb2 import Value

from bzzz import domain
from bzzz.a2a import registry
from bzzz.a2a.guard import Refused, RefusedTarget, TooLarge, guarded_client
from bzzz.a2a.registry import RemoteAgent
from bzzz.agents.service import AgentService
from bzzz.backoff import backoff
from bzzz.config import A2ASettings, WebhookSettings
from bzzz.conversations.service import ConversationService
from bzzz.errors import BzzzError
from bzzz.eventlog import Caller
from bzzz.events.targets import Resolver, TargetPolicy, system_resolver
from bzzz.network.envelope import Envelope
from bzzz.principal import ALL, node_principal
from bzzz.schemas import AnnounceInput, PostInput
from bzzz.store.database import Database
from bzzz.store.repository import Repository

logger = logging.getLogger(__name__)

SESSION_PREFIX = "hosted-a2a-"
# A result posted back is one message's content (at most 256 KiB of JSON): cut the text well
# below it, so even escaped it fits.
MAX_RESULT_CHARS = 32 * 1024
# What an answer that is not A2A raises in the A2A client as it reads it.
_NOT_A2A = (ValueError, TypeError, KeyError, AttributeError, RecursionError, ParseError)
_ENDED = {
    TaskState.TASK_STATE_COMPLETED: "completed",
    TaskState.TASK_STATE_FAILED: "failed",
    TaskState.TASK_STATE_CANCELED: "canceled",
    TaskState.TASK_STATE_REJECTED: "rejected",
}


class Unreachable(Exception):
    """A delivery that did not get through this time (retried)."""


def session_of(agent_id: str) -> str:
    """The key a remote agent is held under on its node."""
    return f"{SESSION_PREFIX}{agent_id}"[:128]


def text_of_parts(parts: Sequence[Any]) -> str:
    """The text of A2A parts, joined."""
    return "\n".join(p.text for p in parts if p.text)


def _passing(exc: A2AClientError) -> bool:
    """Whether the A2A client's error is the network's (retried), not the answer's (final)."""
    cause = exc.__cause__
    return isinstance(exc, A2AClientTimeoutError) or isinstance(
        cause, (httpx.TransportError, httpx.TimeoutException, httpx.HTTPStatusError)
    )


def _state_name(state: int) -> str:
    """A task state's name as a reason shows it (any number the agent sent)."""
    try:
        return TaskState.Name(state).removeprefix("TASK_STATE_").lower()
    except ValueError:
        return f"in state {int(state)}"


def _cut(text: str) -> str:
    """The text, cut to what one posted result may carry."""
    if len(text) <= MAX_RESULT_CHARS:
        return text
    return f"{text[:MAX_RESULT_CHARS]}\n[… cut: {len(text)} characters in all]"


class A2ABridge:
    """Announces this data directory's remote A2A agents and delivers to them."""

    def __init__(
        self,
        data_dir: Path,
        node_id: str,
        agents: AgentService,
        conversations: ConversationService,
        db: Database,
        policy: TargetPolicy,
        settings: WebhookSettings,
        limits: A2ASettings | None = None,
        *,
        resolver: Resolver = system_resolver,
    ) -> None:
        self._data_dir = data_dir
        self._node_id = node_id
        self._agents = agents
        self._conversations = conversations
        self._db = db
        self._settings = settings
        self.limits = limits or A2ASettings()
        self._http = guarded_client(
            policy, settings.timeout, resolver, max_bytes=self.limits.max_answer_bytes
        )
        self.remote: dict[str, RemoteAgent] = {}
        self._jobs: dict[str, asyncio.Task[None]] = {}
        self._started = False
        self._stopping = False
        self.delivered = 0
        self.failed = 0

    def caller(self, agent: RemoteAgent) -> Caller:
        """The node acting as a remote agent (limited to the agent's project)."""
        projects = [agent.project] if agent.project else [ALL]
        return Caller(session_of(agent.agent_id), node_principal(self._node_id, projects))

    async def start(self) -> None:
        """Announce the registry's agents and deliver their pending tasks."""
        if self._started:
            raise RuntimeError("the A2A bridge is already started")
        self._started = True
        try:
            self.remote = registry.load(self._data_dir)
        except BzzzError as exc:
            # A damaged registry costs its agents, not the node.
            logger.error("no A2A agents hosted: %s", exc.message)
            return
        for agent in self.remote.values():
            await self._announce(agent)
            await self._resume(agent)

    async def _announce(self, agent: RemoteAgent) -> None:
        params = AnnounceInput(
            agent_id=agent.agent_id,
            role=agent.role,
            capabilities=agent.skills[:32] or [agent.role],
            specialization=(agent.description or agent.name)[:256] or None,
            project=agent.project,
        )
        try:
            await self._agents.announce(self.caller(agent), params, extra=agent.metadata())
        except BzzzError as exc:
            logger.error("A2A agent %s could not be announced: %s", agent.agent_id, exc.message)

    async def _resume(self, agent: RemoteAgent) -> None:
        async with self._db.session() as session:
            pending = await Repository(session).tasks(agent.agent_id, active_only=True, limit=100)
        for task in reversed(pending):
            self._schedule(f"task:{task.id}", self._deliver_task(agent, task.id))

    # --- what the log tells ---------------------------------------------------------------------

    def on_applied(self, envelopes: Sequence[Envelope]) -> None:
        """Pick up agents added by the CLI, and posts to the remote agents."""
        if self._stopping or not self._started:
            return
        for env in envelopes:
            if env.origin != self._node_id and not self.remote:
                continue  # the hot path: this node hosts no A2A agent, and did not add one
            if env.type == "agent.announced" and env.origin == self._node_id:
                metadata = env.payload.get("metadata") or {}
                if "a2a" in metadata and env.payload.get("agent_id") not in self.remote:
                    self._reload()
            elif env.type == "agent.offline" and env.origin == self._node_id:
                if set(env.payload.get("agent_ids") or []) & set(self.remote):
                    # `bzzz a2a remove` (or this node stopping): the registry says which stay.
                    self._reload()
            elif env.type == "message.posted":
                self._on_posted(env.payload)

    def _reload(self) -> None:
        try:
            self.remote = registry.load(self._data_dir)
        except BzzzError as exc:
            logger.error("the A2A registry could not be read again: %s", exc.message)

    def _on_posted(self, payload: dict[str, Any]) -> None:
        kind = payload.get("message_type")
        if kind in domain.TASK_UPDATE_TYPES or kind == "task_assignment":
            return  # tasks arrive through the outcomes (with their ids)
        for agent_id in payload.get("recipients") or []:
            agent = self.remote.get(agent_id)
            if agent is not None and payload.get("sender") != agent_id:
                message_id = str(payload["message_id"])
                self._schedule(
                    f"msg:{message_id}:{agent_id}", self._deliver_post(agent, message_id)
                )

    def on_outcomes(self, outcomes: dict[str, Any]) -> None:
        """Tasks assigned to a remote agent: deliver each."""
        if self._stopping or not self._started or not self.remote:
            return
        for outcome in outcomes.values():
            for recipient, task_id in (outcome.get("tasks") or {}).items():
                agent = self.remote.get(recipient)
                if agent is not None:
                    self._schedule(f"task:{task_id}", self._deliver_task(agent, task_id))

    def _schedule(self, key: str, work: Any) -> None:
        if key in self._jobs:
            work.close()
            return
        job = asyncio.create_task(self._retried(key, work), name=f"bzzz-a2a-{key}"[:100])
        self._jobs[key] = job

    async def _retried(self, key: str, work: Any) -> None:
        try:
            await work
        except asyncio.CancelledError:
            raise
        except Exception:
            # One delivery's unexpected failure must not take the bridge down.
            logger.exception("A2A delivery %s failed", key)
        finally:
            self._jobs.pop(key, None)

    # --- deliveries -----------------------------------------------------------------------------

    async def _send(self, agent: RemoteAgent, message: Message) -> Task | Message:
        """One A2A message, retried with backoff while it does not get through."""
        started = time.monotonic()
        attempt = 0
        while True:
            try:
                return await self._send_once(agent, message)
            except Unreachable as exc:
                waited = time.monotonic() - started
                if waited >= self._settings.max_age or self._stopping:
                    raise A2AError(f"unreachable for {waited:.0f} s: {exc}") from None
                delay = backoff(attempt, self._settings.initial_backoff, self._settings.max_backoff)
                logger.info(
                    "A2A agent %s unreachable (%s); again in %.1f s", agent.agent_id, exc, delay
                )
                attempt += 1
                await asyncio.sleep(delay)

    def _client(self, agent: RemoteAgent) -> Any:
        card = parse_agent_card(
            {
                "name": agent.name or agent.agent_id,
                "supportedInterfaces": [
                    {
                        "url": agent.endpoint,
                        "protocolBinding": "JSONRPC",
                        "protocolVersion": agent.protocol_version,
                    }
                ],
                "capabilities": {"streaming": False},
            }
        )
        config = ClientConfig(httpx_client=self._http, streaming=False)
        return ClientFactory(config).create(card)

    async def _send_once(self, agent: RemoteAgent, message: Message) -> Task | Message:
        client = self._client(agent)
        try:
            async for event in client.send_message(SendMessageRequest(message=message)):
                if event.HasField("task"):
                    return await self._followed(client, event.task)
                if event.HasField("message"):
                    found: Message = event.message
                    return found
        except TooLarge as exc:
            raise A2AError(
                f"the agent's answer is larger than {exc.limit} bytes (a2a.max_answer_bytes): "
                "not read"
            ) from None
        except RefusedTarget as exc:
            raise A2AError(f"refused by the SSRF rules: {exc}") from None
        except Refused as exc:
            raise A2AError(str(exc)) from None
        except A2AClientError as exc:
            if _passing(exc):
                raise Unreachable(str(exc) or type(exc).__name__) from None
            raise A2AError(f"the agent's answer is not A2A: {str(exc)[:300]}") from None
        except httpx.InvalidURL as exc:
            raise A2AError(f"the agent's endpoint is no valid URL: {exc}") from None
        except httpx.TransportError as exc:
            raise Unreachable(str(exc) or type(exc).__name__) from None
        except _NOT_A2A as exc:
            raise A2AError(f"the agent's answer is not A2A: {str(exc)[:300]}") from None
        raise A2AError("the agent answered neither a task nor a message")

    async def _followed(self, client: Any, task: Task) -> Task:
        """The remote task once it ends (polled with backoff, bounded by max_age)."""
        started, attempt = time.monotonic(), 0
        while task.status.state not in _ENDED:
            if task.status.state in (
                TaskState.TASK_STATE_INPUT_REQUIRED,
                TaskState.TASK_STATE_AUTH_REQUIRED,
            ):
                return task
            if time.monotonic() - started >= self._settings.max_age:
                raise A2AError(f"the remote task {task.id} did not end in time")
            await asyncio.sleep(backoff(attempt, 0.05, self._settings.max_backoff))
            attempt += 1
            task = await client.get_task(GetTaskRequest(id=task.id))
        return task

    async def _deliver_task(self, agent: RemoteAgent, task_id: str) -> None:
        async with self._db.session() as session:
            task = await Repository(session).task(task_id)
        if task is None or task.agent_id != agent.agent_id or task.status != "pending":
            return
        message = Message(
            role=Role.ROLE_USER,
            message_id=f"bzzz-{task.id}",
            context_id=task.thread_id or task.id,
            parts=[Part(text=task.description or task.type)],
        )
        if task.data:
            message.parts.append(Part(data=ParseDict(task.data, Value())))
        try:
            answer = await self._send(agent, message)
        except A2AError as exc:
            self.failed += 1
            await self._report(agent, task, "task_failed", {"error": f"A2A: {exc.message}"[:2000]})
            return
        except Exception:
            # Whatever else the A2A client raised on this answer, the task must not stay
            # pending: it fails, and the log keeps the details (never shown to the assigner).
            logger.exception("A2A task %s to %s failed", task.id, agent.agent_id)
            self.failed += 1
            why = "A2A: the agent's answer could not be read"
            await self._report(agent, task, "task_failed", {"error": why})
            return
        kind, content = self._ending(answer)
        self.delivered += 1
        await self._report(agent, task, kind, content)

    @staticmethod
    def _ending(answer: Task | Message) -> tuple[str, dict[str, Any]]:
        if isinstance(answer, Message):
            return "task_complete", {"result": _cut(text_of_parts(answer.parts))}
        state = answer.status.state
        said = text_of_parts(answer.status.message.parts)
        if state == TaskState.TASK_STATE_COMPLETED:
            text = "\n".join(text_of_parts(a.parts) for a in answer.artifacts) or said
            return "task_complete", {"result": _cut(text), "a2a_task_id": answer.id}
        what = _ENDED.get(state) or _state_name(state)
        return "task_failed", {"error": f"A2A task {what}: {said}"[:2000], "a2a_task_id": answer.id}

    async def _report(
        self, agent: RemoteAgent, task: domain.Task, kind: str, content: dict[str, Any]
    ) -> None:
        target = task.assigner if domain.names_an_agent(task.assigner) else task.agent_id
        params = PostInput(
            target_address=f"bzzz://{target}",
            message_type=kind,
            content={"task_id": task.id, **content},
        )
        try:
            await self._conversations.post(self.caller(agent), params)
        except BzzzError as exc:
            logger.error("A2A agent %s could not report task %s: %s", agent.agent_id, task.id, exc)
            if kind != "task_failed":
                # The answer could not be recorded: the task ends failed, with the reason.
                why = f"A2A: the agent's answer could not be recorded: {exc.message}"
                await self._report(agent, task, "task_failed", {"error": why[:2000]})

    async def _deliver_post(self, agent: RemoteAgent, message_id: str) -> None:
        async with self._db.session() as session:
            posted = await Repository(session).message(message_id)
        if posted is None or agent.agent_id not in posted.recipients:
            return
        content = posted.content
        text = content.get("text") if isinstance(content.get("text"), str) else None
        message = Message(
            role=Role.ROLE_USER,
            message_id=f"bzzz-{posted.id}",
            context_id=posted.thread_id or f"bzzz-{posted.sender}",
            parts=[Part(text=text or str(content)[:8000])],
        )
        try:
            answer = await self._send(agent, message)
        except A2AError as exc:
            self.failed += 1
            logger.warning("post %s to A2A agent %s failed: %s", posted.id, agent.agent_id, exc)
            return
        self.delivered += 1
        if not domain.names_an_agent(posted.sender):
            return  # a principal has no inbox: it reads what the agent did elsewhere
        if isinstance(answer, Message):
            reply = text_of_parts(answer.parts)
        else:
            reply = "\n".join(text_of_parts(a.parts) for a in answer.artifacts)
            reply = reply or text_of_parts(answer.status.message.parts)
        params = PostInput(
            target_address=f"bzzz://{posted.sender}",
            message_type="text",
            content={"text": _cut(reply), "in_reply_to": posted.id, "via": "a2a"},
        )
        try:
            await self._conversations.post(self.caller(agent), params)
        except BzzzError as exc:
            logger.error("A2A agent %s could not answer %s: %s", agent.agent_id, posted.id, exc)

    async def stop(self) -> None:
        """Cancel the deliveries in flight (pending tasks are taken again at the next start)."""
        self._stopping = True
        jobs = list(self._jobs.values())
        for job in jobs:
            job.cancel()
        await asyncio.gather(*jobs, return_exceptions=True)
        await self._http.aclose()

    def status(self) -> dict[str, Any]:
        """The bridge at a glance."""
        return {
            "agents": sorted(self.remote),
            "in_flight": len(self._jobs),
            "delivered": self.delivered,
            "failed": self.failed,
        }
