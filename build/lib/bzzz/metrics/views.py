"""The metrics as /metrics text, as JSON, and as the MCP resource ``bzzz://metrics``."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from bzzz.domain import iso, utcnow
from bzzz.metrics.collector import metrics_of
from bzzz.metrics.logs import trace_mcp_calls

if TYPE_CHECKING:
    from bzzz.mcp.server import BzzzMCP
    from bzzz.node import Node

METRICS_DESCRIPTION = (
    "The network's metrics as JSON: agent availability, task completion rate, average "
    "response time, thread escalation rate, cost per interaction, network latency, consensus "
    "success rate, escalation rate to humans, cost per task, context compression ratio."
)


async def render_metrics(node: Node) -> str:
    """The Prometheus text for /metrics (HELP and TYPE on every family)."""
    metrics = metrics_of(node)
    await metrics.refresh()
    return metrics.text().decode()


async def metrics_json(node: Node) -> dict[str, Any]:
    """The same figures as JSON (``GET /api/v1/metrics``, ``bzzz://metrics``)."""
    metrics = metrics_of(node)
    await metrics.refresh()
    compression = metrics.compression()
    return {
        "node_id": node.node_id,
        "at": iso(utcnow()),
        **metrics.figures.to_json(),
        "context_compression_ratio": _compression_json(compression),
        "network_latency": metrics.latency(),
    }


def _compression_json(context: dict[str, Any] | None) -> dict[str, Any]:
    context = context or {}
    raw = int(context.get("raw_tokens", 0))
    return {
        "ratio": context.get("reduction") if raw else None,
        "raw_tokens": raw,
        "sent_tokens": int(context.get("sent_tokens", 0)),
        "prompts": int(context.get("prompts", 0)),
        "compressed_prompts": int(context.get("compressed_prompts", 0)),
        "live": True,
    }


def register_metrics(server: BzzzMCP, node: Node) -> None:
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
