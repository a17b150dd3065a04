"""bzzz_reserve over MCP: its answers, its errors with their codes, and the audit trail."""

from __future__ import annotations

from typing import Any

from mcp import Client

from bzzz.audit import reading
from bzzz.mcp.server import build_server
from bzzz.node.core import Node


async def _call(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert result.structured_content is not None
    assert result.is_error is (not result.structured_content["success"])
    return result.structured_content


async def test_a_conflict_and_bad_input_come_back_with_their_codes_and_are_audited(
    node: Node,
) -> None:
    server, _ = build_server(node)
    async with Client(server, mode="legacy") as alice, Client(server, mode="legacy") as bob:
        await _call(alice, "bzzz_announce", {"agent_id": "alice", "role": "dev", "project": "shop"})
        await _call(bob, "bzzz_announce", {"agent_id": "bob", "role": "dev", "project": "shop"})
        held = await _call(alice, "bzzz_reserve", {"paths": ["src/**"], "ttl": 600})
        conflict = await _call(bob, "bzzz_reserve", {"paths": ["src/api/*.py"]})
        outside = await _call(bob, "bzzz_reserve", {"paths": ["../secrets/*"]})
        short = await _call(bob, "bzzz_reserve", {"paths": ["x"], "ttl": 5})
        mode = await _call(bob, "bzzz_reserve", {"paths": ["x"], "mode": "mine"})
        got = await _call(bob, "bzzz_get", {"address": "bzzz://alice/reservations"})

    assert held["action"] == "reserve" and held["reservation"]["paths"] == ["src/**"]
    assert conflict["code"] == "RESERVATION_CONFLICT"
    assert conflict["details"]["holder"]["agent_id"] == "alice"
    assert conflict["details"]["holder"]["expires_at"] == held["reservation"]["expires_at"]
    token = held["reservation"]["fencing_token"]
    assert token >= 1 and conflict["details"]["holder"]["fencing_token"] == token
    assert outside["code"] == "INVALID_PARAMETERS" and "'..'" in outside["error"]
    assert short["code"] == "INVALID_PARAMETERS" and "ttl" in short["error"]
    assert mode["code"] == "INVALID_PARAMETERS" and "mode" in mode["error"]
    assert [r["id"] for r in got["content"]["reservations"]] == [held["reservation"]["id"]]
    assert got["content"]["reservations"][0]["fencing_token"] == token
    await node.audit.flush()
    records = await reading.records(node.db, reading.Filter(node_id=node.node_id))
    outcomes = [r.outcome for r in records if r.action == "tool:bzzz_reserve"]
    assert outcomes == [
        "ok",
        "RESERVATION_CONFLICT",
        "INVALID_PARAMETERS",
        "INVALID_PARAMETERS",
        "INVALID_PARAMETERS",
    ]
