"""The seed's metrics: /metrics (Prometheus), ``bzzz://metrics`` (MCP), JSON for REST and CLI.

``render_metrics(node)`` is the text for /metrics, ``metrics_json(node)`` the same figures as
JSON (``GET /api/v1/metrics``); ``node`` is anything ``Measured`` (the node passes itself).
``mcp/metrics.py`` adds the MCP resource and gives every MCP call a request id for the logs.
"""

from bzzz.metrics.collector import CONTENT_TYPE, Measured, NodeMetrics, metrics_of
from bzzz.metrics.views import metrics_json, render_metrics

__all__ = [
    "CONTENT_TYPE",
    "Measured",
    "NodeMetrics",
    "metrics_json",
    "metrics_of",
    "render_metrics",
]
