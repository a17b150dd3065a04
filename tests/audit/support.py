"""Helpers of the audit tests: MCP calls on a node, the node's chain, tampering with SQLite."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from mcp import Client

from bzzz.audit import reading
from bzzz.audit.records import Record
from bzzz.node.core import Node


async def call(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """Call a tool; its structured content (success or ErrorResponse)."""
    result = await client.call_tool(tool, arguments)
    assert result.structured_content is not None
    return result.structured_content


async def chain_of(node: Node) -> list[Record]:
    """The node's own records, once every queued one is stored."""
    await node.audit.flush()
    return await reading.records(node.db, reading.Filter(node_id=node.node_id))


def sql(db_file: Path, *statements: str) -> None:
    """Change the SQLite file behind the node's back (as someone with the disk would)."""
    connection = sqlite3.connect(db_file)
    try:
        for statement in statements:
            connection.execute(statement)
        connection.commit()
    finally:
        connection.close()
