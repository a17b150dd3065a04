"""The audit of MCP calls: every tool call and resource read on the trail; ``bzzz://audit``.

Beside the server it wraps: it knows MCP's sessions and results, and calls down into
``bzzz.audit`` (the trail, its reading and verification) through their plain interfaces.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError
from mcp_types import CallToolResult

from bzzz.access.keys import handle_agent
from bzzz.audit import reading
from bzzz.audit.records import Action, digest, stamp, target_of
from bzzz.audit.trail import AuditTrail
from bzzz.audit.verify import verify
from bzzz.errors import BzzzError, ErrorCode
from bzzz.mcp.sessions import SessionRegistry, principal_of
from bzzz.principal import Principal

if TYPE_CHECKING:
    from bzzz.node.core import Node

logger = logging.getLogger(__name__)

AUDIT_URI = "bzzz://audit"
RECENT = 200
_CODE = re.compile(r"^([A-Z][A-Z_]{2,40}):")

RunTool = Callable[[str, dict[str, Any], Any], Awaitable[Any]]
ReadResource = Callable[[Any, Any], Awaitable[Any]]


def tool_outcome(result: Any) -> str:
    """``ok``, or the error code of a tool's ErrorResponse."""
    if isinstance(result, CallToolResult) and result.is_error:
        payload = result.structured_content or {}
        return str(payload.get("code") or ErrorCode.NETWORK_ERROR)[:64]
    return "ok"


def resource_outcome(exc: BaseException) -> str:
    """The error code a failed resource read carries (``CODE: message``)."""
    if isinstance(exc, ResourceNotFoundError):
        return "RESOURCE_NOT_FOUND"
    found = _CODE.match(str(exc))
    return found.group(1) if found else "RESOURCE_ERROR"


class McpAudit:
    """Records what the MCP server did for whom; ``BzzzMCP`` calls it around every request."""

    def __init__(self, trail: AuditTrail, node: Node, sessions: SessionRegistry) -> None:
        self.trail = trail
        self.node = node
        self.sessions = sessions

    async def tool(self, run: RunTool, name: str, arguments: dict[str, Any], context: Any) -> Any:
        """Run a tool and record it, whatever its outcome."""
        outcome = ErrorCode.NETWORK_ERROR.value
        try:
            result = await run(name, arguments, context)
            outcome = tool_outcome(result)
            return result
        finally:
            self._record_safely(f"tool:{name[:64]}", arguments, context, outcome)

    def _record_safely(self, action: str, arguments: Any, context: Any, outcome: str) -> None:
        # A boundary: whatever a hostile argument does to the record, the caller's answer is
        # the tool's (an exception here would reach the client as its bare text).
        try:
            self._record(action, arguments, context, outcome)
        except Exception:
            logger.exception("the audit could not record %s", action)

    async def resource(self, read: ReadResource, uri: Any, context: Any) -> Any:
        """Read a resource and record it; ``bzzz://audit`` only for admins of every project."""
        address = str(uri)
        params = {"address": address[:512]}
        outcome = ErrorCode.NETWORK_ERROR.value
        try:
            if address == AUDIT_URI and not self._who(context)[0].is_admin_of(None):
                raise ResourceError(
                    "PERMISSION_DENIED: the audit trail is shown to admins of every project"
                )
            result = await read(uri, context)
            outcome = "ok"
            return result
        except (ResourceError, BzzzError) as exc:
            outcome = exc.code if isinstance(exc, BzzzError) else resource_outcome(exc)
            raise
        finally:
            self._record("resource:read", params, context, outcome)

    def _who(self, context: Any) -> tuple[Principal, str]:
        request = None
        key = "unknown"
        try:
            request = context.request_context.request
            key = self.sessions.caller(context.session, request).session_id
        except (BzzzError, AttributeError, ValueError):
            # A call outside a request, or a session another credential opened (refused).
            pass
        return principal_of(request), key

    def _agent(self, arguments: Any, session: str) -> str | None:
        if isinstance(arguments, dict):
            agent = arguments.get("agent_id")
            if isinstance(agent, str) and agent:
                return agent[:128]
            handle = arguments.get("agent_handle")
            if isinstance(handle, str) and handle:
                return handle_agent(handle)[:128]
        mine = self.node.agents.directory.of_session(self.node.node_id, session)
        return mine[0].id if len(mine) == 1 else None

    def _record(self, action: str, arguments: Any, context: Any, outcome: str) -> None:
        who, session = self._who(context)
        self.trail.record(
            Action(
                at=stamp(self.node.clock.now()),
                principal=who.id[:256],
                session=session[:128],
                action=action,
                outcome=outcome,
                digest=digest(arguments),
                agent=self._agent(arguments, session),
                target=target_of(arguments),
            )
        )


async def audit_view(node: Node) -> dict[str, Any]:
    """What ``bzzz://audit`` shows: the newest records, the head, the verification."""
    await node.audit.flush()
    mine = await reading.records(node.db, reading.Filter(node_id=node.node_id))
    report = verify(mine, await reading.heads(node.db), node.node_id)
    return {
        "node_id": node.node_id,
        "records": [r.to_json() for r in reversed(mine[-RECENT:])],
        "head": {"seq": mine[-1].seq, "hash": mine[-1].hash} if mine else None,
        "intact": report.ok,
        "problems": [p.to_json() for p in report.problems],
    }


def register_audit(server: MCPServer[Any], node: Node, sessions: SessionRegistry) -> McpAudit:
    """Serve ``bzzz://audit`` to admins; the audit that records the server's calls."""

    @server.resource(
        AUDIT_URI,
        name="bzzz-audit",
        mime_type="application/json",
        description="This node's audit trail (newest first) and whether its chain is intact. "
        "Admins of every project only.",
    )
    async def read_audit() -> str:
        return json.dumps(await audit_view(node))

    return McpAudit(node.audit, node, sessions)
