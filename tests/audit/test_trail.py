"""Every MCP tool call and resource read is on the node's chain, allowed or refused."""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace

import pytest
from mcp import Client
from mcp.server.mcpserver.exceptions import ResourceError
from sqlalchemy import select

from bzzz.audit.records import digest
from bzzz.audit.verify import verify, verify_chain
from bzzz.mcp.server import build_server
from bzzz.mcp.sessions import PRINCIPAL_STATE
from bzzz.node.core import Node
from bzzz.principal import Scope, principal
from bzzz.store.models import AuditRecordRow

from .support import call, chain_of


async def test_parallel_calls_form_one_contiguous_valid_chain(store_node: Node) -> None:
    node = store_node
    server, _ = build_server(node)
    async with Client(server, mode="legacy") as client:
        await call(client, "bzzz_announce", {"agent_id": "writer-1", "role": "architect"})
        posts = [
            call(
                client,
                "bzzz_post",
                {
                    "target_address": "bzzz://writer-1",
                    "message_type": "text",
                    "content": {"n": n},
                    "agent_id": "writer-1",
                },
            )
            for n in range(40)
        ]
        lookups = [call(client, "bzzz_lookup", {"semantic_address": "bzzz://*"}) for _ in range(20)]
        answers = await asyncio.gather(*posts, *lookups)

    assert all(a["success"] for a in answers)
    records = await chain_of(node)
    assert [r.seq for r in records] == list(range(1, 62))
    assert verify_chain(records) is None
    actions = [r.action for r in records]
    assert actions.count("tool:bzzz_post") == 40
    assert actions.count("tool:bzzz_lookup") == 20
    posted = [r for r in records if r.action == "tool:bzzz_post"]
    assert {r.agent for r in posted} == {"writer-1"}
    assert {r.target for r in posted} == {"bzzz://writer-1"}
    assert {r.principal for r in records} == {"local"}
    assert all(r.node_id == node.node_id and r.outcome == "ok" for r in records)


async def test_refused_calls_are_recorded_with_their_error_code(node: Node) -> None:
    server, _ = build_server(node)
    async with Client(server, mode="legacy") as client:
        missing = await call(client, "bzzz_get", {"address": "bzzz://nobody-here"})
        misspelt = await call(client, "bzzz_lookup", {"semantic_addres": "bzzz://*"})
        with pytest.raises(Exception):  # noqa: B017 - the client raises the SDK's error
            await client.read_resource("bzzz://no-such-agent")

    assert missing["code"] == "AGENT_NOT_FOUND"
    assert misspelt["code"] == "INVALID_PARAMETERS"
    records = await chain_of(node)
    outcomes = [(r.action, r.outcome) for r in records]
    assert outcomes == [
        ("tool:bzzz_get", "AGENT_NOT_FOUND"),
        ("tool:bzzz_lookup", "INVALID_PARAMETERS"),
        ("resource:read", "AGENT_NOT_FOUND"),
    ]
    assert records[0].target == "bzzz://nobody-here"


async def test_no_secret_or_content_reaches_a_record(node: Node) -> None:
    canary = "CANARY-7f3a9c-content"
    handle_canary = "CANARY-51be02-handle"
    hook_canary = "CANARY-c0ffee-hook"
    server, _ = build_server(node)
    async with Client(server, mode="legacy") as client:
        await call(client, "bzzz_announce", {"agent_id": "speaker-1", "role": "architect"})
        post = {
            "target_address": "bzzz://speaker-1",
            "message_type": "text",
            "content": {"text": canary},
            "agent_id": "speaker-1",
            "agent_handle": f"speaker-1:{handle_canary}",
        }
        await call(client, "bzzz_post", post)
        await call(
            client,
            "bzzz_subscribe",
            {
                "event_types": ["message_received"],
                "callback_webhook": f"https://x.test/h?k={hook_canary}",
            },
        )

    records = await chain_of(node)
    async with node.db.session() as session:
        rows = (await session.scalars(select(AuditRecordRow))).all()
    stored = json.dumps(
        [{c.name: getattr(r, c.name) for c in AuditRecordRow.__table__.columns} for r in rows]
    )
    for planted in (canary, handle_canary, hook_canary):
        assert planted not in stored
    assert len(rows) == 3
    # The digest covers the parameters without the content and the handle.
    bare = {k: v for k, v in post.items() if k not in ("content", "agent_handle")}
    assert records[1].digest == digest(bare)
    assert records[1].digest != digest({**bare, "content": {"text": "other"}, "x": 1})
    assert [r.outcome for r in records] == ["ok", "ok", "INVALID_PARAMETERS"]
    # The handle and the webhook's query are stored nowhere: not a byte of them on disk.
    raw = b"".join(p.read_bytes() for p in node.node_dir.glob("bzzz.db*"))
    assert handle_canary.encode() not in raw
    assert hook_canary.encode() not in raw


async def test_the_audit_resource_serves_admins_and_refuses_others(node: Node) -> None:
    server, _ = build_server(node)
    async with Client(server, mode="legacy") as client:
        await call(client, "bzzz_lookup", {"semantic_address": "bzzz://*"})
        shown = await client.read_resource("bzzz://audit")
    view = json.loads(shown.contents[0].text)  # type: ignore[union-attr]
    assert view["intact"] is True
    assert view["node_id"] == node.node_id
    assert view["records"][0]["action"] == "tool:bzzz_lookup"

    reader = principal("tok-reader", "token", ["*"], ["*"], Scope.WRITE)
    request = SimpleNamespace(scope={"state": {PRINCIPAL_STATE: reader}}, headers={})
    context = SimpleNamespace(request_context=SimpleNamespace(request=request), session=None)
    with pytest.raises(ResourceError, match="PERMISSION_DENIED"):
        await server.read_resource("bzzz://audit", context)  # type: ignore[arg-type]

    records = await chain_of(node)
    assert [(r.action, r.principal, r.outcome) for r in records[-2:]] == [
        ("resource:read", "local", "ok"),
        ("resource:read", "tok-reader", "PERMISSION_DENIED"),
    ]
    assert verify(records, [], node.node_id).ok
