"""`bzzz thread replay` on a real nats-server: a node's thread, a tampered copy published onto
the stream with nats-py alone, and what the command (a real process) and ``as_of`` show."""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path
from typing import Any

import nats
import pytest
from e2e.support import bzzz_executable, kill_orphans

from bzzz.cli import replay as cli_replay
from bzzz.config import load_settings
from bzzz.errors import InvalidParameters, ThreadNotFound
from bzzz.eventlog import LOCAL_CALLER, Caller
from bzzz.network.jetstream import stream_name
from bzzz.node.core import Node
from bzzz.schemas import AnnounceInput, GetInput, PostInput, ThreadInput

pytestmark = pytest.mark.integration


def _replay(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [bzzz_executable(), "thread", "replay", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


async def _forge(nats_url: str, thread_id: str) -> int:
    """Publish a copy of the thread's first envelope with its topic changed; its sequence."""
    nc = await nats.connect(nats_url)
    try:
        js = nc.jetstream()
        subject = f"bzzz.main.p._.thread.{thread_id}"
        first = await js.get_last_msg(stream_name("main"), subject)
        forged: dict[str, Any] = json.loads(first.data or b"{}")
        forged["ts"] = "2020-01-01T00:00:00+00:00"
        ack = await js.publish(
            subject, json.dumps(forged).encode(), headers={"Nats-Msg-Id": "forged-copy"}
        )
        return int(ack.seq)
    finally:
        await nc.close()


async def test_the_replay_command_shows_a_tampered_envelope_as_not_verified(
    tmp_path: Path, nats_url: str, clean_env: dict[str, str]
) -> None:
    data_dir = tmp_path / "node"
    settings = load_settings(
        environ={},
        overrides={"node": {"data_dir": str(data_dir)}, "bzzz": {"nats_url": [nats_url]}},
    )
    env = dict(clean_env, BZZZ_DATA_DIR=str(data_dir), BZZZ_NATS_URL=nats_url)
    try:
        async with Node(settings) as node:
            for agent in ("arch", "dev"):
                await node.agents.announce(
                    Caller(f"s-{agent}"), AnnounceInput(agent_id=agent, role=agent)
                )
            created = await node.conversations.thread(
                Caller("s-arch"), ThreadInput(action="create", topic="Q", participants=["dev"])
            )
            thread_id = created["thread_id"]
            await node.conversations.post(
                Caller("s-dev"),
                PostInput(message_type="text", content={"text": "hi"}, thread_id=thread_id),
            )
            forged_seq = await _forge(nats_url, thread_id)
            await node.projector.wait_for_sequence(forged_seq, within=10)
            shown = await asyncio.to_thread(_replay, env, thread_id, "--json")
            table = await asyncio.to_thread(_replay, env, thread_id)
            then = await node.agents.get(
                LOCAL_CALLER,
                GetInput(address=f"bzzz://*/threads/{thread_id}", as_of=forged_seq),
            )
            dropped = node.projector.rejected["bad_signature"]
            # What the command answers an unknown thread and a bad id (in-process: the same).
            with pytest.raises(ThreadNotFound, match="no thread 'thread-nope'"):
                await cli_replay._entries("thread-nope", settings)
            with pytest.raises(InvalidParameters, match="is not a thread id"):
                await cli_replay._entries("thread.>", settings)
    finally:
        kill_orphans(data_dir)

    assert shown.returncode == 0, shown.stderr
    listed = json.loads(shown.stdout)
    assert listed["thread_id"] == thread_id
    rows = [(e["type"], e["verified"], e["problem"]) for e in listed["envelopes"]]
    assert rows == [
        ("thread.created", True, None),
        ("message.posted", True, None),
        ("thread.created", False, "bad_signature"),
    ]
    assert listed["envelopes"][2]["seq"] == forged_seq
    assert listed["envelopes"][0]["origin"] == node.node_id
    assert table.returncode == 0, table.stderr
    assert "NO" in table.stdout and "bad_signature" in table.stdout
    assert then["content"]["thread"]["topic"] == "Q"
    assert [m["content"] for m in then["content"]["thread"]["messages"]] == ["hi"]
    assert dropped == 1  # the node never applied it either
