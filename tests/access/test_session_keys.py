"""A transport session's key names it without telling its id (which lets one speak in it)."""

from __future__ import annotations

from bzzz.access.keys import holder_of, session_key
from bzzz.agents.leases import lease_bound
from bzzz.eventlog import Caller

SESSION_ID = "5f0c1e9a2b7d4c3e8f6a0b1c2d3e4f50"  # as the MCP SDK mints one (uuid4 hex)


def test_a_session_key_is_stable_distinct_and_holds_nothing_of_the_id() -> None:
    key = session_key("mcp", SESSION_ID)
    assert key == session_key("mcp", SESSION_ID)
    assert key != session_key("mcp", SESSION_ID[:-1] + "1")
    assert key != session_key("http", SESSION_ID)
    assert SESSION_ID[:8] not in key and SESSION_ID[-8:] not in key
    assert key.startswith("mcp-") and len(key) == len("mcp-") + 32


def test_a_session_key_still_reads_as_a_session() -> None:
    key = session_key("mcp", SESSION_ID)
    assert holder_of(Caller(key)) == "session"
    assert not lease_bound(key)  # its agents end with the session, not on a lease
