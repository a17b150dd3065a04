"""A snapshot object is untrusted, its size first: checked from its metadata, read counted.

An attacker with the NATS login puts objects straight into the snapshots bucket with
nats-py: a 320 MiB one is refused from its metadata before a chunk of it is read (the reader's
peak memory grows by less than 64 MiB, VmHWM reset before), and the node starting on it
replays the log instead; an object whose metadata lies about its size stops at the first
chunk past it, and one whose chunks do not hash to its digest is refused.
"""

from __future__ import annotations

import base64
import io
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import nats
import pytest
from agent2agent.big import MIB, peak_growth
from nats.aio.client import Client as NatsClient
from nats.js.api import ObjectMeta, ObjectMetaOptions
from nats.js.object_store import ObjectStore

from bzzz.config import Settings, load_settings
from bzzz.network.snapshots import JetStreamSnapshots, SnapshotRefused, snapshot_bucket
from bzzz.node.core import Node

pytestmark = pytest.mark.integration

HUGE = 320 * MIB
FLAT = 64 * MIB
NAME = "snapshot.p1"  # the object of a node serving p1


class _Made(io.RawIOBase):
    """``size`` bytes made as they are read (never held whole)."""

    def __init__(self, size: int) -> None:
        self.left = size

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        count = min(len(buffer), self.left)
        buffer[:count] = b"x" * count
        self.left -= count
        return count


@pytest.fixture
async def raw(nats_url: str) -> AsyncIterator[tuple[NatsClient, ObjectStore]]:
    """The attacker: nats-py on the node's server, and the snapshots bucket."""
    nc = await nats.connect(nats_url)
    try:
        store = await nc.jetstream(timeout=60).create_object_store(snapshot_bucket("main"))
        yield nc, store
    finally:
        await nc.close()


async def _put(store: ObjectStore, size: int) -> None:
    meta = ObjectMeta(name=NAME, options=ObjectMetaOptions(max_chunk_size=128 * 1024))
    await store.put(NAME, io.BufferedReader(_Made(size), 128 * 1024), meta=meta)


def _settings(tmp_path: Path, nats_url: str) -> Settings:
    return load_settings(
        environ={},
        overrides={
            "node": {"data_dir": str(tmp_path / "new")},
            "bzzz": {"nats_url": [nats_url], "heartbeat_interval": 30, "projects": ["p1"]},
            "conversation": {"escalation_rules": []},
            "snapshots": {"every": 0},
        },
    )


async def test_a_huge_object_is_refused_from_its_metadata_with_memory_flat(
    tmp_path: Path, nats_url: str, raw: tuple[NatsClient, ObjectStore]
) -> None:
    nc, store = raw
    await _put(store, HUGE)
    snapshots = JetStreamSnapshots(nc, "main")
    with peak_growth() as peak, pytest.raises(SnapshotRefused) as refused:
        await snapshots.get(NAME, 256 * MIB)
    assert refused.value.reason == "too_large"
    assert peak.growth < FLAT, f"the refusal grew the peak by {peak.growth / MIB:.0f} MiB"

    # A new node on it: refused from the metadata, it replays the log.
    with peak_growth() as peak:
        async with Node(_settings(tmp_path, nats_url)) as node:
            assert node.snapshots.refused == {"too_large": 1}
            assert node.snapshots.started()["start"] == "replay"
    assert peak.growth < FLAT, f"the node's start grew the peak by {peak.growth / MIB:.0f} MiB"


async def _forge_meta(nc: NatsClient, **changes: object) -> None:
    """Rewrite the object's metadata (as anyone with the NATS login can)."""
    js = nc.jetstream()
    subject = f"$O.{snapshot_bucket('main')}.M.{base64.urlsafe_b64encode(NAME.encode()).decode()}"
    last = await js.get_last_msg(f"OBJ_{snapshot_bucket('main')}", subject)
    meta = json.loads(last.data or b"{}") | changes
    await js.publish(subject, json.dumps(meta).encode(), headers={"Nats-Rollup": "sub"})


async def test_an_object_whose_metadata_lies_about_its_size_stops_at_the_first_chunk_past_it(
    raw: tuple[NatsClient, ObjectStore],
) -> None:
    nc, store = raw
    await _put(store, 8 * MIB)
    await _forge_meta(nc, size=1000)
    with pytest.raises(SnapshotRefused) as refused:
        await JetStreamSnapshots(nc, "main").get(NAME, 256 * MIB)
    assert refused.value.reason == "malformed"

    await _forge_meta(nc, size=8 * MIB, digest="SHA-256=" + "A" * 43 + "=")
    with pytest.raises(SnapshotRefused) as refused:
        await JetStreamSnapshots(nc, "main").get(NAME, 256 * MIB)
    assert refused.value.reason == "bad_hash"

    await _forge_meta(nc, size=16 * MIB)  # more than its chunks hold
    with pytest.raises(SnapshotRefused) as refused:
        await JetStreamSnapshots(nc, "main").get(NAME, 256 * MIB)
    assert refused.value.reason == "malformed"


async def test_an_honest_object_reads_back_whole(raw: tuple[NatsClient, ObjectStore]) -> None:
    nc, store = raw
    await _put(store, 3 * MIB + 5)
    data = await JetStreamSnapshots(nc, "main").get(NAME, 256 * MIB)
    assert data == b"x" * (3 * MIB + 5)
    assert await JetStreamSnapshots(nc, "main").get("snapshot.none", 256 * MIB) is None
