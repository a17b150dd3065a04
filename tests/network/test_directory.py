"""The network's agent directory on a real nats-server: entries, their expiry, lookups from it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import nats
import pytest

from bzzz.config import Settings, load_settings
from bzzz.eventlog import LOCAL_CALLER, Caller
from bzzz.network.directory import JetStreamDirectory, decode, directory_bucket, encode
from bzzz.network.identity import NodeIdentity
from bzzz.node.core import Node
from bzzz.principal import ALL, Scope, principal
from bzzz.schemas import AnnounceInput, FilterCriteria, LookupInput

pytestmark = pytest.mark.integration

NETWORK = "dirnet"
BOUND = 15.0


def _settings(
    tmp_path: Path, nats_url: str, name: str, lease: float = 120.0, **env: str
) -> Settings:
    return load_settings(
        environ={"BZZZ_NATS_URL": nats_url, "BZZZ_NETWORK_ID": NETWORK} | env,
        overrides={"node": {"data_dir": str(tmp_path / name)}, "agents": {"lease_seconds": lease}},
    )


class Watch:
    """A KV watch of the whole directory: what a watcher on another process sees."""

    def __init__(self, watcher: Any) -> None:
        self._watcher = watcher
        self.live: dict[str, bytes] = {}

    async def until(self, key: str, *, present: bool) -> Any:
        """The entry that makes ``key`` present (a value) or absent (a marker)."""
        async with asyncio.timeout(BOUND):
            while (key in self.live) != present:
                entry = await anext(self._watcher)
                if entry is None:
                    continue
                if entry.operation in ("DEL", "PURGE") or not entry.value:
                    self.live.pop(entry.key, None)
                else:
                    self.live[entry.key] = entry.value
                if entry.key == key and (entry.key in self.live) == present:
                    return entry
        return None

    async def until_revision(self, key: str, *, above: int) -> Any:
        """The entry that writes ``key`` again (a revision past ``above``)."""
        async with asyncio.timeout(BOUND):
            while True:
                entry = await anext(self._watcher)
                if entry is not None and entry.key == key and entry.revision > above:
                    return entry

    async def until_count(self, prefix: str, count: int) -> None:
        """Until ``count`` entries under ``prefix`` are live."""
        async with asyncio.timeout(BOUND):
            while sum(1 for k in self.live if k.startswith(prefix)) < count:
                entry = await anext(self._watcher)
                if entry is None:
                    continue
                if entry.operation in ("DEL", "PURGE") or not entry.value:
                    self.live.pop(entry.key, None)
                else:
                    self.live[entry.key] = entry.value


@pytest.fixture
async def watch(nats_url: str) -> AsyncIterator[Watch]:
    nc = await nats.connect(nats_url)
    js = nc.jetstream()
    # The bucket as a node creates it (the first node would do the same).
    directory = JetStreamDirectory(nc, NETWORK)
    await directory.start()
    watcher = await (await js.key_value(directory_bucket(NETWORK))).watch(">")
    try:
        yield Watch(watcher)
    finally:
        await watcher.stop()
        await nc.close()


async def test_an_announced_agent_is_listed_and_stays_listed_offline_without_ttl(
    tmp_path: Path, nats_url: str, watch: Watch
) -> None:
    async with Node(_settings(tmp_path, nats_url, "a")) as node:
        await node.agents.announce(
            Caller("s1"), AnnounceInput(agent_id="dev.1", role="developer", project="p2")
        )
        entry = await watch.until("p2.dev%2E1", present=True)
        listed = decode(entry.value)
        assert (listed.id, listed.role, listed.project, listed.node_id) == (
            "dev.1",
            "developer",
            "p2",
            node.node_id,
        )
        assert await node.listing.directory.project_of("dev.1") == "p2"

        await node.agents.session_ended(Caller("s1"))
        offline = await watch.until_revision("p2.dev%2E1", above=entry.revision)
        assert decode(offline.value).status == "offline"
        assert await node.listing.directory.project_of("dev.1") == "p2"
        listed = await node.listing.directory.listed_projects(["dev.1", "nobody"])
        assert listed == {"dev.1": {"p2"}}
    # Kept, as the stores keep the row: no TTL on the entry as the server stores it.
    nc = await nats.connect(nats_url)
    try:
        bucket = directory_bucket(NETWORK)
        stored = await nc.jetstream().get_last_msg(f"KV_{bucket}", f"$KV.{bucket}.p2.dev%2E1")
    finally:
        await nc.close()
    assert decode(stored.data).status == "offline"
    assert "Nats-TTL" not in (stored.headers or {})


async def test_an_entry_expires_when_its_node_stops_renewing_it(
    tmp_path: Path, nats_url: str, watch: Watch
) -> None:
    node = Node(_settings(tmp_path, nats_url, "a", lease=2.0))
    await node.start()
    try:
        # A session's agent: no lease takes it offline, only its node's silence ends its entry.
        await node.agents.announce(Caller("mcp-1"), AnnounceInput(agent_id="ops-1", role="ops"))
        first = await watch.until("_.ops-1", present=True)
        # Renewed within its lease: the entry is written again (a TTL counts from a write).
        await watch.until_revision("_.ops-1", above=first.revision)
    finally:
        await node.crash()  # no goodbye: nobody removes the entry, nobody renews it
    marker = await watch.until("_.ops-1", present=False)
    assert marker.operation == "PURGE"  # the server's delete marker (its TTL ran out)


ROLES = ("developer", "architect", "reviewer")
CAPS = (["python"], ["python", "rust"], ["go"], [])


async def _announce_team(node: Node, project: str, count: int) -> None:
    for n in range(count):
        await node.agents.announce(
            Caller(f"s-{project}-{n % 3}"),
            AnnounceInput(
                agent_id=f"{project}-agent-{n:02d}",
                role=ROLES[n % len(ROLES)],
                capabilities=CAPS[n % len(CAPS)],
                specialization="backend python services" if n % 5 == 0 else None,
                max_tasks=1 + n % 4,
                # Some have no project: they match every project's lookups.
                project=None if n % 7 == 0 and project == "p2" else project,
            ),
        )


def _shown(found: dict[str, Any]) -> list[dict[str, Any]]:
    return [{k: v for k, v in m.items() if k != "last_activity"} for m in found["matches"]]


LOOKUPS = [
    LookupInput(semantic_address="bzzz://*:*@p2"),
    LookupInput(semantic_address="bzzz://*:developer@p2", limit=4),
    LookupInput(
        semantic_address="bzzz://*:*@p2",
        filter_criteria=FilterCriteria(expertise=["python"], availability=True),
    ),
    LookupInput(semantic_address="bzzz://p2-agent-03@p2"),
    LookupInput(semantic_address="bzzz://*:reviewer", limit=50),
]


async def test_lookups_of_an_unserved_project_from_the_directory_equal_the_store(
    tmp_path: Path, nats_url: str, watch: Watch
) -> None:
    async with (
        Node(_settings(tmp_path, nats_url, "star")) as star,
        Node(_settings(tmp_path, nats_url, "p1", BZZZ_PROJECTS="p1")) as p1,
    ):
        await _announce_team(star, "p2", 30)
        await _announce_team(star, "p1", 6)
        await watch.until_count("", 36)
        assert p1.agents.remote is not None and star.agents.remote is None

        for params in LOOKUPS:
            from_store = await star.agents.lookup(LOCAL_CALLER, params)
            from_directory = await p1.agents.lookup(LOCAL_CALLER, params)
            assert from_store["count"] > 0, params
            assert _shown(from_directory) == _shown(from_store), params
            assert from_directory["total_matches"] == from_store["total_matches"], params
        cached = p1.listing.directory
        assert isinstance(cached, JetStreamDirectory)
        assert "p2.*" in cached.cached()  # the p1 node read p2 from the directory

        # A principal of p1 only sees none of p2's agents, on either node.
        of_p1 = Caller("t", principal("tok", "token", ["p1"], [ALL], Scope.READ))
        for node in (star, p1):
            seen = await node.agents.lookup(of_p1, LookupInput(semantic_address="bzzz://*:*@p2"))
            assert seen["matches"] == []
            mine = await node.agents.lookup(of_p1, LookupInput(semantic_address="bzzz://*:*"))
            assert {m["project"] for m in mine["matches"]} == {"p1"}


async def test_the_directory_holds_a_bounded_number_of_project_views(
    nats_url: str, watch: Watch
) -> None:
    nc = await nats.connect(nats_url)
    directory = JetStreamDirectory(nc, NETWORK, max_views=2)
    try:
        await directory.start()
        for project in ("a", "b", "c"):
            await directory.agents(project)
        assert list(directory.cached()) == ["b.*", "c.*"]
    finally:
        await directory.close()
        await nc.close()


class _EarlyWatch:
    """A watch that says "all in" before the entries it already holds, as nats-py's does when
    the server delivered them before its consumer info answered (seen under load)."""

    def __init__(self, entries: list[Any]) -> None:
        self._items: list[Any] = [None, *entries]

    def __aiter__(self) -> _EarlyWatch:
        return self

    async def __anext__(self) -> Any:
        if not self._items:
            await asyncio.Event().wait()  # no more changes: the watch stays open
        await asyncio.sleep(0)  # each entry comes in its own turn of the loop, as over the wire
        return self._items.pop(0)

    async def stop(self) -> None:
        return None


class _Entry:
    def __init__(self, key: str, value: bytes, delta: int) -> None:
        self.key, self.value, self.delta, self.operation = key, value, delta, None


async def test_a_view_is_ready_only_once_the_entries_delivered_before_all_in_are_read(
    monkeypatch: pytest.MonkeyPatch, nats_url: str, tmp_path: Path
) -> None:
    async with Node(_settings(tmp_path, nats_url, "a")) as node:
        await node.agents.announce(
            Caller("s1"), AnnounceInput(agent_id="dev-1", role="developer", project="p2")
        )
        await node.listing.writer.flush()
        held = node.listing.directory
        assert isinstance(held, JetStreamDirectory)
        [(key, value)] = await held.last_values(["p2.*"])
    assert key == "p2.dev-1"
    listed = decode(value)
    signer = NodeIdentity.generate()  # taken: this directory takes any valid signature
    entries = [
        _Entry(f"p2.dev-{n}", encode(replace(listed, id=f"dev-{n}"), signer, held.bucket), 2 - n)
        for n in range(3)
    ]

    class _Kv:
        async def watch(self, _token: str) -> _EarlyWatch:
            return _EarlyWatch(entries)

    async def delivered(_watcher: Any) -> int:
        return 3  # the server had delivered all three when it said "all in"

    monkeypatch.setattr("bzzz.network.directory._delivered", delivered)
    nc = await nats.connect(nats_url)
    try:
        directory = JetStreamDirectory(nc, NETWORK)
        directory._kv = _Kv()  # type: ignore[assignment]
        _, agents = await directory.agents("p2")
        await directory.close()
    finally:
        await nc.close()

    assert sorted(agent.id for agent in agents.values()) == ["dev-0", "dev-1", "dev-2"]


class _GatedWatch:
    """A watch of an empty project that says "all in" once its gate opens."""

    def __init__(self, gate: asyncio.Event) -> None:
        self._gate = gate
        self._said = False

    def __aiter__(self) -> _GatedWatch:
        return self

    async def __anext__(self) -> Any:
        if self._said:
            await asyncio.Event().wait()  # no more changes: the watch stays open
        await self._gate.wait()
        self._said = True
        return None

    async def stop(self) -> None:
        return None


class _Signers:
    """Every signer taken; ``changes`` moved by the test (an admission, a removal)."""

    changes = 0

    def admits(self, public_key: str, node_id: str) -> bool:
        return True


async def test_a_lookup_waiting_on_a_view_read_again_meanwhile_is_answered_from_the_new_one(
    monkeypatch: pytest.MonkeyPatch, nats_url: str
) -> None:
    gate = asyncio.Event()

    class _Kv:
        async def watch(self, _token: str) -> _GatedWatch:
            return _GatedWatch(gate)

    async def delivered(_watcher: Any) -> int:
        return 0  # nothing in the project

    monkeypatch.setattr("bzzz.network.directory._delivered", delivered)
    signers = _Signers()
    nc = await nats.connect(nats_url)
    directory = JetStreamDirectory(nc, NETWORK, timeout=5.0, signers=signers)
    directory._kv = _Kv()  # type: ignore[assignment]
    try:
        first = asyncio.create_task(directory.agents("p2"))
        await asyncio.sleep(0)  # its view made, its watch not ready yet
        signers.changes += 1  # the admitted set changed: the next lookup reads p2 again
        second = asyncio.create_task(directory.agents("p2"))
        await asyncio.sleep(0)
        gate.set()
        async with asyncio.timeout(BOUND):
            answers = await asyncio.gather(first, second)
    finally:
        await directory.close()
        await nc.close()
    assert [dict(agents) for _, agents in answers] == [{}, {}]
    assert answers[0][0] == answers[1][0]  # the same (new) view answered both
