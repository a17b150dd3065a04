"""A spawned `bzzz serve` with tokens: the HTTP API applies the grants, and its event stream
resumes over a real connection with Last-Event-ID."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from access.support import cli_env, create_token
from e2e.support import HttpNode, node_env

pytestmark = pytest.mark.integration

ADMIN = "admin-secret-for-tests-only"
WITHIN = 10.0


def bearer(token: str) -> dict[str, str]:
    """The Authorization header of ``token``."""
    return {"Authorization": f"Bearer {token}"}


async def next_event(lines: AsyncIterator[str]) -> dict[str, Any]:
    """The next server-sent event of a stream (pings skipped), within WITHIN seconds."""
    fields: dict[str, str] = {}
    async with asyncio.timeout(WITHIN):
        async for line in lines:
            if not line:
                if "id" in fields:
                    return fields | {"data": json.loads(fields["data"])}
                fields = {}
            elif not line.startswith(":"):
                name, _, value = line.partition(": ")
                fields[name] = value
    raise AssertionError(f"the stream ended; last fields {fields}")


@pytest.fixture
async def served(
    data_dir: Path, tmp_path: Path, clean_env: dict[str, str]
) -> AsyncIterator[tuple[HttpNode, dict[str, str]]]:
    """A node that requires tokens, and tokens of p1 (write), p2 (write) and p1 (read)."""
    node = HttpNode(data_dir, node_env(clean_env, data_dir, BZZZ_AUTH_TOKENS=ADMIN),
                    tmp_path / "logs")  # fmt: skip
    await node.start()
    env = cli_env(clean_env, data_dir)
    tokens = {
        "one": create_token(env, "team one", "--project", "p1")["token"],
        "two": create_token(env, "team two", "--project", "p2")["token"],
        "reader": create_token(env, "watcher", "--project", "p1", "--scope", "read")["token"],
    }
    try:
        yield node, tokens
    finally:
        await node.kill()


async def test_a_token_sees_only_its_projects_and_read_scope_cannot_assign_tasks(
    served: tuple[HttpNode, dict[str, str]],
) -> None:
    node, tokens = served
    async with httpx.AsyncClient(base_url=node.base_url, timeout=WITHIN) as http:
        one, two, reader = (bearer(tokens[k]) for k in ("one", "two", "reader"))
        for agent_id, headers in (("one-dev", one), ("one-boss", one), ("two-dev", two)):
            made = await http.post("/api/v1/agents", json={"agent_id": agent_id, "role": "dev"},
                                   headers=headers)  # fmt: skip
            assert made.status_code == 201, made.text

        assert (await http.get("/api/v1/agents")).status_code == 401
        seen = await http.get("/api/v1/agents", headers=two)
        assert [m["id"] for m in seen.json()["matches"]] == ["two-dev"]
        hidden = await http.get("/agents/one-dev/status", headers=two)
        assert (hidden.status_code, hidden.json()["code"]) == (404, "AGENT_NOT_FOUND")
        task = {"type": "documentation", "description": "the guide", "agent_id": "one-boss"}
        denied = await http.post("/agents/one-dev/tasks", json=task, headers=reader)
        assert (denied.status_code, denied.json()["code"]) == (403, "PERMISSION_DENIED")
        foreign = await http.post("/agents/one-dev/tasks", json=task | {"agent_id": "two-dev"},
                                  headers=two)  # fmt: skip
        assert foreign.status_code in (400, 404), foreign.text

        assigned = await http.post("/agents/one-dev/tasks", json=task, headers=one)
        assert assigned.status_code == 201, assigned.text
        tasks = await http.get("/api/v1/tasks", params={"agent_id": "one-dev"}, headers=one)
        assert [t["description"] for t in tasks.json()["tasks"]] == ["the guide"]


async def test_the_event_stream_resumes_with_last_event_id_and_shows_no_other_project(
    served: tuple[HttpNode, dict[str, str]],
) -> None:
    node, tokens = served
    one, two = bearer(tokens["one"]), bearer(tokens["two"])
    types = {"types": "task_assignment,agent_announcement"}
    async with httpx.AsyncClient(base_url=node.base_url, timeout=WITHIN) as http:
        for agent_id in ("one-dev", "one-boss"):
            made = await http.post("/api/v1/agents", json={"agent_id": agent_id, "role": "dev"},
                                   headers=one)  # fmt: skip
            assert made.status_code == 201, made.text

        async def assign(text: str) -> None:
            body = {"type": "documentation", "description": text, "agent_id": "one-boss"}
            sent = await http.post("/agents/one-dev/tasks", json=body, headers=one)
            assert sent.status_code == 201, sent.text

        async with http.stream("GET", "/api/v1/events", params=types, headers=two) as theirs:
            their_lines = theirs.aiter_lines()
            their_open = await next_event(their_lines)
        async with http.stream("GET", "/api/v1/events", params=types, headers=one) as mine:
            assert mine.status_code == 200
            lines = mine.aiter_lines()
            opened = await next_event(lines)
            assert opened["event"] == "stream_open"
            await assign("first")
            first = await next_event(lines)
            assert first["data"]["data"]["content"]["description"] == "first"
        await assign("missed while away")

        resume = one | {"Last-Event-ID": first["id"]}
        async with http.stream("GET", "/api/v1/events", params=types, headers=resume) as back:
            missed = await next_event(back.aiter_lines())
        assert missed["event"] == "task_assignment"
        assert missed["data"]["data"]["content"]["description"] == "missed while away"
        assert int(missed["id"].rsplit(":", 1)[1]) > int(first["id"].rsplit(":", 1)[1])

        # Project two's stream got none of project one's events: its first is its own agent.
        made = await http.post("/api/v1/agents", json={"agent_id": "two-dev", "role": "dev"},
                               headers=two)  # fmt: skip
        assert made.status_code == 201, made.text
        headers = two | {"Last-Event-ID": their_open["id"]}
        async with http.stream("GET", "/api/v1/events", params=types, headers=headers) as again:
            own = await next_event(again.aiter_lines())
        assert own["event"] == "agent_announcement"
        assert own["data"]["address"].startswith("bzzz://two-dev"), own
        stolen = await http.get("/api/v1/events", params=types,
                                headers=two | {"Last-Event-ID": first["id"]})  # fmt: skip
        assert (stolen.status_code, stolen.json()["code"]) == (400, "INVALID_PARAMETERS")
