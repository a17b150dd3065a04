"""Escalations over the HTTP API: a stalled thread's escalation is listed, then resolved."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from bzzz.api.app import build_app
from bzzz.clock import ManualClock
from bzzz.config import EscalationRuleConfig, Settings
from bzzz.conversations.monitor import ThreadMonitor
from bzzz.mcp.server import build_server
from bzzz.network.memory import InMemoryBus
from bzzz.node.core import Node

from .test_rest import HANDLE, announce, refused

STUCK = {
    "name": "stuck",
    "conditions": [{"type": "no_progress", "threshold": True, "timeframe": 600}],
    "actions": [{"type": "notify_human", "target": "project_manager"}],
}


async def _idle(self: ThreadMonitor) -> None:
    # The test sweeps the threads itself; this leaves when the node stops, as the loop does.
    while not self._stopping:
        self._wakeup.clear()
        await self._wakeup.wait()


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


async def test_a_stalled_threads_escalation_is_listed_and_resolved(
    clocked: tuple[Node, ManualClock, httpx.AsyncClient],
) -> None:
    node, clock, http = clocked
    arch = await announce(http, "arch", "architect")
    await announce(http, "dev", "developer")
    opened = await http.post("/agents/dev/collaborate", json={"topic": "API"},
                             headers={HANDLE: arch})  # fmt: skip
    thread_id = opened.json()["thread"]["id"]
    clock.advance(601)
    await node.escalations.check_all()

    listed = await http.get("/api/v1/escalations", params={"open": "true"})
    [escalation] = listed.json()["escalations"]
    assert escalation["threadId"] == thread_id
    refused(await http.post(f"/api/v1/escalations/{escalation['id']}/resolve", json={},
                            headers={HANDLE: arch}), 400, "INVALID_PARAMETERS")  # fmt: skip

    path = f"/api/v1/escalations/{escalation['id']}/resolve"
    resolved = await http.post(path, json={"reason": "split the API"}, headers={HANDLE: arch})

    assert resolved.status_code == 200, resolved.text
    assert resolved.json()["thread"]["status"] != "escalated"
    still_open = await http.get("/api/v1/escalations", params={"open": "true"})
    assert still_open.json()["escalations"] == []
