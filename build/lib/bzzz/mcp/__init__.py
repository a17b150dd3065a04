"""The MCP layer: tools, resources, completion; no rules live here."""
