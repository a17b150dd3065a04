"""A real node pages a rota of two webhook receivers, is restarted between steps, and loses none.

The thread's escalation reaches the first receiver; the node is killed and started again on the
same data directory; after ``ack_timeout`` the second receiver is paged (once: the first is not
paged again); an acknowledgement from the console's route stops the paging (the project's admins
are never paged); `bzzz escalations --json` shows who was paged and who answered.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from receiver import ReceiverFactory
from receiver import http_receiver as http_receiver  # the fixture

from .support import HttpNode, bzzz_cli, eventually, node_env

pytestmark = pytest.mark.integration

HANDLE = "X-Bzzz-Agent-Handle"
ACK_TIMEOUT = 4.0

CONFIG = """
[escalation]
monitor_interval = 0.5
ack_timeout = {ack_timeout}

[[escalation.rota.shop.steps]]
name = "alice"
webhook_url = "{alice}"
secret = "alice-secret"

[[escalation.rota.shop.steps]]
name = "bob"
webhook_url = "{bob}"
secret = "bob-secret"

[[conversation.escalation_rules]]
name = "stuck"
conditions = [{{type = "thread_duration", threshold = 1}}]
actions = [{{type = "notify_human", target = "on-call"}}]
"""


async def _escalations(node: HttpNode) -> list[dict[str, Any]]:
    async with httpx.AsyncClient(base_url=node.base_url, timeout=10) as http:
        found: list[dict[str, Any]] = (await http.get("/api/v1/escalations")).json()["escalations"]
        return found


async def _open_thread(node: HttpNode, topic: str) -> None:
    async with httpx.AsyncClient(base_url=node.base_url, timeout=10) as http:
        handles = {}
        for agent, role in ((f"arch-{topic}", "architect"), (f"dev-{topic}", "developer")):
            answer = await http.post(
                "/api/v1/agents", json={"agent_id": agent, "role": role, "project": "shop"}
            )
            assert answer.status_code == 201, answer.text
            handles[agent] = answer.json()["agent_handle"]
        opened = await http.post(
            f"/api/v1/agents/dev-{topic}/collaborate",
            json={"topic": topic},
            headers={HANDLE: handles[f"arch-{topic}"]},
        )
        assert opened.status_code in (200, 201), opened.text


async def test_a_rota_is_paged_step_by_step_across_a_restart_until_the_console_acknowledges(
    data_dir: Path,
    tmp_path: Path,
    clean_env: dict[str, str],
    http_receiver: ReceiverFactory,
) -> None:
    async with http_receiver(lambda _n: 200) as alice, http_receiver(lambda _n: 200) as bob:
        config = tmp_path / "bzzz.toml"
        config.write_text(CONFIG.format(ack_timeout=ACK_TIMEOUT, alice=alice.url, bob=bob.url))
        env = node_env(clean_env, data_dir, BZZZ_CONFIG=str(config))
        node = HttpNode(data_dir, env, tmp_path / "logs")
        await node.start()
        try:
            await _open_thread(node, "checkout")
            [first] = await alice.wait_for(1, within=30)
            escalation_id = first.json()["escalation"]["id"]
            assert bob.requests == []

            await node.kill()  # no goodbye: the schedule must come back from the log
            await node.start()
            [second] = await bob.wait_for(1, within=30)
            assert second.json()["page"]["step"] == 1

            async with httpx.AsyncClient(base_url=node.base_url, timeout=10) as http:
                acked = await http.post(
                    f"/api/v1/escalations/{escalation_id}/ack", json={"via": "console"}
                )
            assert acked.status_code == 200, acked.text
            # Long enough for the admins' step to be due had the ack not stopped the paging.
            await asyncio.sleep(ACK_TIMEOUT + 2)
            [shown] = await eventually(
                lambda: _escalations(node), lambda e: bool(e and e[0]["paging"]["ack"])
            )
            assert len(alice.requests) == 1 and len(bob.requests) == 1

            # A second thread's escalation, answered from the CLI (a tool node joins).
            await _open_thread(node, "payments")
            [_, third] = await alice.wait_for(2, within=30)
            other = third.json()["escalation"]["id"]
            acked_cli = await bzzz_cli(env, "escalations", "ack", other, "--as", "carol")
            resolved_cli = await bzzz_cli(
                env, "escalations", "resolve", other, "--reason", "card processor restarted"
            )
            listed = json.loads(await bzzz_cli(env, "escalations", "list", "--json"))
        finally:
            await node.kill()

    pages = [(p["step"], p["name"]) for p in shown["paging"]["pages"]]
    assert pages == [(0, "alice"), (1, "bob")]
    # Killed during alice's page or after it: never sent again, shown for what it is.
    assert shown["paging"]["pages"][0]["status"] in ("delivered", "unconfirmed")
    assert shown["paging"]["pages"][1]["status"] == "delivered"
    assert shown["paging"]["ack"]["via"] == "console"
    assert f"acknowledged {other} as carol" in acked_cli
    assert f"resolved {other}" in resolved_cli
    by_id = {e["id"]: e for e in listed["escalations"]}
    assert [p["name"] for p in by_id[escalation_id]["paging"]["pages"]] == ["alice", "bob"]
    assert by_id[other]["paging"]["ack"]["by"] == "carol"
    assert by_id[other]["paging"]["ack"]["via"] == "cli"
    assert by_id[other]["resolved"] is True
    assert by_id[other]["resolution"] == "card processor restarted"
