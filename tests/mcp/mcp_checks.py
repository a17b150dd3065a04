"""Helpers shared by the MCP tests: calling tools and checking what a client reads."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import datetime
from typing import Any

from mcp import Client
from mcp_types import CallToolResult
from sqlalchemy import func, select

from bzzz.node.core import Node
from bzzz.store.models import Base

# Opens a new in-memory client session: ``async with connect() as client``.
ClientFactory = Callable[..., Client]

ERROR_CODES = {
    "INVALID_PARAMETERS",
    "AGENT_NOT_FOUND",
    "THREAD_NOT_FOUND",
    "NETWORK_ERROR",
    "OPENAI_ERROR",
    "COST_LIMIT_EXCEEDED",
    "ESCALATION_FAILED",
}

# What must never reach a client: stack traces, library names, source paths.
LEAK_MARKERS = ("Traceback", "sqlalchemy", "pydantic", 'File "', "site-packages", "src/bzzz")
_INTERNAL_PATH = re.compile(r"(/work/|/home/|/usr/lib/|/tmp/|\.py\b)")
MAX_ERROR_TEXT = 8_000


def iso_time(value: str) -> datetime:
    """Parse the reference's ISO-8601 timestamps (with a Z)."""
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


async def call_ok(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """Call a tool that must succeed; return its structured content."""
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content
    assert result.structured_content is not None
    assert result.structured_content["success"] is True
    return result.structured_content


async def announce(
    client: Client, agent_id: str, role: str = "architect", **extra: Any
) -> dict[str, Any]:
    """Announce an agent from this client's session; return the result."""
    return await call_ok(client, "bzzz_announce", {"agent_id": agent_id, "role": role, **extra})


def result_text(result: CallToolResult) -> str:
    """Everything a client can read from a tool result."""
    texts = [getattr(block, "text", "") for block in result.content]
    return "\n".join(texts) + json.dumps(result.structured_content)


def assert_no_leak(text: str) -> None:
    """No traceback, library name or internal path in text a client reads."""
    for marker in LEAK_MARKERS:
        assert marker not in text, f"{marker!r} leaked to the client: {text[:500]}"
    assert not _INTERNAL_PATH.search(text), f"an internal path leaked: {text[:500]}"


def assert_error_response(result: CallToolResult, code: str | None = None) -> dict[str, Any]:
    """The reference's ErrorResponse, flagged isError, without internals; returns it."""
    assert result.is_error is True, result.structured_content
    error = result.structured_content
    assert error is not None, result.content
    assert error["success"] is False
    assert isinstance(error["error"], str) and error["error"]
    assert error["code"] in ERROR_CODES, error
    if code is not None:
        assert error["code"] == code, error
    assert "details" in error
    iso_time(error["timestamp"])
    text = result_text(result)
    assert_no_leak(text)
    # A hostile, oversized input must not be echoed back in full.
    assert len(text) < MAX_ERROR_TEXT, f"the error is {len(text)} characters long"
    return error


async def table_counts(node: Node) -> dict[str, int]:
    """Rows in every table of the node's store (but the audit trail, which records refusals)."""
    counts = {}
    async with node.db.session() as session:
        for table in Base.metadata.sorted_tables:
            if table.name == "audit_records":
                continue
            count = await session.scalar(select(func.count()).select_from(table))
            counts[table.name] = int(count or 0)
    return counts
