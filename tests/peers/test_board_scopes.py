"""The peer board follows the projects: a node hears the heartbeats of the nodes whose agents it
holds (its projects' nodes and the every-project nodes), not the whole network's.

In-memory board: a ``*`` node, two ``p1`` nodes and a ``p2`` node. The ``*`` node hears all
four; a ``p1`` node hears its project's, the ``*`` node's, never the ``p2`` node's; the whole
board (what ``bzzz peers`` reads) lists each node once. A node that served ``*`` and comes back
serving ``p1`` takes its old entry off the board, so no one is left watching a silent key.
On a real nats-server the same, through one watch a pattern; a project id with a dot beats as
any other (the board's keys escape it).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import pytest
from admitted import admit

from bzzz.config import Settings, load_settings
from bzzz.domain import utcnow
from bzzz.network.envelope import seal
from bzzz.network.identity import NodeIdentity
from bzzz.network.memory import InMemoryBus
from bzzz.node.core import Node
from bzzz.peers.service import PeerSettings, board_keys, board_patterns, board_view
from bzzz.projects import ProjectSet

WAIT = 10.0


def _settings(tmp_path: Path, name: str, projects: list[str], **bzzz: object) -> Settings:
    return load_settings(
        environ={},
        overrides={
            "node": {"data_dir": str(tmp_path / name)},
            "bzzz": {"heartbeat_interval": 0.1, "heartbeat_misses": 50, "projects": projects}
            | bzzz,
            "conversation": {"escalation_rules": []},
        },
    )


def test_the_keys_and_patterns_of_a_node() -> None:
    every, named = ProjectSet.of(["*"]), ProjectSet.of(["shop", "a.b"])
    assert board_keys("node-x", every) == ["node-x"]
    assert board_patterns(every) == [">"]
    assert board_keys("node-x", named) == ["p.a=2Eb.node-x", "p.shop.node-x"]
    assert board_patterns(named) == ["*", "p.a=2Eb.*", "p.shop.*"]


async def _heard_everything_before(listener: Node, speaker: Node) -> None:
    """Wait until ``listener`` has handled every board change made before now: it heard a
    heartbeat of ``speaker`` (a node it watches) put after them (the in-memory board hands each
    watcher its changes in order)."""
    beat = speaker.peers._self.beat  # the number of the last beat it put
    await listener.peers.wait_for(
        lambda peers: speaker.node_id in peers and peers[speaker.node_id].beat > beat, WAIT
    )


async def test_a_node_hears_its_projects_nodes_and_the_every_project_ones(
    tmp_path: Path,
) -> None:
    bus = InMemoryBus()
    async with (
        Node(_settings(tmp_path, "star", ["*"]), bus=bus) as star,
        Node(_settings(tmp_path, "one", ["p1"]), bus=bus) as one,
        Node(_settings(tmp_path, "also", ["p1"]), bus=bus) as also,
        Node(_settings(tmp_path, "two", ["p2"]), bus=bus) as two,
    ):
        await admit(star, one, also, two)
        ids = {node.node_id for node in (star, one, also, two)}
        await star.peers.wait_for(lambda peers: ids <= set(peers), WAIT)
        await _heard_everything_before(one, one)
        await _heard_everything_before(two, two)

        assert {p.id for p in one.peers.peers()} == {star.node_id, one.node_id, also.node_id}
        assert {p.id for p in also.peers.peers()} == {star.node_id, one.node_id, also.node_id}
        assert {p.id for p in two.peers.peers()} == {star.node_id, two.node_id}
        assert {p.id for p in star.peers.peers()} == ids
        shown = one.status()["peers"]
        assert shown["keys"] == [f"p.p1.{one.node_id}"] and shown["watching"] == ["*", "p.p1.*"]
        assert shown["peers"] == 3
        await _heard_everything_before(one, also)
        assert one.status()["peers"]["heard"] > shown["heard"]
        assert star.status()["peers"]["watching"] == [">"]

        entries = await bus.peer_entries()
        assert set(entries) == {
            star.node_id,
            f"p.p1.{one.node_id}",
            f"p.p1.{also.node_id}",
            f"p.p2.{two.node_id}",
        }
        settings = PeerSettings(interval=0.1, misses=50)
        whole = board_view(entries, "main", settings, utcnow())
        assert sorted(peer.id for peer in whole) == sorted(ids)


async def test_a_node_that_serves_other_projects_now_leaves_no_old_key(tmp_path: Path) -> None:
    bus = InMemoryBus()
    async with Node(_settings(tmp_path, "star", ["*"]), bus=bus) as star:
        async with Node(_settings(tmp_path, "moving", ["*"]), bus=bus) as moving:
            await admit(star, moving)
            await star.peers.wait_for(lambda peers: moving.node_id in peers, WAIT)
            moved = moving.node_id
        assert moved in await bus.peer_entries()
        async with Node(_settings(tmp_path, "moving", ["p1", "p2"]), bus=bus) as moving:
            assert moving.node_id == moved
            await _heard_everything_before(moving, moving)
            entries = await bus.peer_entries()
            assert moved not in entries
            assert {f"p.p1.{moved}", f"p.p2.{moved}"} <= set(entries)
            await _heard_everything_before(star, moving)
            assert star.peers.peer(moved).status == "online"  # type: ignore[union-attr]


@pytest.mark.integration
async def test_on_nats_a_node_watches_only_the_keys_of_its_projects(
    tmp_path: Path, nats_url: str
) -> None:
    def on_nats(name: str, projects: list[str]) -> Settings:
        return _settings(tmp_path, name, projects, nats_url=[nats_url], heartbeat_interval=0.2)

    async with (
        Node(on_nats("star", ["*"])) as star,
        Node(on_nats("one", ["p1", "team.web"])) as one,
        Node(on_nats("two", ["p2"])) as two,
    ):
        await admit(star, one, two)
        ids = {star.node_id, one.node_id, two.node_id}
        await star.peers.wait_for(lambda peers: ids <= set(peers), WAIT)
        await one.peers.wait_for(lambda peers: {star.node_id, one.node_id} <= set(peers), WAIT)
        await two.peers.wait_for(lambda peers: {star.node_id, two.node_id} <= set(peers), WAIT)
        # The star node heard the p2 node several times over: had the p1 node's watches taken
        # p2's keys, it would have heard them too by now.
        await star.peers.wait_for(lambda peers: peers[two.node_id].beat >= 3, WAIT)
        await one.peers.wait_for(lambda peers: peers[one.node_id].beat >= 4, WAIT)
        assert two.node_id not in {p.id for p in one.peers.peers()}
        assert one.node_id not in {p.id for p in two.peers.peers()}
        entries = await one.bus.peer_entries()
        assert {star.node_id, f"p.p1.{one.node_id}", f"p.p2.{two.node_id}"} <= set(entries)
        # A project id with a dot beats too (NATS KV keys refuse "%": the dot is "=2E").
        assert f"p.team=2Eweb.{one.node_id}" in entries
        # Heard under two keys on two watches, in no order between them: no beat is a replay.
        assert star.peers.rejected["replayed"] == 0 == one.peers.rejected["replayed"]


def _beat(identity: NodeIdentity, boot: str, beat: int, at: datetime) -> bytes:
    payload = {"address": "x", "capabilities": [], "status": "online", "boot": boot, "beat": beat}
    subject = f"bzzz.main.node.{identity.node_id}"
    return seal(identity, "main", "node.heartbeat", subject, payload, now=at).to_bytes()


async def test_a_node_heard_under_several_keys_is_one_peer_and_replays_are_judged_per_key(
    tmp_path: Path,
) -> None:
    bus = InMemoryBus()
    async with Node(_settings(tmp_path, "star", ["*"], admission=False), bus=bus) as star:
        peers = star.peers
        other = NodeIdentity.generate()
        one, two = f"p.p1.{other.node_id}", f"p.p2.{other.node_id}"
        now = utcnow()
        # Beat 5 heard under one key before beat 4 under the other: no replay, beat 5 kept.
        await peers._on_entry(one, _beat(other, "b1", 5, now))
        await peers._on_entry(two, _beat(other, "b1", 4, now))
        assert peers.peer(other.node_id).beat == 5  # type: ignore[union-attr]
        assert peers.rejected["replayed"] == 0
        # An older beat under a key that had a newer one is a replay.
        await peers._on_entry(one, _beat(other, "b1", 3, now))
        assert peers.rejected["replayed"] == 1
        # A key taken off while the node beats under another: still a peer.
        await peers._on_entry(one, None)
        assert peers.peer(other.node_id) is not None
        # An earlier boot's beat (a key it no longer beats under) does not replace the newer.
        await peers._on_entry(one, _beat(other, "b0", 99, now - timedelta(minutes=5)))
        assert peers.peer(other.node_id).boot == "b1"  # type: ignore[union-attr]
        await peers._on_entry(one, None)
        await peers._on_entry(two, None)
        assert peers.peer(other.node_id) is None
