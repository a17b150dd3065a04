"""BZZZ: a coordination network for AI agents, reachable over MCP."""

__version__ = "0.1.0"
