"""Hosted agents registered with WHOOSH: the design's body, health, backoff, DELETE, refusals."""

from __future__ import annotations

import asyncio
import logging
from urllib.parse import urlsplit

import httpx
import pytest

from bzzz.api.app import build_app
from bzzz.config import Settings, load_settings
from bzzz.errors import ConfigError
from bzzz.llm.pricing import shipped_prices
from bzzz.mcp.server import build_server
from bzzz.network.memory import InMemoryBus
from bzzz.node.core import Node

from .conftest import PUBLIC_URL, TOKEN, FakeWhoosh

WITHIN = 5.0


def _per_token(model: str) -> float:
    price = shipped_prices()[model]
    return (price.input + price.output) / 2 / 1_000_000


def _expected(agent_id: str, role: str, capabilities: list[str], model: str, where: str) -> dict:
    base = f"{PUBLIC_URL}/agents/{agent_id}"
    return {
        "agent_id": agent_id,
        "type": "gpt_agent",
        "role": role,
        "capabilities": capabilities,
        "metadata": {
            "model": model,
            "max_tokens": 4000,
            "cost_per_token": _per_token(model),
            "bzzz_address": f"bzzz://{agent_id}:{role}@{where}",
        },
        "endpoints": {
            "status_check": f"{base}/status",
            "task_assign": f"{base}/tasks",
            "collaborate": f"{base}/collaborate",
        },
        "health_check": {"interval": 0.05, "timeout": 10.0, "retries": 3},
    }


async def test_each_hosted_agent_is_registered_with_the_designs_body_and_the_bearer_token(
    whoosh_settings: Settings,
    whoosh: FakeWhoosh,
    memory_bus: InMemoryBus,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    await whoosh.start()
    async with Node(whoosh_settings, bus=memory_bus) as node:
        async with asyncio.timeout(WITHIN):
            posts = await whoosh.wait_for("POST", 2)
        bodies = {seen.body["agent_id"]: seen.body for seen in posts}
        assert bodies["arch-1"] == _expected(
            "arch-1",
            "architect",
            ["system_design", "architecture_review", "technology_selection",
             "scalability_analysis"],
            "gpt-5",
            "shop",
        )  # fmt: skip
        assert bodies["rev-1"] == _expected(
            "rev-1",
            "reviewer",
            ["code_review", "security_analysis", "performance_optimization",
             "best_practices_enforcement"],
            "gpt-4o",
            "*",
        )  # fmt: skip
        assert {seen.headers["authorization"] for seen in posts} == {f"Bearer {TOKEN}"}
        assert {seen.path for seen in posts} == {"/agents"}
        # The token is a secret: neither the settings shown nor the node's status holds it.
        assert whoosh_settings.masked()["whoosh"]["token"] == "***"
        assert TOKEN not in str(node.status())
    assert TOKEN not in caplog.text


async def test_health_is_reported_every_interval_with_the_agents_state(
    whoosh_settings: Settings, whoosh: FakeWhoosh, memory_bus: InMemoryBus
) -> None:
    await whoosh.start()
    async with Node(whoosh_settings, bus=memory_bus) as node:
        async with asyncio.timeout(WITHIN):
            puts = await whoosh.wait_for("PUT", 2, "/agents/arch-1/health")
        assert node.whoosh is not None
        first, second = puts[0].body, puts[1].body
        assert first["agent_id"] == "arch-1"
        assert (first["status"], first["available"], first["state"]) == ("idle", True, "idle")
        assert (first["current_tasks"], first["max_tasks"]) == (0, 2)
        assert second["timestamp"] >= first["timestamp"]
        assert puts[1].headers["authorization"] == f"Bearer {TOKEN}"
        # Health follows registration: WHOOSH never hears of an agent it does not know.
        assert whoosh.seen.index(whoosh.of("POST")[0]) < whoosh.seen.index(puts[0])


async def test_a_whoosh_down_at_start_is_retried_with_backoff_until_it_is_up(
    whoosh_settings: Settings, whoosh: FakeWhoosh, memory_bus: InMemoryBus
) -> None:
    async with Node(whoosh_settings, bus=memory_bus) as node:
        registrar = node.whoosh
        assert registrar is not None
        # The node is up while WHOOSH refuses connections; each agent failed at least twice.
        assert node.healthy
        async with asyncio.timeout(WITHIN):
            await registrar.wait_until(lambda agents: all(a["attempts"] >= 2 for a in agents))
        assert {a["state"] for a in registrar.status()["agents"]} == {"pending"}
        assert all("did not answer" in a["last_error"] for a in registrar.status()["agents"])
        assert whoosh.seen == []

        await whoosh.start()
        async with asyncio.timeout(WITHIN):
            await registrar.wait_until(
                lambda agents: all(a["state"] == "registered" for a in agents)
            )
        assert sorted(s.body["agent_id"] for s in whoosh.of("POST")) == ["arch-1", "rev-1"]


async def test_a_clean_stop_deregisters_every_agent(
    whoosh_settings: Settings, whoosh: FakeWhoosh, memory_bus: InMemoryBus
) -> None:
    await whoosh.start()
    async with Node(whoosh_settings, bus=memory_bus) as node:
        assert node.whoosh is not None
        async with asyncio.timeout(WITHIN):
            await node.whoosh.wait_until(
                lambda agents: all(a["state"] == "registered" for a in agents)
            )
    deletes = whoosh.of("DELETE")
    assert sorted(s.path for s in deletes) == ["/agents/arch-1", "/agents/rev-1"]
    assert {s.headers["authorization"] for s in deletes} == {f"Bearer {TOKEN}"}
    # Nothing after goodbye: no health report follows a DELETE.
    last_delete = max(whoosh.seen.index(s) for s in deletes)
    assert all(s.method == "DELETE" for s in whoosh.seen[last_delete - 1 :])
    assert {a["state"] for a in node.whoosh.status()["agents"]} == {"deregistered"}


async def test_a_crash_sends_no_delete(
    whoosh_settings: Settings, whoosh: FakeWhoosh, memory_bus: InMemoryBus
) -> None:
    await whoosh.start()
    node = Node(whoosh_settings, bus=memory_bus)
    await node.start()
    assert node.whoosh is not None
    async with asyncio.timeout(WITHIN):
        await node.whoosh.wait_until(lambda agents: all(a["state"] == "registered" for a in agents))
    await node.crash()
    assert whoosh.of("DELETE") == []


async def test_a_4xx_answer_is_logged_clearly_and_the_node_runs_on(
    whoosh_settings: Settings,
    whoosh: FakeWhoosh,
    memory_bus: InMemoryBus,
    caplog: pytest.LogCaptureFixture,
) -> None:
    whoosh.answers[("POST", "agents")] = (422, {"error": "role 'reviewer' is not known here"})
    await whoosh.start()
    async with Node(whoosh_settings, bus=memory_bus) as node:
        assert node.whoosh is not None
        async with asyncio.timeout(WITHIN):
            await node.whoosh.wait_until(
                lambda agents: all(a["state"] == "refused" for a in agents)
            )
        assert node.healthy
        refusals = [
            r for r in caplog.records if r.levelno == logging.ERROR and "WHOOSH" in r.message
        ]
        assert sorted(r.args[0] for r in refusals if isinstance(r.args, tuple)) == [
            "arch-1",
            "rev-1",
        ]
        assert all("HTTP 422" in r.message and "is not known here" in r.message for r in refusals)
        # Refused means refused: not asked again, no health reports for it.
        assert len(whoosh.of("POST")) == 2
        assert whoosh.of("PUT") == []
    assert whoosh.of("DELETE") == []  # nothing registered, nothing to deregister


async def test_a_health_report_answered_404_registers_the_agent_again(
    whoosh_settings: Settings, whoosh: FakeWhoosh, memory_bus: InMemoryBus
) -> None:
    whoosh.answers[("PUT", "health")] = (404, {"error": "unknown agent"})
    await whoosh.start()
    async with Node(whoosh_settings, bus=memory_bus):
        async with asyncio.timeout(WITHIN):
            await whoosh.wait_for("POST", 4)
        assert {s.body["agent_id"] for s in whoosh.of("POST")[2:]} <= {"arch-1", "rev-1"}


async def test_the_registered_endpoints_answer_on_the_node(
    whoosh_settings: Settings, whoosh: FakeWhoosh, memory_bus: InMemoryBus
) -> None:
    await whoosh.start()
    async with Node(whoosh_settings, bus=memory_bus) as node:
        async with asyncio.timeout(WITHIN):
            await whoosh.wait_for("POST", 2)
        endpoints = next(s.body for s in whoosh.of("POST") if s.body["agent_id"] == "arch-1")[
            "endpoints"
        ]
        server, _ = build_server(node)
        app = build_app(node, server, "127.0.0.1", PUBLIC_URL)
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url=PUBLIC_URL
        ) as http:
            status = await http.get(urlsplit(endpoints["status_check"]).path)
            assert status.status_code == 200, status.text
            assert (status.json()["agent_id"], status.json()["status"]) == ("arch-1", "idle")
            made = await http.post(
                "/api/v1/agents",
                json={"agent_id": "orchestrator", "role": "manager", "project": "shop"},
            )
            assert made.status_code == 201, made.text
            handle = made.json()["agent_handle"]
            task = {"type": "architecture_analysis", "description": "the cache",
                    "agent_handle": handle}  # fmt: skip
            assigned = await http.post(urlsplit(endpoints["task_assign"]).path, json=task)
            assert assigned.status_code == 201, assigned.text
            invited = await http.post(
                urlsplit(endpoints["collaborate"]).path,
                json={"topic": "cache design", "agent_handle": handle},
            )
            assert invited.status_code == 201, invited.text
            assert "arch-1" in str(invited.json()["thread"])
            tasks = await http.get("/api/v1/tasks", params={"agent_id": "arch-1"})
            assert [t["description"] for t in tasks.json()["tasks"]] == ["the cache"]


async def test_without_a_public_url_nothing_is_registered_and_the_log_says_why(
    whoosh_settings: Settings,
    whoosh: FakeWhoosh,
    memory_bus: InMemoryBus,
    caplog: pytest.LogCaptureFixture,
) -> None:
    whoosh_settings.auth.public_url = None  # and the node serves no HTTP (address "local")
    await whoosh.start()
    async with Node(whoosh_settings, bus=memory_bus) as node:
        assert node.whoosh is None
        assert node.status()["whoosh"] is None
    assert any("no public URL" in r.message for r in caplog.records if r.levelno == logging.ERROR)
    assert whoosh.seen == []


def test_the_whoosh_settings_refuse_a_url_that_is_not_http_and_mask_the_token() -> None:
    with pytest.raises(ConfigError, match=r"whoosh\.url \(BZZZ_WHOOSH_URL\)"):
        load_settings(environ={"BZZZ_WHOOSH_URL": "whoosh.internal:8080"})
    settings = load_settings(
        environ={"BZZZ_WHOOSH_URL": "https://whoosh.example/api/", "BZZZ_WHOOSH_TOKEN": TOKEN}
    )
    assert settings.whoosh.url == "https://whoosh.example/api"
    assert settings.masked()["whoosh"]["token"] == "***"
    assert TOKEN not in repr(settings)
