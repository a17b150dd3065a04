"""A2A agents elsewhere on the network: `bzzz a2a add` on a spawned node, a local a2a-sdk agent."""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path

import pytest
from e2e.support import (
    START_TIMEOUT,
    HttpNode,
    bzzz_cli,
    bzzz_executable,
    call,
    eventually,
    http_session,
    node_env,
)
from ports import free_port

from .remote import remote_agent

pytestmark = pytest.mark.integration


async def _refused(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    done = await asyncio.to_thread(
        subprocess.run,
        [bzzz_executable(), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=START_TIMEOUT * 3,
        check=False,
    )
    assert done.returncode == 1, (done.stdout, done.stderr)
    return done


async def test_an_a2a_agent_added_with_the_cli_answers_a_bzzz_agents_posts_and_tasks(
    data_dir: Path, tmp_path: Path, clean_env: dict[str, str]
) -> None:
    env = node_env(clean_env, data_dir)
    node = HttpNode(data_dir, env, tmp_path / "logs")
    await node.start()
    try:
        # Refused with a clear error and exit code 1, and nothing recorded: a card whose
        # signature does not verify, and a URL where nothing answers.
        async with remote_agent(signed=True, tampered=True) as tampered:
            bad = await _refused(env, "a2a", "add", tampered.url)
        assert "bad signature" in bad.stderr
        gone = await _refused(env, "a2a", "add", f"http://127.0.0.1:{free_port()}")
        assert "unreachable" in gone.stderr
        assert json.loads(await bzzz_cli(env, "a2a", "list", "--json")) == {"agents": []}

        async with remote_agent(signed=True) as remote:
            added = await bzzz_cli(env, "a2a", "add", remote.url, "--project", "shop", "--json")
            assert '"agent_id": "echo-agent"' in added and '"signed": true' in added
            listed = await bzzz_cli(env, "a2a", "list", "--json")
            assert remote.url in listed

            async with http_session(node.mcp_url) as mcp:
                await call(mcp, "bzzz_announce", {
                    "agent_id": "architect-1", "role": "architect", "project": "shop",
                })  # fmt: skip
                found = await call(mcp, "bzzz_lookup", {"semantic_address": "bzzz://echo-agent"})
                assert [a["id"] for a in found["matches"]] == ["echo-agent"]

                # A question: its answer comes back as a post to the sender.
                await call(mcp, "bzzz_post", {
                    "target_address": "bzzz://echo-agent", "message_type": "question",
                    "content": {"text": "ping?"},
                })  # fmt: skip
                inbox = await eventually(
                    lambda: call(mcp, "bzzz_get", {"address": "bzzz://architect-1/inbox"}),
                    lambda body: any(
                        m["sender"] == "echo-agent" for m in body["content"]["messages"]
                    ),
                    within=20,
                )
                answer = next(
                    m for m in inbox["content"]["messages"] if m["sender"] == "echo-agent"
                )
                assert answer["content"]["text"] == "echo: ping?"

                # A task: its result is the A2A agent's answer, reported to the assigner.
                sent = await call(mcp, "bzzz_post", {
                    "target_address": "bzzz://echo-agent", "message_type": "task_assignment",
                    "content": {"task_type": "code_review", "description": "Review refunds"},
                })  # fmt: skip
                task_id = sent["tasks"]["echo-agent"]
                tasks = await eventually(
                    lambda: call(mcp, "bzzz_get", {"address": "bzzz://echo-agent/tasks"}),
                    lambda body: any(
                        t["id"] == task_id and t["status"] == "completed"
                        for t in body["content"]["tasks"]
                    ),
                    within=20,
                )
                done = next(t for t in tasks["content"]["tasks"] if t["id"] == task_id)
                assert done["result"] == "echo: Review refunds"
            assert remote.echo.asked[0] == "ping?"
            removed = await bzzz_cli(env, "a2a", "remove", "echo-agent")
            assert "off the network" in removed
            async with http_session(node.mcp_url) as mcp:
                gone = await eventually(
                    lambda: call(mcp, "bzzz_get", {"address": "bzzz://echo-agent"}),
                    lambda body: body["content"]["agent_info"]["status"] == "offline",
                )
                assert gone["content"]["agent_info"]["available"] is False
            assert json.loads(await bzzz_cli(env, "a2a", "list", "--json")) == {"agents": []}
    finally:
        await node.kill()
