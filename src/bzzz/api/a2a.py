"""BZZZ agents as A2A agents: their cards and the JSON-RPC binding, mapped onto posts and tasks.

Routes (behind the node's Authenticate middleware, so the caller's credential is read as on
every other route, and audited by ``AuditHTTP`` as every POST is):

* ``GET /a2a/agents.json`` — the cards of the agents the caller sees (the network's listing);
* ``GET /a2a/{agent_id}/.well-known/agent-card.json`` — one agent's card;
* ``POST /a2a/{agent_id}`` — JSON-RPC: ``SendMessage``/``message/send``,
  ``SendStreamingMessage``/``message/stream``, ``GetTask``/``tasks/get``,
  ``CancelTask``/``tasks/cancel`` (the assigner's ``task_failed``, shown as canceled),
  ``SubscribeToTask``/``tasks/resubscribe``.

A message becomes a ``task_assignment`` post to the agent (``chat_completion``, the text as
the user's message), sent as the caller's principal as WHOOSH's task route sends it; the A2A
task is the BZZZ task of the same id and its state follows the BZZZ task's. The grants are the
services': an agent of a project the caller has no grant for answers as one that is absent.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import AsyncGenerator, Callable, Coroutine
from typing import Any, TypeVar

from a2a.server.context import ServerCallContext
from a2a.server.request_handlers.request_handler import RequestHandler
from a2a.server.routes import ServerCallContextBuilder, create_jsonrpc_routes
from a2a.server.routes.common import DefaultServerCallContextBuilder
from a2a.types import (
    AgentCard,
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTaskPushNotificationConfigsResponse,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    SendMessageRequest,
    SubscribeToTaskRequest,
    Task,
    TaskPushNotificationConfig,
    TaskStatusUpdateEvent,
)
from a2a.utils.errors import (
    A2A_ERROR_REASONS,
    A2AError,
    InternalError,
    InvalidParamsError,
    InvalidRequestError,
    PushNotificationNotSupportedError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from google.protobuf.json_format import MessageToDict
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from bzzz import domain
from bzzz.api.a2a_cards import (
    A2A_PREFIX,
    CARD_PATH,
    FINAL_STATES,
    a2a_task,
    agent_card,
    data_of,
    text_of,
)
from bzzz.api.audit import OUTCOME_STATE
from bzzz.api.handlers import caller_of, failure
from bzzz.errors import AgentNotFound, BzzzError, ErrorCode
from bzzz.eventlog import Caller
from bzzz.node.core import Node
from bzzz.schemas import PostInput, validate_input
from bzzz.store.repository import Repository

logger = logging.getLogger(__name__)

LISTING_PATH = f"{A2A_PREFIX}/agents.json"
_CALLER = "bzzz_caller"
_AGENT = "bzzz_agent_id"
# The request's own state, where the HTTP audit reads a JSON-RPC refusal's outcome.
_REQUEST_STATE = "bzzz_request_state"
R = TypeVar("R")
# How often a stream looks at its task again (the store is the one place a task's state is).
STREAM_POLL_SECONDS = 0.1
STREAM_MAX_SECONDS = 3600.0


def a2a_error(exc: BzzzError) -> A2AError:
    """A BZZZ error as the JSON-RPC error an A2A client reads: the seed's code in the message
    (and in the error's details), never internal text."""
    data = {"bzzz_code": str(exc.code)}
    text = f"{exc.code}: {exc.message}"
    if exc.code in (ErrorCode.INVALID_PARAMETERS, ErrorCode.AGENT_NOT_FOUND):
        return InvalidParamsError(text, data)
    if exc.code == ErrorCode.THREAD_NOT_FOUND:
        return TaskNotFoundError(text, data)
    if exc.code in (ErrorCode.PERMISSION_DENIED, ErrorCode.RATE_LIMITED):
        return InvalidRequestError(text, data)
    return InternalError(text, data)


def _record_refusal(context: ServerCallContext, exc: A2AError) -> None:
    """Tell the HTTP audit what a JSON-RPC call answered (its HTTP status says 200)."""
    state = context.state.get(_REQUEST_STATE)
    if isinstance(state, dict):
        data = exc.data if isinstance(exc.data, dict) else {}
        state[OUTCOME_STATE] = str(data.get("bzzz_code") or A2A_ERROR_REASONS.get(type(exc)))


Method = Callable[[Any, Any, ServerCallContext], Coroutine[Any, Any, R]]


def audited(method: Method[R]) -> Method[R]:
    """A handler method whose refusal the audit trail records as such."""

    @functools.wraps(method)
    async def wrapper(self: Any, params: Any, context: ServerCallContext) -> R:
        try:
            return await method(self, params, context)
        except A2AError as exc:
            _record_refusal(context, exc)
            raise

    return wrapper


class CallerContext(ServerCallContextBuilder):
    """The call context of an A2A request: the BZZZ caller (as every REST route builds it)
    and the agent its path names."""

    def __init__(self) -> None:
        self._default = DefaultServerCallContextBuilder()

    def build(self, request: Request) -> ServerCallContext:
        """The SDK's context, with the caller and the agent id in its state."""
        context = self._default.build(request)
        context.state[_CALLER] = caller_of(request)
        context.state[_AGENT] = request.path_params["agent_id"]
        context.state[_REQUEST_STATE] = request.scope.setdefault("state", {})
        return context


class BzzzRequestHandler(RequestHandler):
    """The A2A methods of one node, each one service call (or a read of the store)."""

    def __init__(self, node: Node) -> None:
        self.node = node

    # --- what every method needs --------------------------------------------------------------

    def _agent(self, context: ServerCallContext) -> tuple[Caller, domain.Agent]:
        caller: Caller = context.state[_CALLER]
        agent_id = str(context.state[_AGENT])
        agent = self.node.agents.visible_agent(caller.principal, agent_id)
        if agent is None:
            raise a2a_error(
                AgentNotFound(f"agent '{agent_id[:128]}' not found", details={"agent_id": agent_id})
            )
        return caller, agent

    async def _readable_task(self, context: ServerCallContext, task_id: str) -> Task:
        caller, agent = self._agent(context)
        async with self.node.db.session() as session:
            repo = Repository(session)
            task = await repo.task(task_id)
            thread = await repo.thread(task.thread_id) if task and task.thread_id else None
        if task is None or task.agent_id != agent.id or not await self._reads(caller, agent, task):
            # A task the caller may not read does not exist for it.
            raise TaskNotFoundError(f"no task '{task_id[:128]}' of agent '{agent.id}'")
        # An open escalation (the thread waits for a person or another agent): input-required.
        return a2a_task(task, input_required=bool(thread and thread.status == "escalated"))

    async def _reads(self, caller: Caller, agent: domain.Agent, task: domain.Task) -> bool:
        if task.assigner == caller.principal.actor or self.node.agents.may_read(caller, agent):
            return True
        return task.assigner in {a.id for a in await self.node.agents.agents_of(caller)}

    async def _assign(self, params: SendMessageRequest, context: ServerCallContext) -> str:
        """Post the message to the agent as a task; the task's id."""
        caller, agent = self._agent(context)
        message = params.message
        text = text_of(message)
        if not text:
            raise InvalidParamsError(
                "the message has no text part", {"bzzz_code": "INVALID_PARAMETERS"}
            )
        if message.task_id:
            raise UnsupportedOperationError(
                "a BZZZ task takes no further messages: send a new message for new work"
            )
        data = data_of(message)
        task_data: dict[str, Any] = {
            "messages": [{"role": "user", "content": text}],
            "a2a": {
                "message_id": message.message_id,
                "context_id": message.context_id or None,
                "text": text[:4000],
            },
        }
        if data:
            task_data["data"] = data
        post = {
            "target_address": f"bzzz://{agent.id}",
            "message_type": "task_assignment",
            "content": {
                "task_type": str(data.get("task_type") or "chat_completion"),
                "description": text[:4000],
                "task_data": task_data,
            },
        }
        try:
            sent = await self.node.conversations.post(
                caller, validate_input(PostInput, post), as_principal=True
            )
        except BzzzError as exc:
            raise a2a_error(exc) from None
        task_id = (sent.get("tasks") or {}).get(agent.id)
        if task_id is None:
            why = sent["delivery_results"]["undelivered"]
            reason = why[0]["reason"] if why else "the agent took no task"
            raise InvalidRequestError(
                f"INVALID_PARAMETERS: {reason}", {"bzzz_code": "INVALID_PARAMETERS"}
            )
        return str(task_id)

    # --- the A2A methods ----------------------------------------------------------------------

    @audited
    async def on_message_send(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> Task | Message:
        """A task for the agent; answered at once (submitted) — follow it with tasks/get or a
        stream, since a BZZZ agent works in its own time."""
        task_id = await self._assign(params, context)
        return await self._readable_task(context, task_id)

    async def on_message_send_stream(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Any]:
        """The task, then each change of its state, until it ends."""
        try:
            task_id = await self._assign(params, context)
            first = await self._readable_task(context, task_id)
        except A2AError as exc:
            _record_refusal(context, exc)
            raise
        async for event in self._follow(context, task_id, first):
            yield event

    async def on_subscribe_to_task(
        self, params: SubscribeToTaskRequest, context: ServerCallContext
    ) -> AsyncGenerator[Any]:
        """A task's changes from now until it ends."""
        try:
            first = await self._readable_task(context, params.id)
        except A2AError as exc:
            _record_refusal(context, exc)
            raise
        async for event in self._follow(context, params.id, first):
            yield event

    async def _follow(
        self, context: ServerCallContext, task_id: str, task: Task
    ) -> AsyncGenerator[Any]:
        yield task
        seen = task.status.state
        async with asyncio.timeout(STREAM_MAX_SECONDS):
            while task.status.state not in FINAL_STATES:
                await asyncio.sleep(STREAM_POLL_SECONDS)
                task = await self._readable_task(context, task_id)
                if task.status.state == seen:
                    continue
                seen = task.status.state
                if task.status.state in FINAL_STATES:
                    # The last event carries the whole task: its artifacts with it.
                    yield task
                    return
                yield TaskStatusUpdateEvent(
                    task_id=task.id, context_id=task.context_id, status=task.status
                )

    @audited
    async def on_get_task(self, params: GetTaskRequest, context: ServerCallContext) -> Task | None:
        """The task of that id, if the caller reads it."""
        return await self._readable_task(context, params.id)

    @audited
    async def on_cancel_task(
        self, params: CancelTaskRequest, context: ServerCallContext
    ) -> Task | None:
        """Cancel a task the caller assigned: a ``task_failed`` of its assigner (canceled)."""
        task = await self._readable_task(context, params.id)
        if task.status.state in FINAL_STATES:
            raise TaskNotCancelableError(f"task '{task.id}' has already ended")
        caller, agent = self._agent(context)
        post = {
            "target_address": f"bzzz://{agent.id}",
            "message_type": "task_failed",
            "content": {"task_id": task.id, "canceled": True, "error": "canceled over A2A"},
        }
        try:
            await self.node.conversations.post(
                caller, validate_input(PostInput, post), as_principal=True
            )
        except BzzzError as exc:
            # Only the task's assigner cancels it (the assignee ends it its own way).
            raise TaskNotCancelableError(f"{exc.code}: {exc.message}") from None
        return await self._readable_task(context, task.id)

    async def on_list_tasks(
        self, params: ListTasksRequest, context: ServerCallContext
    ) -> ListTasksResponse:
        """Not offered: GET /api/v1/tasks lists a caller's tasks."""
        raise UnsupportedOperationError("tasks/list is not offered; use GET /api/v1/tasks")

    async def on_create_task_push_notification_config(
        self, params: TaskPushNotificationConfig, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        """Push notifications: bzzz_subscribe with a callback_webhook instead."""
        raise PushNotificationNotSupportedError()

    async def on_get_task_push_notification_config(
        self, params: GetTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        """Not offered."""
        raise PushNotificationNotSupportedError()

    async def on_list_task_push_notification_configs(
        self, params: ListTaskPushNotificationConfigsRequest, context: ServerCallContext
    ) -> ListTaskPushNotificationConfigsResponse:
        """Not offered."""
        raise PushNotificationNotSupportedError()

    async def on_delete_task_push_notification_config(
        self, params: DeleteTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> None:
        """Not offered."""
        raise PushNotificationNotSupportedError()

    async def on_get_extended_agent_card(
        self, params: GetExtendedAgentCardRequest, context: ServerCallContext
    ) -> AgentCard:
        """Not offered: the public card is the whole card."""
        raise UnsupportedOperationError("this agent has no extended card")


def card_json(card: AgentCard) -> dict[str, Any]:
    """A card as its JSON document."""
    shown: dict[str, Any] = MessageToDict(card)
    return shown


def a2a_routes(node: Node, base_url: str | None) -> list[Any]:
    """The A2A routes of ``node``; ``base_url``: where clients reach it (its cards' URL)."""
    handler = BzzzRequestHandler(node)
    auth = node.settings.auth

    def base_of(request: Request) -> str:
        return (auth.public_url or base_url or str(request.base_url)).rstrip("/")

    def card_of(request: Request, agent: domain.Agent) -> dict[str, Any]:
        return card_json(agent_card(agent, base_of(request), auth, node.access.required))

    async def card(request: Request) -> Response:
        agent_id = request.path_params["agent_id"]
        agent = node.agents.visible_agent(caller_of(request).principal, agent_id)
        if agent is None:
            return failure(AgentNotFound(f"agent '{agent_id[:128]}' not found"))
        return JSONResponse(card_of(request, agent))

    async def listing(request: Request) -> Response:
        who = caller_of(request).principal
        agents = node.agents.directory.matching(
            agent_id=None, role=None, project=None, task=None, online_only=True
        )
        cards = [card_of(request, a) for a in agents if who.may_see_project(a.project)]
        return JSONResponse({"agents": cards, "count": len(cards)})

    rpc = create_jsonrpc_routes(
        handler,
        f"{A2A_PREFIX}/{{agent_id}}",
        context_builder=CallerContext(),
        enable_v0_3_compat=True,
    )
    return [
        Route(LISTING_PATH, listing, methods=["GET"]),
        Route(f"{A2A_PREFIX}/{{agent_id}}{CARD_PATH}", card, methods=["GET"]),
        *rpc,
    ]
