"""A spawned `bzzz serve` registers its hosted agent with WHOOSH on the address it serves, WHOOSH
calls the registered endpoints back over HTTP, and SIGTERM deregisters the agent."""

from __future__ import annotations

import asyncio
import json
import signal
from pathlib import Path

import httpx
import pytest
from e2e.support import HttpNode, node_env

from bzzz.llm.testing import ScriptedModelServer

from .conftest import TOKEN, FakeWhoosh

pytestmark = pytest.mark.integration

WITHIN = 20.0


async def test_a_served_node_registers_its_agent_on_its_own_url_and_deregisters_on_sigterm(
    data_dir: Path,
    clean_env: dict[str, str],
    tmp_path: Path,
    whoosh: FakeWhoosh,
    model_server: ScriptedModelServer,
) -> None:
    await whoosh.start()
    env = node_env(
        clean_env,
        data_dir,
        BZZZ_OPENAI_API_KEY="test-key",
        BZZZ_OPENAI_BASE_URL=model_server.base_url,
        BZZZ_AGENTS__DEFAULT_ROLES=json.dumps([{"role": "architect", "agent_id": "arch-1"}]),
        BZZZ_WHOOSH_URL=whoosh.url,
        BZZZ_WHOOSH_TOKEN=TOKEN,
        BZZZ_WHOOSH__HEALTH_INTERVAL="0.2",
    )
    node = HttpNode(data_dir, env, tmp_path / "logs")
    await node.start()
    try:
        async with asyncio.timeout(WITHIN):
            [registered] = await whoosh.wait_for("POST", 1)
            # The second report follows the first one's answer: the first is counted by then.
            await whoosh.wait_for("PUT", 2, "/agents/arch-1/health")
        endpoints = registered.body["endpoints"]
        assert endpoints["status_check"] == f"{node.base_url}/agents/arch-1/status"
        async with httpx.AsyncClient(timeout=WITHIN) as http:
            status = await http.get(endpoints["status_check"])
        assert status.status_code == 200, status.text
        assert status.json()["agent_id"] == "arch-1"
        health = await node.health()
        [standing] = health["whoosh"]["agents"]
        assert standing["state"] == "registered" and standing["health_reports"] >= 1

        node.send(signal.SIGTERM)
        assert await node.wait_exit() == 0
    finally:
        await node.kill()
    assert [s.path for s in whoosh.of("DELETE")] == ["/agents/arch-1"]
    assert TOKEN not in node.stderr_path.read_text()
