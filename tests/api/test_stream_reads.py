"""Event streams share their reads: several streams resumed at once each get every one of their
events, in order, past the shared query's cut, on SQLite and on PostgreSQL."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest

from bzzz.api.app import build_app
from bzzz.api.stream import BATCH
from bzzz.mcp.server import build_server
from bzzz.node.core import Node

from .test_rest import HANDLE, events_of

POSTS = BATCH + 20  # more than one shared read holds for each stream


@pytest.fixture
async def store_http(store_node: Node) -> AsyncIterator[httpx.AsyncClient]:
    """The app of a node on SQLite, then on PostgreSQL."""
    server, _ = build_server(store_node)
    app = build_app(store_node, server, "127.0.0.1")
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:7331") as client:
        yield client


async def test_streams_resumed_together_each_get_all_their_events_in_order(
    store_http: httpx.AsyncClient,
) -> None:
    http = store_http
    made = await http.post("/api/v1/agents", json={"agent_id": "boss", "role": "lead"})
    boss = made.json()["agent_handle"]
    for worker in ("w1", "w2"):
        answer = await http.post(
            "/api/v1/agents", json={"agent_id": worker, "role": "dev", "max_tasks": 1000}
        )
        assert answer.status_code == 201, answer.text
    # Three streams: two see every task, one only w2's (its address filter).
    queries = [
        {"types": "task_assignment", "max_events": "1"},
        {"types": "task_assignment", "max_events": "1"},
        {"types": "task_assignment", "address": "bzzz://w2", "max_events": "1"},
    ]
    opened = [events_of((await http.get("/api/v1/events", params=q)).text)[0] for q in queries]
    for n in range(POSTS):
        sent = await http.post(f"/agents/w{1 + n % 2}/tasks", headers={HANDLE: boss},
                               json={"type": "documentation", "description": f"t{n}"})  # fmt: skip
        assert sent.status_code == 201, sent.text

    wanted = [POSTS, POSTS, POSTS // 2]
    answers = await asyncio.gather(
        *(
            http.get(
                "/api/v1/events",
                params={"max_events": str(count)},
                headers={"Last-Event-ID": first["id"]},
            )
            for first, count in zip(opened, wanted, strict=True)
        )
    )
    got = [events_of(answer.text) for answer in answers]
    descriptions = [[e["data"]["data"]["content"]["description"] for e in events] for events in got]
    assert descriptions[0] == descriptions[1] == [f"t{n}" for n in range(POSTS)]
    assert descriptions[2] == [f"t{n}" for n in range(1, POSTS, 2)]
    for first, events in zip(opened, got, strict=True):
        sub_id = first["data"]["subscription_id"]
        numbers = [int(e["id"].rpartition(":")[2]) for e in events]
        assert all(e["id"].startswith(f"{sub_id}:") for e in events)
        assert numbers == sorted(numbers) and len(set(numbers)) == len(numbers)
