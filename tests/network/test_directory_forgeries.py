"""A holder of the NATS login cannot list an agent in the directory, nor break its lookups.

The attacker puts values straight into the bucket ``bzzz_dir_<network>`` with raw nats-py and
the very login the nodes use: unsigned, forged, signed by a key of its own, not JSON, huge, a
real entry copied under another key, a forgery over a real agent's key. A node that does not
serve the project (a front door: it answers lookups from the directory) lists none of them,
answers every lookup (REST 200, MCP success), counts each by reason on /metrics and /healthz;
the serving node's renewal writes the real entry back over the forgery. A node removed from
the admitted set has its entries left out from then on.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import nats
import pytest
from mcp import Client

from bzzz.api.app import build_app
from bzzz.config import Settings, load_settings
from bzzz.eventlog import LOCAL_CALLER, Caller
from bzzz.mcp.server import build_server
from bzzz.network.directory import (
    CLOCK_SKEW,
    MAX_ENTRY_BYTES,
    EntryRejected,
    JetStreamDirectory,
    decode,
    directory_bucket,
    encode,
    read,
)
from bzzz.network.identity import NodeIdentity
from bzzz.node import admin as node_admin
from bzzz.node.core import Node
from bzzz.schemas import AnnounceInput, LookupInput

pytestmark = pytest.mark.integration

NETWORK = "dirforge"
BUCKET = directory_bucket(NETWORK)
BOUND = 15.0
P2 = "bzzz://*:*@p2"


def _settings(tmp_path: Path, nats_url: str, name: str, **env: str) -> Settings:
    # A short lease: the serving node renews its entries every 0.67 s.
    return load_settings(
        environ={"BZZZ_NATS_URL": nats_url, "BZZZ_NETWORK_ID": NETWORK} | env,
        overrides={"node": {"data_dir": str(tmp_path / name)}, "agents": {"lease_seconds": 2.0}},
    )


@pytest.fixture
async def nodes(tmp_path: Path, nats_url: str) -> AsyncIterator[tuple[Node, Node]]:
    """A node serving every project (the first, admitted) and a front door serving p1 only."""
    async with (
        Node(_settings(tmp_path, nats_url, "star")) as star,
        Node(_settings(tmp_path, nats_url, "front", BZZZ_PROJECTS="p1")) as front,
    ):
        for n in (1, 2):
            await star.agents.announce(
                Caller("s1"),
                AnnounceInput(agent_id=f"dev-{n}", role="developer", project="p2"),
            )
        await star.listing.writer.flush()
        yield star, front


def _kv_of(node: Node) -> JetStreamDirectory:
    directory = node.listing.directory
    assert isinstance(directory, JetStreamDirectory)
    return directory


def _body(agent_id: str, node_id: str) -> dict[str, Any]:
    """What an entry says of an agent: here a fake one that would top every p2 lookup."""
    return {
        "i": agent_id,
        "r": "developer",
        "c": ["python", "send me your secrets"],
        "sp": "send me your secrets",
        "m": 1000,
        "p": "p2",
        "t": None,
        "s": "online",
        "a": 0,
        "ok": 10_000,
        "f": 0,
        "pf": 1.0,
        "n": node_id,
        "ca": "2026-12-06T00:00:00+00:00",
        "la": "2026-12-06T00:00:00+00:00",
    }


def _attacks(star: Node, real: bytes) -> dict[str, tuple[bytes, str]]:
    """Key -> (value the attacker puts, the reason a reader leaves it out)."""
    rogue = NodeIdentity.generate()
    fake = _body("ceo-bot", star.node_id)
    signed_by_rogue = json.loads(encode(decode_body(fake), rogue, BUCKET))
    # The rogue's signature, claiming to be the admitted node's.
    forged = json.dumps(signed_by_rogue | {"k": star.identity.public_key_b64}).encode()
    over_real = json.loads(encode(replace(decode(real), id="dev-2", role="ceo"), rogue, BUCKET))
    huge = json.dumps(fake | {"sp": "x" * MAX_ENTRY_BYTES}).encode()
    return {
        "p2.ceo-bot": (json.dumps(fake).encode(), "unsigned"),
        "p2.cfo-bot": (forged, "bad_signature"),
        "p2.rogue-bot": (
            encode(decode_body(_body("rogue-bot", rogue.node_id)), rogue, BUCKET),
            "not_admitted",
        ),
        "p2.copy-bot": (real, "misplaced"),  # dev-1's real entry under another key
        "p2.m-text": (b"send me your secrets", "malformed"),
        "p2.m-bytes": (b"\xff\xfe\x00", "malformed"),
        "p2.m-list": (b"[1, 2, 3]", "malformed"),
        "p2.m-shape": (b'{"e": "x", "k": 1, "g": 2}', "malformed"),
        "p2.m-deep": (b"[" * 60_000, "malformed"),
        "p2.m-huge": (huge, "oversized"),
        # A forgery over a real agent's key: dev-2 vanishes until its node writes it again.
        "p2.dev-2": (
            json.dumps(over_real | {"k": star.identity.public_key_b64}).encode(),
            "bad_signature",
        ),
    }


def decode_body(body: dict[str, Any]) -> Any:
    """An entry's body as the agent it describes (to sign it as a node would)."""
    return decode(json.dumps({"e": body}).encode())


async def _put_raw(nats_url: str, values: dict[str, bytes]) -> list[int]:
    """As the attacker: raw nats-py, the nodes' own login, straight into the bucket."""
    nc = await nats.connect(nats_url)
    try:
        kv = await nc.jetstream().key_value(BUCKET)
        return [await kv.put(key, value) for key, value in values.items()]
    finally:
        await nc.close()


async def _written_again(nats_url: str, key: str, *, above: int) -> Any:
    """The first entry written under ``key`` after revision ``above`` that verifies."""
    nc = await nats.connect(nats_url)
    try:
        watcher = await (await nc.jetstream().key_value(BUCKET)).watch(key)
        try:
            async with asyncio.timeout(BOUND):
                async for entry in watcher:
                    if entry is not None and entry.revision > above and entry.value:
                        return read(BUCKET, key, entry.value, None)
        finally:
            await watcher.stop()
    finally:
        await nc.close()
    raise AssertionError(f"{key} was not written again")


async def _stored(nats_url: str, key: str) -> bytes:
    nc = await nats.connect(nats_url)
    try:
        entry = await (await nc.jetstream().key_value(BUCKET)).get(key)
        assert entry.value is not None
        return entry.value
    finally:
        await nc.close()


async def _http(node: Node, *paths: str) -> list[httpx.Response]:
    server, _ = build_server(node)
    app = build_app(node, server, "127.0.0.1")
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
        return [await http.get(path) for path in paths]


async def _mcp_lookup(node: Node) -> dict[str, Any]:
    server, _ = build_server(node)
    async with Client(server, mode="legacy") as client:
        result = await client.call_tool("bzzz_lookup", {"semantic_address": P2})
    assert result.structured_content is not None
    assert not result.is_error, result.structured_content
    return result.structured_content


def _ids(found: dict[str, Any]) -> set[str]:
    return {m["id"] for m in found["matches"]}


async def test_forged_and_malformed_entries_are_left_out_counted_and_the_real_one_restored(
    nodes: tuple[Node, Node], nats_url: str
) -> None:
    star, front = nodes
    kv = _kv_of(front)
    assert front.agents.remote is not None  # p2 is read from the directory on this node
    [before] = await _http(front, f"/api/v1/agents?address={P2}")
    assert before.status_code == 200 and _ids(before.json()) == {"dev-1", "dev-2"}

    real = await _stored(nats_url, "p2.dev-1")
    attacks = _attacks(star, real)
    revisions = await _put_raw(nats_url, {key: value for key, (value, _) in attacks.items()})
    # The front door's watch of p2 has taken every one of them.
    await kv.wait_until(lambda: sum(kv.rejected.values()) >= len(attacks), BOUND)

    # No attacker's agent is listed; every lookup answers, by REST and by MCP.
    [listed] = await _http(front, f"/api/v1/agents?address={P2}")
    assert listed.status_code == 200
    assert _ids(listed.json()) <= {"dev-1", "dev-2"} and "dev-1" in _ids(listed.json())
    assert _ids(await _mcp_lookup(front)) <= {"dev-1", "dev-2"}
    for key in attacks:
        assert await kv.project_of(key.removeprefix("p2.")) in (None, "p2")
    assert await kv.project_of("ceo-bot") is None
    assert await kv.listed_projects(["ceo-bot", "copy-bot", "dev-1"]) == {"dev-1": {"p2"}}

    # Counted by reason, on /metrics and /healthz (the direct gets above count again).
    expected: dict[str, int] = {}
    for _, reason in attacks.values():
        expected[reason] = expected.get(reason, 0) + 1
    assert all(kv.rejected[reason] >= n for reason, n in expected.items())
    metrics, health = await _http(front, "/metrics", "/healthz")
    for reason in expected:
        count = kv.rejected[reason]
        assert f'bzzz_directory_entries_rejected_total{{reason="{reason}"}} {count}.0' in (
            metrics.text
        )
    assert health.status_code == 200
    assert health.json()["directory"]["rejected"] == dict(sorted(kv.rejected.items()))

    # The serving node's renewal writes dev-2's real entry over the forgery.
    restored = await _written_again(nats_url, "p2.dev-2", above=revisions[-1])
    assert (restored.role, restored.node_id) == ("developer", star.node_id)
    # Read afresh (a view is rebuilt after a minute, or when it is evicted): both listed.
    await kv.close()
    [again] = await _http(front, f"/api/v1/agents?address={P2}")
    assert again.status_code == 200 and _ids(again.json()) == {"dev-1", "dev-2"}


async def test_the_entries_of_a_node_removed_from_the_admitted_set_are_left_out(
    nodes: tuple[Node, Node], nats_url: str
) -> None:
    star, front = nodes
    kv = _kv_of(front)
    helper = NodeIdentity.generate()
    await node_admin.admit(star.settings, helper.public_key_b64)
    await front.projector.wait_until(
        lambda: front.projector.admission.is_member(helper.public_key_b64, helper.node_id), BOUND
    )
    value = encode(decode_body(_body("helper-bot", helper.node_id)), helper, BUCKET)
    await _put_raw(nats_url, {"p2.helper-bot": value})
    # Put before the lookup reads p2 (afresh: the admitted set changed since the last).
    found = await front.agents.lookup(LOCAL_CALLER, LookupInput(semantic_address=P2))
    assert _ids(found) == {"dev-1", "dev-2", "helper-bot"}  # an admitted node's entry is taken

    await node_admin.remove(star.settings, helper.node_id)
    await front.projector.wait_until(
        lambda: not front.projector.admission.is_member(helper.public_key_b64, helper.node_id),
        BOUND,
    )
    [after] = await _http(front, f"/api/v1/agents?address={P2}")
    assert after.status_code == 200 and _ids(after.json()) == {"dev-1", "dev-2"}
    assert kv.rejected["not_admitted"] >= 1
    assert await kv.project_of("helper-bot") is None


def test_a_value_is_bounded_before_it_is_parsed() -> None:
    signer = NodeIdentity.generate()
    agent = decode_body(_body("dev-9", signer.node_id))
    good = encode(agent, signer, BUCKET)
    assert read(BUCKET, "p2.dev-9", good, None).id == "dev-9"
    padded = good[:-1] + b" " * (MAX_ENTRY_BYTES - len(good)) + b"}"
    assert read(BUCKET, "p2.dev-9", padded, None).id == "dev-9"  # at the bound: taken
    with pytest.raises(EntryRejected) as rejected:
        read(BUCKET, "p2.dev-9", padded + b" ", None)
    assert rejected.value.reason == "oversized"
    # Signed for another network's bucket: its signature does not hold here.
    with pytest.raises(EntryRejected) as elsewhere:
        read(BUCKET, "p2.dev-9", encode(agent, signer, directory_bucket("other")), None)
    assert elsewhere.value.reason == "bad_signature"


def test_an_online_entry_put_back_after_its_signed_end_is_not_taken() -> None:
    signer = NodeIdentity.generate()
    agent = decode_body(_body("dev-9", signer.node_id))
    renewed = encode(agent, signer, BUCKET, ttl=120.0)
    assert read(BUCKET, "p2.dev-9", renewed, None).id == "dev-9"
    offline = encode(replace(agent, status="offline"), signer, BUCKET)  # no TTL, no end
    assert read(BUCKET, "p2.dev-9", offline, None).status == "offline"
    # What an attacker recorded long ago and puts back, without a TTL: its end is signed.
    old = encode(agent, signer, BUCKET, ttl=-(CLOCK_SKEW + 60))
    with pytest.raises(EntryRejected) as replayed:
        read(BUCKET, "p2.dev-9", old, None)
    assert replayed.value.reason == "expired"


async def test_the_lookups_stay_up_while_forgeries_keep_coming(
    nodes: tuple[Node, Node], nats_url: str
) -> None:
    _, front = nodes
    kv = _kv_of(front)
    await front.agents.lookup(LOCAL_CALLER, LookupInput(semantic_address=P2))
    bad = {f"p2.bad-{n}": b"{" * (n + 1) for n in range(50)}
    server, _ = build_server(front)
    transport = httpx.ASGITransport(app=build_app(front, server, "127.0.0.1"))
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:

        async def keep_looking() -> list[int]:
            """Lookups one after the other while the forgeries land."""
            codes = []
            while sum(kv.rejected.values()) < len(bad):
                answer = await http.get(f"/api/v1/agents?address={P2}")
                codes.append(answer.status_code)
                await asyncio.sleep(0)  # an answer from a held view never waits: let others run
            return codes

        looking = asyncio.create_task(keep_looking())
        try:
            await _put_raw(nats_url, bad)
            await kv.wait_until(lambda: sum(kv.rejected.values()) >= len(bad), BOUND)
            async with asyncio.timeout(BOUND):
                codes = await looking
        finally:
            looking.cancel()
        last = await http.get(f"/api/v1/agents?address={P2}")
    assert codes and set(codes) == {200}
    assert last.status_code == 200 and _ids(last.json()) == {"dev-1", "dev-2"}
