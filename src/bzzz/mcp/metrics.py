"""MCP's side of the metrics and logs: ``bzzz://metrics``, and a request id per MCP call.

Beside the server: the figures come from ``bzzz.metrics`` (``metrics_json``), the request ids
from ``bzzz.metrics.logs`` (``in_request``); only the wrapping of the server's calls and the
resource are MCP's.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from mcp.server.mcpserver import MCPServer

from bzzz.metrics import Measured, metrics_json
from bzzz.metrics.logs import in_request

METRICS_DESCRIPTION = (
    "The network's metrics as JSON: agent availability, task completion rate, average "
    "response time, thread escalation rate, cost per interaction, network latency, consensus "
    "success rate, escalation rate to humans, cost per task, context compression ratio."
)


def register_metrics(server: MCPServer[Any], node: Measured) -> None:
    """Add ``bzzz://metrics`` and a request id per MCP call (for the logs)."""
    trace_mcp_calls(server)

    # A concrete resource: the SDK matches it before the bzzz://{+address} template.
    @server.resource(
        "bzzz://metrics",
        name="bzzz-metrics",
        mime_type="application/json",
        description=METRICS_DESCRIPTION,
    )
    async def read_metrics() -> str:
        return json.dumps(await metrics_json(node))


def trace_mcp_calls(server: MCPServer[Any]) -> None:
    """Give every tool call and resource read of ``server`` its own request id.

    The SDK dispatches through ``self.call_tool`` / ``self.read_resource`` at call time, so
    wrapping them on the instance reaches every transport (stdio and HTTP alike).
    """
    for name in ("call_tool", "read_resource"):
        setattr(server, name, _traced(getattr(server, name)))


def _traced(method: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    async def traced(*args: Any, **kwargs: Any) -> Any:
        # Its own id even over HTTP: the SDK runs a session's calls in the task of the request
        # that opened the session, whose id would otherwise stick to every later call.
        with in_request():
            return await method(*args, **kwargs)

    return traced
