"""The HTTP API on an in-process node: WHOOSH endpoints, /api/v1 routes, errors, the stream."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from bzzz.node.core import Node

HANDLE = "X-Bzzz-Agent-Handle"


async def announce(http: httpx.AsyncClient, agent_id: str, role: str = "dev") -> str:
    """Announce an agent over REST; its handle."""
    answer = await http.post("/api/v1/agents", json={"agent_id": agent_id, "role": role})
    assert answer.status_code == 201, answer.text
    return str(answer.json()["agent_handle"])


def refused(answer: httpx.Response, status: int, code: str) -> dict[str, Any]:
    """An ErrorResponse with ``status`` and ``code``."""
    assert answer.status_code == status, answer.text
    body: dict[str, Any] = answer.json()
    assert body["success"] is False and body["code"] == code, body
    assert body["error"] and body["timestamp"], body
    return body


async def test_a_task_assigned_on_the_whoosh_endpoint_reaches_the_agent(
    http: httpx.AsyncClient,
) -> None:
    boss = await announce(http, "boss", "architect")
    worker = await announce(http, "worker", "reviewer")
    task = {"type": "code_review", "description": "review the parser",
            "data": {"code": "x = 1", "language": "python"}, "priority": "high"}  # fmt: skip

    sent = await http.post("/agents/worker/tasks", json=task, headers={HANDLE: boss})

    assert sent.status_code == 201, sent.text
    assert sent.json()["delivery_results"]["recipients"] == ["worker"]
    tasks = await http.get("/api/v1/tasks", headers={HANDLE: worker})
    assert tasks.status_code == 200, tasks.text
    [got] = tasks.json()["tasks"]
    assert (got["type"], got["description"], got["priority"]) == (
        "code_review", "review the parser", "high"
    )  # fmt: skip
    status = (await http.get("/agents/worker/status")).json()
    assert (status["status"], status["agent"]["role"]) == ("busy", "reviewer")
    assert [t["id"] for t in status["current_tasks"]] == [got["id"]]


async def test_bad_task_requests_are_error_responses_and_assign_nothing(
    http: httpx.AsyncClient,
) -> None:
    boss = await announce(http, "boss", "architect")
    worker = await announce(http, "worker", "reviewer")
    good = {"type": "documentation", "description": "write the guide"}

    refused(await http.post("/agents/worker/tasks", json=good | {"type": "dance"},
                            headers={HANDLE: boss}), 400, "INVALID_PARAMETERS")  # fmt: skip
    refused(await http.post("/agents/worker/tasks", json=good | {"colour": "red"},
                            headers={HANDLE: boss}), 400, "INVALID_PARAMETERS")  # fmt: skip
    refused(await http.post("/agents/worker/tasks", content=b"{not json",
                            headers={HANDLE: boss}), 400, "INVALID_PARAMETERS")  # fmt: skip
    refused(await http.post("/agents/nobody/tasks", json=good, headers={HANDLE: boss}),
            404, "AGENT_NOT_FOUND")  # fmt: skip
    # Naming an agent the caller does not act as sends nothing.
    refused(await http.post("/agents/worker/tasks", json=good | {"agent_id": "boss"}), 400,
            "INVALID_PARAMETERS")  # fmt: skip
    refused(await http.get("/agents/nobody/status"), 404, "AGENT_NOT_FOUND")
    refused(await http.get("/agents/no@body/status"), 400, "INVALID_PARAMETERS")

    tasks = await http.get("/api/v1/tasks", headers={HANDLE: worker})
    assert tasks.json()["tasks"] == []


async def test_announcing_an_id_another_caller_holds_is_a_conflict(
    http: httpx.AsyncClient,
) -> None:
    await announce(http, "taken")

    again = await http.post("/api/v1/agents", json={"agent_id": "taken", "role": "spy"})

    assert "Agent ID already exists" in refused(again, 409, "INVALID_PARAMETERS")["error"]
    agent = (await http.get("/api/v1/agents/taken")).json()
    assert agent["content"]["agent_info"]["role"] == "dev"


async def test_collaborate_opens_a_thread_then_invites_a_third_agent_into_it(
    http: httpx.AsyncClient,
) -> None:
    lead = await announce(http, "lead", "architect")
    await announce(http, "peer", "reviewer")
    await announce(http, "third", "tester")

    opened = await http.post("/agents/peer/collaborate", json={"topic": "API shape"},
                             headers={HANDLE: lead})  # fmt: skip
    assert opened.status_code == 201, opened.text
    thread = opened.json()["thread"]
    assert opened.json()["mode"] == "thread_created"
    assert sorted(thread["participants"]) == ["lead", "peer"]

    invited = await http.post("/agents/third/collaborate", json={"thread_id": thread["id"]},
                              headers={HANDLE: lead})  # fmt: skip
    assert invited.status_code == 201, invited.text
    assert invited.json()["post"]["delivery_results"]["recipients"] == ["third"]
    shown = await http.get(f"/api/v1/threads/{thread['id']}", headers={HANDLE: lead})
    body = shown.json()["content"]["thread"]
    assert body["topic"] == "API shape"
    assert {"messages", "escalation_history", "consensus"} <= set(body)
    listed = await http.get("/api/v1/threads", headers={HANDLE: lead})
    assert [t["id"] for t in listed.json()["threads"]] == [thread["id"]]
    refused(await http.get("/api/v1/threads/thread-nope", headers={HANDLE: lead}), 404,
            "THREAD_NOT_FOUND")  # fmt: skip


async def test_agents_are_listed_with_the_lookup_filters(http: httpx.AsyncClient) -> None:
    await announce(http, "a1", "reviewer")
    await announce(http, "a2", "architect")

    found = await http.get("/api/v1/agents", params={"address": "bzzz://*:reviewer@*"})

    assert [m["id"] for m in found.json()["matches"]] == ["a1"]
    refused(await http.get("/api/v1/agents", params={"limit": "0"}), 400, "INVALID_PARAMETERS")
    refused(await http.get("/api/v1/agents", params={"colour": "x"}), 400, "INVALID_PARAMETERS")


async def test_node_routes_answer_and_unknown_escalations_or_deliveries_are_refused(
    http: httpx.AsyncClient,
) -> None:
    lead = await announce(http, "lead")
    for path in ("/api/v1/costs", "/api/v1/peers", "/api/v1/metrics", "/api/v1/webhooks",
                 "/api/v1/escalations"):  # fmt: skip
        answer = await http.get(path)
        assert answer.status_code == 200 and answer.json()["success"] is True, (path, answer.text)
    assert (await http.get("/api/v1/metrics")).json()["up"] is True

    refused(await http.post("/api/v1/escalations/esc-nope/resolve", json={"reason": "done"},
                            headers={HANDLE: lead}), 404, "THREAD_NOT_FOUND")  # fmt: skip
    refused(await http.post("/api/v1/webhooks/redrive", json={"delivery_ids": [987]}), 400,
            "INVALID_PARAMETERS")  # fmt: skip


def events_of(text: str) -> list[dict[str, Any]]:
    """The server-sent events of a stream's text."""
    found = []
    for block in text.split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line
                      and not line.startswith(":"))  # fmt: skip
        if "id" in fields:
            found.append(fields | {"data": json.loads(fields["data"])})
    return found


async def test_the_event_stream_resumes_after_its_last_event_id(
    http: httpx.AsyncClient,
) -> None:
    boss = await announce(http, "boss")
    await announce(http, "worker")
    query = {"types": "task_assignment", "address": "bzzz://worker", "max_events": "1"}

    opened = await http.get("/api/v1/events", params=query)
    assert opened.headers["content-type"].startswith("text/event-stream")
    [first] = events_of(opened.text)
    assert first["event"] == "stream_open" and first["id"].endswith(":0")
    for text in ("one", "two"):
        sent = await http.post("/agents/worker/tasks", headers={HANDLE: boss},
                               json={"type": "documentation", "description": text})  # fmt: skip
        assert sent.status_code == 201, sent.text
    await http.post("/agents/boss/tasks", headers={HANDLE: boss},
                    json={"type": "documentation", "description": "not for worker"})  # fmt: skip

    resumed = await http.get("/api/v1/events", params=query | {"max_events": "2"},
                             headers={"Last-Event-ID": first["id"]})  # fmt: skip
    got = events_of(resumed.text)
    assert [e["event"] for e in got] == ["task_assignment", "task_assignment"]
    assert [e["data"]["data"]["content"]["description"] for e in got] == ["one", "two"]
    again = await http.get("/api/v1/events", params=query, headers={"Last-Event-ID": got[0]["id"]})
    assert [e["id"] for e in events_of(again.text)] == [got[1]["id"]]
    refused(await http.get("/api/v1/events", headers={"Last-Event-ID": "nonsense"}), 400,
            "INVALID_PARAMETERS")  # fmt: skip


async def test_a_stream_past_the_subscription_quota_is_429_with_retry_after(
    node: Node, http: httpx.AsyncClient
) -> None:
    # As if started with limits.subscriptions_per_principal = 1 (the fixture node is running).
    node.subscriptions._per_principal = 1
    session = {"X-Bzzz-Session": "dashboard"}
    query = {"types": "task_assignment", "max_events": "1"}
    assert (await http.get("/api/v1/events", params=query, headers=session)).status_code == 200

    over = await http.get("/api/v1/events", params=query, headers=session)

    refused(over, 429, "RATE_LIMITED")
    assert int(over.headers["Retry-After"]) > 0


async def test_an_unexpected_failure_is_an_error_response_without_internals(
    node: Node, http: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken() -> list[object]:
        raise RuntimeError("secret internal detail")

    monkeypatch.setattr(node.peers, "peers", broken)

    answer = await http.get("/api/v1/peers")

    body = refused(answer, 503, "NETWORK_ERROR")
    assert "secret" not in answer.text and "node logged" in body["error"]


async def test_an_unknown_route_or_method_is_an_error_response(http: httpx.AsyncClient) -> None:
    missing = refused(await http.get("/api/v1/nothing-here"), 404, "INVALID_PARAMETERS")
    assert "/api/v1/nothing-here" in missing["error"]
    wrong = await http.delete("/healthz")
    refused(wrong, 405, "INVALID_PARAMETERS")
    assert "GET" in wrong.headers["allow"]
