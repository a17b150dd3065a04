"""The HTTP layer: the MCP mount, /healthz, /metrics."""
