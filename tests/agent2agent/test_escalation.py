"""An A2A task inside a thread: input-required while the thread's escalation is open."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from api.test_escalations import STUCK, _idle
from api.test_rest import HANDLE, announce

from bzzz.api.app import build_app
from bzzz.clock import ManualClock
from bzzz.config import EscalationRuleConfig, Settings
from bzzz.conversations.monitor import ThreadMonitor
from bzzz.mcp.server import build_server
from bzzz.network.memory import InMemoryBus
from bzzz.node.core import Node


@pytest.fixture
async def clocked(
    settings: Settings, memory_bus: InMemoryBus, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[Node, ManualClock, httpx.AsyncClient]]:
    """A node on a manual clock with the 'stuck' rule, and its HTTP client."""
    monkeypatch.setattr(ThreadMonitor, "run", _idle)
    settings.conversation.default_timeout = 10**7
    settings.conversation.escalation_rules = [EscalationRuleConfig.model_validate(STUCK)]
    clock = ManualClock()
    async with Node(settings, bus=memory_bus, clock=clock) as node:
        server, _ = build_server(node)
        transport = httpx.ASGITransport(app=build_app(node, server, "127.0.0.1"))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:7331") as http:
            yield node, clock, http


async def _state(http: httpx.AsyncClient, handle: str, task_id: str) -> Any:
    rpc = {"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"id": task_id}}
    answer = (await http.post("/a2a/dev", json=rpc, headers={HANDLE: handle})).json()
    return answer["result"]["status"]["state"]


async def test_a_task_waits_for_input_while_its_thread_is_escalated(
    clocked: tuple[Node, ManualClock, httpx.AsyncClient],
) -> None:
    node, clock, http = clocked
    arch = await announce(http, "arch", "architect")
    await announce(http, "dev", "developer")
    opened = await http.post(
        "/agents/dev/collaborate", json={"topic": "API"}, headers={HANDLE: arch}
    )
    thread_id = opened.json()["thread"]["id"]
    assigned = await http.post(
        "/agents/dev/tasks",
        json={"type": "code_review", "description": "Review the API", "thread_id": thread_id},
        headers={HANDLE: arch},
    )
    task_id = assigned.json()["tasks"]["dev"]
    assert await _state(http, arch, task_id) == "submitted"

    clock.advance(601)
    await node.escalations.check_all()
    assert await _state(http, arch, task_id) == "input-required"

    [escalation] = (await http.get("/api/v1/escalations", params={"open": "true"})).json()[
        "escalations"
    ]
    resolved = await http.post(
        f"/api/v1/escalations/{escalation['id']}/resolve",
        json={"reason": "go on"},
        headers={HANDLE: arch},
    )
    assert resolved.status_code == 200, resolved.text
    assert await _state(http, arch, task_id) == "submitted"
