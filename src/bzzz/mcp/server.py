"""The MCP server: seven thin tools, a bzzz:// resource template, subscriptions, completion."""

from __future__ import annotations

import json
import logging
from typing import Annotated, Any

from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer, ResourceSecurity
from mcp.server.mcpserver.exceptions import ResourceError, ToolError, UnexpectedToolError
from mcp.server.subscriptions import InMemorySubscriptionBus, ResourceUpdated
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INVALID_PARAMS,
    CallToolResult,
    CompleteRequestParams,
    CompleteResult,
    Completion,
    EmptyResult,
    ResourceTemplateReference,
    SetLevelRequestParams,
    SubscribeRequestParams,
    TextContent,
    UnsubscribeRequestParams,
)
from pydantic import Field, ValidationError

from bzzz import domain
from bzzz.agents.service import visible_projects
from bzzz.errors import BzzzError, ErrorCode, InvalidParameters
from bzzz.eventlog import Caller
from bzzz.events.service import subscription_uri
from bzzz.mcp import descriptions as text
from bzzz.mcp.audit import McpAudit, register_audit
from bzzz.mcp.knowledge import register_knowledge
from bzzz.mcp.listen import guard_listen, may_follow
from bzzz.mcp.metrics import register_metrics
from bzzz.mcp.models import (
    AnnounceOutput,
    GetOutput,
    LookupOutput,
    PostOutput,
    SubscribeOutput,
    ThreadOutput,
)
from bzzz.mcp.reserve import register_reserve
from bzzz.mcp.sessions import SessionRegistry
from bzzz.node.core import Node
from bzzz.principal import Scope
from bzzz.schemas import (
    AnnounceInput,
    GetInput,
    LookupInput,
    PostInput,
    SubscribeInput,
    ThreadInput,
    too_deep,
    too_deep_error,
    validate_input,
)

logger = logging.getLogger(__name__)

INSTRUCTIONS = """BZZZ puts you on a coordination network of AI agents.
Start with bzzz_announce (who you are), find others with bzzz_lookup, read with bzzz_get,
send with bzzz_post, talk in threads with bzzz_thread, follow events with bzzz_subscribe,
reserve the paths you edit with bzzz_reserve.
Addresses look like bzzz://agent:role@project:task/path; '*' means any."""


def error_result(error: BzzzError) -> CallToolResult:
    """The reference's ErrorResponse as a tool result with isError."""
    payload = error.to_response()
    return CallToolResult(
        content=[TextContent(type="text", text=json.dumps(payload))],
        structured_content=payload,
        is_error=True,
    )


def ok_result(data: dict[str, Any]) -> CallToolResult:
    """A success result: the service's JSON-ready answer (the tool's output model describes it)."""
    # The services build exactly the documented fields from JSON types; validating a large
    # answer (a lookup with 100 matches) against the lenient model again would only cost time.
    payload = data
    return CallToolResult(
        content=[TextContent(type="text", text=json.dumps(payload, separators=(",", ":")))],
        structured_content=payload,
    )


def _validation_error(exc: ValidationError) -> InvalidParameters:
    problems = [
        {"field": ".".join(str(p) for p in e["loc"]) or "parameters", "problem": e["msg"]}
        for e in exc.errors(include_url=False, include_input=False, include_context=False)
    ]
    first = problems[0]
    return InvalidParameters(
        f"invalid parameter '{first['field']}': {first['problem']}",
        details={"field": first["field"], "problems": problems},
    )


class BzzzMCP(MCPServer[Any]):
    """MCPServer whose every failure is the reference's structured ErrorResponse."""

    # Records every tool call and resource read (mcp/audit.py); set by build_server.
    audit: McpAudit | None = None

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> Any:
        """Run a tool, on the audit trail; arguments nested too deep are refused first (the
        audit's digest and the SDK's validation would otherwise recurse through them)."""
        deep = too_deep(arguments) if isinstance(arguments, dict) else None
        if deep is not None:
            refusal = error_result(too_deep_error(deep))

            async def refuse(*_: Any) -> CallToolResult:
                return refusal

            if self.audit is None:
                return refusal
            return await self.audit.tool(refuse, name, {deep: "(too deep)"}, context)
        if self.audit is None:
            return await self._run_tool(name, arguments, context)
        return await self.audit.tool(self._run_tool, name, arguments, context)

    async def read_resource(self, uri: Any, context: Context[Any, Any] | None = None) -> Any:
        """Read a resource, on the audit trail."""
        if self.audit is None:
            return await super().read_resource(uri, context)
        return await self.audit.resource(super().read_resource, uri, context)

    async def _run_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> Any:
        """Run a tool; translate every failure into an ErrorResponse without internals."""
        unknown = self._unknown_arguments(name, arguments)
        if unknown:
            return error_result(
                InvalidParameters(
                    f"unknown parameter(s) for {name[:64]}: {', '.join(unknown)}",
                    details={"field": unknown[0], "unknown": unknown},
                )
            )
        try:
            return await super().call_tool(name, arguments, context)
        except UnexpectedToolError as exc:
            cause = exc.__cause__
            if isinstance(cause, BzzzError):
                return error_result(cause)
            logger.error("tool %s failed", name, exc_info=cause or exc)
            return error_result(
                BzzzError(
                    "internal error; the node logged the details", code=ErrorCode.NETWORK_ERROR
                )
            )
        except ToolError as exc:
            if isinstance(exc.__cause__, ValidationError):
                return error_result(_validation_error(exc.__cause__))
            if isinstance(exc.__cause__, BzzzError):
                return error_result(exc.__cause__)
            if str(exc).startswith("Unknown tool:"):
                return error_result(
                    InvalidParameters(f"unknown tool '{name[:64]}'", details={"field": "name"})
                )
            return error_result(InvalidParameters(str(exc)[:500]))

    def _unknown_arguments(self, name: str, arguments: dict[str, Any]) -> list[str]:
        # The SDK ignores extra keys; a misspelt parameter must not silently fall back to a
        # default and change state.
        tool = self._tool_manager.get_tool(name)
        if tool is None or not isinstance(arguments, dict):
            return []
        known = set(tool.parameters.get("properties", {}))
        return sorted(str(k)[:64] for k in arguments if k not in known)[:10]


def _args(**kwargs: Any) -> dict[str, Any]:
    return {k: v for k, v in kwargs.items() if v is not None}


def build_server(node: Node) -> tuple[BzzzMCP, SessionRegistry]:
    """The MCP server of a node, and its session registry."""
    # Our own bus, so that events arriving outside any request reach 2026-protocol listeners.
    bus = InMemorySubscriptionBus()
    server = BzzzMCP(
        "bzzz",
        version="0.1.0",
        instructions=INSTRUCTIONS,
        log_level="WARNING",
        subscriptions=bus,
    )

    async def session_ended(caller: Any) -> None:
        # Subscriptions first: the agents' offline events are then not fanned out to them.
        await node.subscriptions.end_for_session(caller.session_id)
        await node.agents.session_ended(caller)

    sessions = SessionRegistry(on_end=session_ended)

    def caller_of(ctx: Context[Any, Any], handle: str | None = None) -> Caller:
        request = ctx.request_context.request if ctx.request_context else None
        return sessions.caller(ctx.session, request, handle)

    async def run(call: Any) -> CallToolResult:
        try:
            return ok_result(await call)
        except BzzzError as exc:
            return error_result(exc)

    @server.tool(name="bzzz_announce", description=text.ANNOUNCE)
    async def bzzz_announce(
        agent_id: Annotated[str, Field(description="unique agent id: letters, digits, - _ .")],
        role: Annotated[str, Field(description="primary role: architect, reviewer, ...")],
        ctx: Context[Any, Any],
        capabilities: Annotated[list[str] | None, Field(description="what it can do")] = None,
        specialization: Annotated[str | None, Field(description="area of expertise")] = None,
        max_tasks: Annotated[int, Field(strict=True, description="maximum concurrent tasks")] = 3,
        project: Annotated[str | None, Field(description="project it works on")] = None,
        task: Annotated[str | None, Field(description="task it works on")] = None,
        agent_handle: Annotated[str | None, Field(description=text.HANDLE)] = None,
    ) -> Annotated[CallToolResult, AnnounceOutput]:
        params = validate_input(
            AnnounceInput,
            _args(
                agent_id=agent_id,
                role=role,
                capabilities=capabilities,
                specialization=specialization,
                max_tasks=max_tasks,
                project=project,
                task=task,
            ),
        )
        return await run(node.front.announce(caller_of(ctx, agent_handle), params))

    @server.tool(name="bzzz_lookup", description=text.LOOKUP)
    async def bzzz_lookup(
        semantic_address: Annotated[str, Field(description="bzzz://agent:role@project:task")],
        ctx: Context[Any, Any],
        filter_criteria: Annotated[
            dict[str, Any] | None,
            Field(
                description="{expertise: string[], availability: bool, performance_threshold: 0-1}"
            ),
        ] = None,
        limit: Annotated[int, Field(strict=True, description="at most this many matches")] = 100,
        agent_handle: Annotated[str | None, Field(description=text.HANDLE)] = None,
    ) -> Annotated[CallToolResult, LookupOutput]:
        params = validate_input(
            LookupInput,
            _args(semantic_address=semantic_address, filter_criteria=filter_criteria, limit=limit),
        )
        return await run(node.agents.lookup(caller_of(ctx, agent_handle), params))

    @server.tool(name="bzzz_get", description=text.GET)
    async def bzzz_get(
        address: Annotated[str, Field(description="bzzz://agent-id[/inbox|/tasks|/threads/<id>]")],
        ctx: Context[Any, Any],
        include_metadata: Annotated[bool, Field(strict=True)] = True,
        max_history: Annotated[
            int, Field(strict=True, description="most entries per history list")
        ] = 10,
        before: Annotated[
            str | None,
            Field(description="page: entries older than this id (content.page.oldest)"),
        ] = None,
        after: Annotated[
            str | None,
            Field(description="page: entries newer than this id (content.page.newest)"),
        ] = None,
        agent_handle: Annotated[str | None, Field(description=text.HANDLE)] = None,
        as_of: Annotated[str | int | None, Field(description=text.AS_OF)] = None,
        about: Annotated[str | None, Field(description=text.ABOUT)] = None,
        q: Annotated[str | None, Field(description=text.Q)] = None,
        limit: Annotated[int | None, Field(strict=True, description=text.LIMIT)] = None,
    ) -> Annotated[CallToolResult, GetOutput]:
        params = validate_input(
            GetInput,
            _args(
                address=address,
                include_metadata=include_metadata,
                max_history=max_history,
                before=before,
                after=after,
                as_of=as_of,
                about=about,
                q=q,
                limit=limit,
            ),
        )
        return await run(node.front.get(caller_of(ctx, agent_handle), params))

    @server.tool(name="bzzz_post", description=text.POST)
    async def bzzz_post(
        message_type: Annotated[
            str,
            Field(
                description="acted on: task_assignment, task_progress, task_complete, "
                "task_failed; in threads text, code, file, decision, question; others carried"
            ),
        ],
        content: Annotated[dict[str, Any], Field(description="the message body (JSON object)")],
        ctx: Context[Any, Any],
        target_address: Annotated[
            str | None,
            Field(description="agent address or wildcard; optional with thread_id"),
        ] = None,
        priority: Annotated[str, Field(description="low | medium | high | urgent")] = "medium",
        thread_id: Annotated[str | None, Field(description="post into this thread")] = None,
        agent_id: Annotated[str | None, Field(description="which of your agents sends")] = None,
        reply_to: Annotated[str | None, Field(description="message id this answers")] = None,
        stance: Annotated[
            str | None, Field(description="agree | disagree with the reply_to message (threads)")
        ] = None,
        agent_handle: Annotated[str | None, Field(description=text.HANDLE)] = None,
    ) -> Annotated[CallToolResult, PostOutput]:
        params = validate_input(
            PostInput,
            _args(
                target_address=target_address,
                message_type=message_type,
                content=content,
                priority=priority,
                thread_id=thread_id,
                agent_id=agent_id,
                reply_to=reply_to,
                stance=stance,
            ),
        )
        return await run(node.front.post(caller_of(ctx, agent_handle), params))

    @server.tool(name="bzzz_thread", description=text.THREAD)
    async def bzzz_thread(
        action: Annotated[
            str,
            Field(
                description="create | join | leave | list | summarize | pause | resume | "
                "resolve | close | review"
            ),
        ],
        ctx: Context[Any, Any],
        thread_id: Annotated[
            str | None,
            Field(description="for join, leave, summarize, pause, resume, resolve, close"),
        ] = None,
        participants: Annotated[list[str] | None, Field(description="for create")] = None,
        topic: Annotated[str | None, Field(description="for create; review: what is reviewed")] = (
            None
        ),
        agent_id: Annotated[str | None, Field(description="which of your agents acts")] = None,
        reason: Annotated[
            str | None, Field(description="resolve: the resolution; pause/close: why")
        ] = None,
        roles: Annotated[list[str] | None, Field(description="review: the roles to invite")] = None,
        task_id: Annotated[str | None, Field(description="review: the task under review")] = None,
        criteria: Annotated[list[str] | None, Field(description="review: review criteria")] = None,
        agent_handle: Annotated[str | None, Field(description=text.HANDLE)] = None,
    ) -> Annotated[CallToolResult, ThreadOutput]:
        params = validate_input(
            ThreadInput,
            _args(
                action=action,
                thread_id=thread_id,
                participants=participants,
                topic=topic,
                agent_id=agent_id,
                reason=reason,
                roles=roles,
                task_id=task_id,
                criteria=criteria,
            ),
        )
        return await run(node.front.thread(caller_of(ctx, agent_handle), params))

    @server.tool(name="bzzz_subscribe", description=text.SUBSCRIBE)
    async def bzzz_subscribe(
        ctx: Context[Any, Any],
        event_types: Annotated[
            list[str] | None,
            Field(description="to subscribe: " + ", ".join(domain.EVENT_TYPES)),
        ] = None,
        filter_address: Annotated[str | None, Field(description="only events here")] = None,
        callback_webhook: Annotated[str | None, Field(description="POST events here")] = None,
        agent_handle: Annotated[str | None, Field(description=text.HANDLE)] = None,
        action: Annotated[str, Field(description="subscribe | unsubscribe")] = "subscribe",
        subscription_id: Annotated[
            str | None, Field(description="unsubscribe: the subscription to remove")
        ] = None,
    ) -> Annotated[CallToolResult, SubscribeOutput]:
        params = validate_input(
            SubscribeInput,
            _args(
                event_types=event_types,
                filter_address=filter_address,
                callback_webhook=callback_webhook,
                action=action,
                subscription_id=subscription_id,
            ),
        )
        caller = caller_of(ctx, agent_handle)
        mine = await node.agents.agents_of(caller)
        subscriber = mine[0].id if len(mine) == 1 else None
        return await run(node.subscriptions.subscribe(caller, params, subscriber))

    register_reserve(server, node, caller_of, run)
    _publish_schemas_only(server)
    register_knowledge(server, node, sessions, bus)
    _register_resources(server, node, sessions, bus)
    _register_costs(server, node)
    register_metrics(server, node)
    server.audit = register_audit(server, node, sessions)
    return server, sessions


def _publish_schemas_only(server: BzzzMCP) -> None:
    # Keep each tool's outputSchema but skip the SDK's re-validation of every result: the
    # SDK validates only when a tool has an output model ("a schema published without a
    # model is advertised but not validated"), and ok_result builds the shape itself.
    for tool in server._tool_manager.list_tools():
        tool.fn_metadata.output_model = None


def _register_costs(server: BzzzMCP, node: Node) -> None:
    # A concrete resource: the SDK matches it before the bzzz://{+address} template.
    @server.resource(
        "bzzz://costs", name="bzzz-costs", mime_type="application/json", description=text.COSTS
    )
    async def read_costs() -> str:
        return json.dumps(await node.llm.usage())


def _register_resources(
    server: BzzzMCP, node: Node, sessions: SessionRegistry, bus: InMemorySubscriptionBus
) -> None:
    @server.resource(
        "bzzz://{+address}",
        name="bzzz-address",
        mime_type="application/json",
        description=text.RESOURCE,
        security=ResourceSecurity(exempt_params={"address"}),
    )
    async def read_address(address: str, ctx: Context[Any, Any]) -> str:
        try:
            request = ctx.request_context.request if ctx.request_context else None
            caller = sessions.caller(ctx.session, request)
            if address.startswith("subscriptions/"):
                sub_id = address.removeprefix("subscriptions/")
                data = await node.subscriptions.events(caller, sub_id)
            else:
                params = validate_input(GetInput, {"address": f"bzzz://{address}"})
                data = await node.front.get(caller, params)
        except BzzzError as exc:
            raise ResourceError(f"{exc.code}: {exc.message}") from exc
        return json.dumps(data)

    @server.resource(
        "bzzz://peers",
        name="bzzz-peers",
        mime_type="application/json",
        description=text.PEERS,
    )
    async def read_peers() -> str:
        return json.dumps({"peers": node.peers.view()})

    _register_requests(server, node, sessions)

    async def on_events(matched: Any) -> None:
        uris = {subscription_uri(sub.id) for sub, _ in matched}
        await sessions.notify_updated(uris)
        for uri in uris:
            await bus.publish(ResourceUpdated(uri=uri))

    node.projector.add_listener(on_events)


def _register_requests(server: BzzzMCP, node: Node, sessions: SessionRegistry) -> None:
    """resources/subscribe, logging/setLevel and completion/complete on the low-level server."""
    lowlevel = server._lowlevel_server

    async def on_subscribe(
        ctx: ServerRequestContext[Any], params: SubscribeRequestParams
    ) -> EmptyResult:
        caller = sessions.caller(ctx.session, ctx.request)
        # Another's subscription is answered as an unknown URI: accepted, and never fires.
        if await may_follow(node.subscriptions, caller, str(params.uri)):
            sessions.subscribe(caller.session_id, str(params.uri))
        return EmptyResult()

    async def on_unsubscribe(
        ctx: ServerRequestContext[Any], params: UnsubscribeRequestParams
    ) -> EmptyResult:
        sessions.unsubscribe(sessions.caller(ctx.session, ctx.request).session_id, str(params.uri))
        return EmptyResult()

    async def on_set_level(
        ctx: ServerRequestContext[Any], params: SetLevelRequestParams
    ) -> EmptyResult:
        try:
            sessions.caller(ctx.session, ctx.request).principal.require(
                Scope.ADMIN, "setting the node's log level"
            )
        except BzzzError as exc:
            raise MCPError(code=INVALID_PARAMS, message=f"{exc.code}: {exc.message}") from exc
        level = {
            "emergency": "CRITICAL",
            "alert": "CRITICAL",
            "critical": "CRITICAL",
            "error": "ERROR",
            "warning": "WARNING",
            "notice": "INFO",
            "info": "INFO",
            "debug": "DEBUG",
        }.get(str(params.level), "INFO")
        logging.getLogger("bzzz").setLevel(level)
        return EmptyResult()

    lowlevel.add_request_handler("resources/subscribe", SubscribeRequestParams, on_subscribe)
    guard_listen(lowlevel, node.subscriptions, sessions.caller)
    lowlevel.add_request_handler("resources/unsubscribe", UnsubscribeRequestParams, on_unsubscribe)
    lowlevel.add_request_handler("logging/setLevel", SetLevelRequestParams, on_set_level)

    # A low-level handler rather than server.completion(): only it sees the request, and
    # completions show only agents of the caller's projects.
    async def on_complete(
        ctx: ServerRequestContext[Any], params: CompleteRequestParams
    ) -> CompleteResult:
        ref, argument = params.ref, params.argument
        if not isinstance(ref, ResourceTemplateReference) or argument.name != "address":
            return CompleteResult(completion=Completion(values=[]))
        who = sessions.caller(ctx.session, ctx.request).principal
        visible = visible_projects(who)
        values = node.agents.directory.completions(argument.value, limit=100, visible=visible)
        return CompleteResult(
            completion=Completion(values=values, total=len(values), has_more=len(values) >= 100)
        )

    lowlevel.add_request_handler("completion/complete", CompleteRequestParams, on_complete)
