"""The metrics as /metrics text and as JSON (``GET /api/v1/metrics``, ``bzzz://metrics``).

The faces serve them: ``api/app.py`` the text, ``api/rest.py`` and ``mcp/metrics.py`` the JSON.
"""

from __future__ import annotations

from typing import Any

from bzzz.domain import iso, utcnow
from bzzz.metrics.collector import Measured, metrics_of


async def render_metrics(node: Measured) -> str:
    """The Prometheus text for /metrics (HELP and TYPE on every family)."""
    metrics = metrics_of(node)
    await metrics.refresh()
    return metrics.text().decode()


async def metrics_json(node: Measured) -> dict[str, Any]:
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
