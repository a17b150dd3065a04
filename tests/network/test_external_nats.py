"""With BZZZ_NATS_URL the node uses that server: no embedded one, the log lives there."""

from __future__ import annotations

import asyncio
from pathlib import Path

import nats
import pytest

from bzzz.config import Settings, load_settings
from bzzz.errors import ConfigError, NetworkError
from bzzz.eventlog import LOCAL_CALLER, Caller
from bzzz.network.jetstream import JetStreamBus, stream_name
from bzzz.node.core import Node
from bzzz.schemas import AnnounceInput, LookupInput

from .nats_operator import operator_server

pytestmark = pytest.mark.integration


def _team_a(tmp_path: Path, nats_url: str) -> Settings:
    """A node of network team-a whose log lives on the server at ``nats_url``."""
    return load_settings(
        environ={"BZZZ_NATS_URL": nats_url, "BZZZ_NETWORK_ID": "team-a"},
        overrides={"node": {"data_dir": str(tmp_path / "node")}},
    )


async def test_a_node_with_a_nats_url_keeps_its_log_on_that_server(
    tmp_path: Path, nats_url: str
) -> None:
    settings = _team_a(tmp_path, nats_url)
    async with Node(settings) as node:
        await node.agents.announce(Caller("s1"), AnnounceInput(agent_id="arch-1", role="architect"))
        found = await node.agents.lookup(
            LOCAL_CALLER, LookupInput(semantic_address="bzzz://*:architect@*")
        )
        assert node.embedded is None

    assert [m["id"] for m in found["matches"]] == ["arch-1"]
    assert not (tmp_path / "node" / "nats").exists()
    nc = await nats.connect(nats_url)
    try:
        info = await nc.jetstream().stream_info(stream_name("team-a"))
        assert info.config.subjects == ["bzzz.team-a.>"]
        assert info.state.messages >= 2  # the node's status and the announcement, at least
    finally:
        await nc.close()


async def test_the_node_acknowledges_what_it_applied_once_the_log_is_quiet(
    tmp_path: Path, nats_url: str
) -> None:
    settings = _team_a(tmp_path, nats_url)
    nc = await nats.connect(nats_url)
    try:
        async with Node(settings) as node:
            for n in range(5):
                await node.agents.announce(
                    Caller(f"s{n}"), AnnounceInput(agent_id=f"dev-{n}", role="developer")
                )
            js = nc.jetstream()
            last = (await js.stream_info(stream_name("team-a"))).state.last_seq
            # Acks go out a while after the last batch, not one per batch: poll the server.
            async with asyncio.timeout(5):
                while True:
                    info = await js.consumer_info(stream_name("team-a"), node.projector.durable)
                    if info.ack_floor.stream_seq == last:
                        break
                    await asyncio.sleep(0.05)
            assert info.num_ack_pending == 0
    finally:
        await nc.close()


async def test_the_log_keeps_the_first_of_two_envelopes_with_one_id_and_says_so(
    nats_url: str,
) -> None:
    bus = JetStreamBus([nats_url], "team-b")
    await bus.start()
    try:
        first = await bus.store("bzzz.team-b.node.n1", b"from node a", "shared-id")
        second = await bus.store("bzzz.team-b.node.n1", b"from node b", "shared-id")
        other = await bus.store("bzzz.team-b.node.n1", b"another fact", "other-id")
    finally:
        await bus.close()

    assert (first.seq, first.duplicate) == (1, False)
    assert (second.seq, second.duplicate) == (1, True)  # where the log holds node a's bytes
    assert (other.seq, other.duplicate) == (2, False)


def test_settings_show_a_nats_login_masked_and_take_a_creds_file(tmp_path: Path) -> None:
    creds = tmp_path / "node.creds"
    creds.write_text("-----BEGIN NATS USER JWT-----\n")
    settings = load_settings(
        environ={
            "BZZZ_NATS_URL": "nats://bzzz:s3cret@10.0.0.1:4222,nats://tok3n@10.0.0.2:4222",
            "BZZZ_NATS_CREDS": str(creds),
        }
    )
    shown = settings.masked()["bzzz"]
    assert shown["nats_url"] == ["nats://bzzz:***@10.0.0.1:4222", "nats://***@10.0.0.2:4222"]
    assert settings.bzzz.nats_creds == creds
    with pytest.raises(ConfigError, match="BZZZ_NATS_CREDS"):
        load_settings(environ={"BZZZ_NATS_CREDS": str(tmp_path / "missing.creds")})


async def test_a_node_logs_in_with_a_creds_file_and_without_it_is_refused(tmp_path: Path) -> None:
    async with operator_server(tmp_path / "operator") as server:
        with_creds = load_settings(
            environ={"BZZZ_NATS_URL": server.url, "BZZZ_NATS_CREDS": str(server.creds)},
            overrides={"node": {"data_dir": str(tmp_path / "a")}},
        )
        async with Node(with_creds) as node:
            await node.agents.announce(Caller("s1"), AnnounceInput(agent_id="dev-1", role="dev"))
            assert node.projector.directory.get("dev-1") is not None

        without = load_settings(
            environ={"BZZZ_NATS_URL": server.url},
            overrides={"node": {"data_dir": str(tmp_path / "b")}},
        )
        with pytest.raises(NetworkError, match="refused this node's credentials"):
            async with asyncio.timeout(20), Node(without):
                pass
