"""With BZZZ_NATS_URL the node uses that server: no embedded one, the log lives there."""

from __future__ import annotations

from pathlib import Path

import nats
import pytest

from bzzz.config import load_settings
from bzzz.eventlog import Caller
from bzzz.network.jetstream import stream_name
from bzzz.node import Node
from bzzz.schemas import AnnounceInput, LookupInput

pytestmark = pytest.mark.integration


async def test_a_node_with_a_nats_url_keeps_its_log_on_that_server(
    tmp_path: Path, nats_url: str
) -> None:
    settings = load_settings(
        environ={"BZZZ_NATS_URL": nats_url, "BZZZ_NETWORK_ID": "team-a"},
        overrides={"node": {"data_dir": str(tmp_path / "node")}},
    )
    async with Node(settings) as node:
        await node.agents.announce(Caller("s1"), AnnounceInput(agent_id="arch-1", role="architect"))
        found = await node.agents.lookup(LookupInput(semantic_address="bzzz://*:architect@*"))
        assert node.status()["embedded_nats"] is None

    assert [m["id"] for m in found["matches"]] == ["arch-1"]
    assert not (tmp_path / "node" / "nats").exists()
    nc = await nats.connect(nats_url)
    try:
        info = await nc.jetstream().stream_info(stream_name("team-a"))
        assert info.config.subjects == ["bzzz.team-a.>"]
        assert info.state.messages >= 2  # the node's status and the announcement, at least
    finally:
        await nc.close()
