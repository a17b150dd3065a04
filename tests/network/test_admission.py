"""Admission: with bzzz.admission a node applies only envelopes of nodes admitted to its network."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import nats
import pytest

from bzzz.api.app import build_app
from bzzz.config import Settings, load_settings
from bzzz.errors import BzzzError, InvalidParameters
from bzzz.eventlog import Caller
from bzzz.mcp.server import build_server
from bzzz.network.admission import Admission
from bzzz.network.envelope import Envelope, seal, unseal
from bzzz.network.identity import NodeIdentity
from bzzz.network.jetstream import stream_name
from bzzz.network.sealing import Keyring
from bzzz.node import admin as node_admin
from bzzz.node.core import Node
from bzzz.schemas import AnnounceInput, PostInput
from bzzz.store.repository import Repository

_WAIT = 10.0


def _settings(data_dir: Path, nats_url: str | None = None, **bzzz: Any) -> Settings:
    environ = {"BZZZ_BZZZ__ADMISSION": "true"}
    if nats_url is not None:
        environ["BZZZ_NATS_URL"] = nats_url
    return load_settings(
        environ=environ, overrides={"node": {"data_dir": str(data_dir)}, "bzzz": bzzz}
    )


async def _announce(node: Node, agent_id: str) -> None:
    await node.agents.announce(
        Caller(f"s-{agent_id}"), AnnounceInput(agent_id=agent_id, role="dev")
    )


def _status(node: Node, agent_id: str) -> str | None:
    agent = node.projector.directory.get(agent_id)
    return None if agent is None else str(agent.status)


async def _inbox(node: Node, agent_id: str) -> list[str]:
    async with node.db.session() as session:
        messages = await Repository(session).inbox(agent_id, 50)
    return [str(m.content.get("text")) for m in messages]


async def _rejected(node: Node, count: int) -> None:
    await node.projector.wait_until(lambda: node.projector.rejected["not_admitted"] >= count, _WAIT)


def _forge(
    template: Envelope, identity: NodeIdentity, text: str, keyring: Keyring | None
) -> Envelope:
    """Another node's post, re-signed by ``identity`` with other content and a new id.

    The forger holds the network key as well as the NATS login: admission alone stops it.
    """
    payload = dict(template.payload)
    payload["message_id"] = f"{payload['message_id'][:-4]}{os.urandom(2).hex()}"
    payload["content"] = {"text": text}
    return seal(
        identity, template.network, template.type, template.subject, payload, keyring=keyring
    )


async def _last_post(js: Any, network: str, keyring: Keyring | None) -> Envelope:
    info = await js.stream_info(stream_name(network))
    for seq in range(info.state.last_seq, 0, -1):
        envelope = Envelope.model_validate_json((await js.get_msg(stream_name(network), seq)).data)
        if envelope.type == "message.posted":
            return unseal(envelope, keyring) if keyring is not None else envelope
    raise AssertionError("no post in the log")


@pytest.fixture
async def first(tmp_path: Path) -> AsyncIterator[Node]:
    """The first node of a network with admission on, on its embedded server."""
    async with Node(_settings(tmp_path / "first")) as node:
        yield node


# --- the rules -------------------------------------------------------------------------------


def _sealed(identity: NodeIdentity, type_: str, **payload: Any) -> Envelope:
    return seal(identity, "main", type_, f"bzzz.main.admission.{identity.node_id}", payload)


def test_an_open_network_is_closed_by_a_node_admitting_itself_first() -> None:
    a, b = NodeIdentity.generate(), NodeIdentity.generate()
    state = Admission(enforce=True)
    assert state.open and state.check(_sealed(b, "agent.announced")) is None
    # What changes who may do what waits for an admitted node, even on an open network.
    assert state.check(_sealed(b, "node.status")) == "not_admitted"

    refused = state.step(_sealed(a, "node.admitted", public_key=b.public_key_b64))
    assert refused is not None and not refused.outcome["ok"]
    assert state.step(_sealed(a, "node.admitted", public_key=a.public_key_b64)) is not None
    assert not state.open
    assert state.check(_sealed(b, "node.status")) == "not_admitted"

    assert state.step(_sealed(a, "node.admitted", public_key=b.public_key_b64)) is not None
    assert state.check(_sealed(b, "node.status")) is None
    removed = state.step(_sealed(b, "node.removed", node=a.node_id))
    assert removed is not None and removed.outcome["removed"] == a.public_key_b64
    last = state.step(_sealed(b, "node.removed", node=b.public_key_b64))
    assert last is not None and last.outcome == {
        "ok": False,
        "reason": "the last admitted node cannot be removed",
    }
    assert list(state.members.values()) == [b.node_id]


def test_the_static_list_is_admitted_from_the_start_and_stays() -> None:
    a, b = NodeIdentity.generate(), NodeIdentity.generate()
    state = Admission([a.node_id], enforce=True)
    assert not state.open
    assert state.check(_sealed(b, "node.admitted", public_key=b.public_key_b64)) == "not_admitted"
    assert state.step(_sealed(a, "node.admitted", public_key=b.public_key_b64)) is not None
    kept = state.step(_sealed(b, "node.removed", node=a.node_id))
    assert kept is not None and not kept.outcome["ok"]
    assert state.admits(a.public_key_b64, a.node_id)


def test_a_copy_stored_again_later_changes_nothing_and_a_restore_agrees() -> None:
    a, b = NodeIdentity.generate(), NodeIdentity.generate()
    state = Admission(enforce=True)
    log = [
        _sealed(a, "node.admitted", public_key=a.public_key_b64),
        _sealed(a, "node.admitted", public_key=b.public_key_b64),
        _sealed(a, "node.removed", node=b.node_id),
    ]
    recorded = []
    for env in [*log, log[1]]:  # the admission of b, stored once more after its removal
        change = state.step(env)
        if change is not None:
            recorded.append((env.id, change.outcome))
    assert len(recorded) == 3
    assert state.check(_sealed(b, "node.status")) == "not_admitted"
    restored = Admission(enforce=True)
    restored.restore(recorded)
    assert restored.members == state.members == {a.public_key_b64: a.node_id}
    assert restored.step(log[1]) is None


@pytest.mark.parametrize(
    "type_", ["token.created", "token.revoked", "node.lost", "keys.added", "retention.forget"]
)
def test_changes_of_who_may_do_what_come_from_admitted_nodes_whatever_the_setting(
    type_: str,
) -> None:
    a, b = NodeIdentity.generate(), NodeIdentity.generate()
    for enforce in (True, False):
        state = Admission(enforce=enforce)
        assert state.check(_sealed(b, type_)) == "not_admitted"  # open: no member yet
        assert state.step(_sealed(a, "node.admitted", public_key=a.public_key_b64)) is not None
        assert state.check(_sealed(a, type_)) is None
        assert state.check(_sealed(b, type_)) == "not_admitted"
        # Anything else from b: dropped only where admission is enforced.
        assert state.check(_sealed(b, "message.posted")) == ("not_admitted" if enforce else None)


# --- nodes on a real nats-server -------------------------------------------------------------


@pytest.mark.integration
async def test_an_envelope_from_an_unadmitted_key_is_dropped_counted_and_never_delivered(
    first: Node,
) -> None:
    await _announce(first, "alice")
    await _announce(first, "bob")
    await first.conversations.post(
        Caller("s-alice"),
        PostInput(target_address="bzzz://bob", message_type="text", content={"text": "real"}),
    )
    assert first.embedded is not None
    stranger = NodeIdentity.generate()
    nc = await nats.connect(first.embedded.client_url)
    try:
        js = nc.jetstream()
        template = await _last_post(js, first.network, first.keyring)
        forged = _forge(template, stranger, "forged", first.keyring)
        ack = await js.publish(
            forged.subject, forged.to_bytes(), headers={"Nats-Msg-Id": forged.id}
        )
        await first.projector.wait_for_sequence(ack.seq, _WAIT)
        assert first.projector.rejected["not_admitted"] == 1
        assert await _inbox(first, "bob") == ["real"]

        # The same post from the same key once admitted: delivered (so the drop above was it).
        await node_admin.admit(first.settings, stranger.public_key_b64)
        admitted = _forge(template, stranger, "admitted", first.keyring)
        ack = await js.publish(
            admitted.subject, admitted.to_bytes(), headers={"Nats-Msg-Id": admitted.id}
        )
        await first.projector.wait_for_sequence(ack.seq, _WAIT)
    finally:
        await nc.close()
    assert sorted(await _inbox(first, "bob")) == ["admitted", "real"]
    assert first.projector.rejected["not_admitted"] == 1
    metrics, health = await _served(first, "/metrics", "/healthz")
    assert 'bzzz_envelopes_rejected_total{reason="not_admitted"} 1' in metrics
    # The open /healthz shows no server URL, let alone its password.
    assert "nats://" not in health and first.embedded.auth.password not in health
    assert json.loads(health)["projector"]["rejected"]["not_admitted"] == 1


async def _served(node: Node, *paths: str) -> list[str]:
    """What the node's HTTP app answers on ``paths``."""
    server, _ = build_server(node)
    app = build_app(node, server, "127.0.0.1")
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
        return [(await http.get(path)).text for path in paths]


@pytest.mark.integration
async def test_admit_lets_a_second_node_in_remove_stops_it_and_a_replay_agrees(
    tmp_path: Path, nats_url: str
) -> None:
    first = Node(_settings(tmp_path / "a", nats_url))
    second = Node(_settings(tmp_path / "b", nats_url))
    await first.start()
    try:
        await second.start()
        try:
            with pytest.raises(BzzzError):
                await _announce(second, "b-early")
            dropped = first.projector.rejected["not_admitted"]
            assert dropped >= 1  # at least b's start-up status and its announcement

            outcome = await node_admin.admit(first.settings, second.identity.public_key_b64)
            assert outcome["node_id"] == second.node_id
            await second.projector.wait_until(
                lambda: second.projector.admission.is_member(
                    second.identity.public_key_b64, second.node_id
                ),
                _WAIT,
            )
            await _announce(second, "b-admitted")
            await first.projector.wait_until(
                lambda: first.projector.directory.get("b-admitted") is not None, _WAIT
            )

            await node_admin.remove(first.settings, second.node_id)
            # Its agents can no longer answer: they go offline everywhere.
            await first.projector.wait_until(
                lambda: _status(first, "b-admitted") == "offline", _WAIT
            )
            await second.projector.wait_until(
                lambda: (
                    not second.projector.admission.is_member(
                        second.identity.public_key_b64, second.node_id
                    )
                ),
                _WAIT,
            )
            with pytest.raises(BzzzError):
                await _announce(second, "b-removed")
            await _rejected(first, dropped + 1)
            assert first.projector.directory.get("b-removed") is None
        finally:
            await second.stop()
        expected = dict(first.projector.admission.members)
        assert expected == {first.identity.public_key_b64: first.node_id}
    finally:
        await first.stop()

    # A new node replays the whole log; a restarted one rebuilds the set from its store.
    async with Node(_settings(tmp_path / "c", nats_url)) as newcomer:
        assert newcomer.projector.admission.members == expected
        assert _status(newcomer, "b-admitted") == "offline"
        assert newcomer.projector.directory.get("b-removed") is None
        assert newcomer.projector.directory.get("b-early") is None
    async with Node(_settings(tmp_path / "a", nats_url)) as again:
        assert again.projector.admission.members == expected
        assert again.projector.applied_sequence > 0


@pytest.mark.integration
async def test_a_second_local_process_on_the_directory_is_admitted_by_its_key(
    first: Node, tmp_path: Path
) -> None:
    async with Node(_settings(tmp_path / "first")) as local:
        assert local.slot == 1 and local.embedded is not None and not local.embedded.owner
        assert local.projector.admission.is_member(local.identity.public_key_b64, local.node_id)
        await _announce(local, "from-slot-1")
        await first.projector.wait_until(
            lambda: first.projector.directory.get("from-slot-1") is not None, _WAIT
        )
    assert first.projector.rejected["not_admitted"] == 0


@pytest.mark.integration
async def test_admitting_needs_an_admitted_key_and_a_real_public_key(
    first: Node, tmp_path: Path
) -> None:
    with pytest.raises(InvalidParameters, match="not a node's public key"):
        await node_admin.admit(first.settings, "not-a-key")
    # Another data directory's key is no member: it may not admit anyone.
    outsider = _settings(tmp_path / "outsider")
    outsider.bzzz.nats_url = [first.embedded.client_url] if first.embedded else []
    with pytest.raises(InvalidParameters, match="is not admitted"):
        await node_admin.admit(outsider, NodeIdentity.generate().public_key_b64)
    listed = await node_admin.admitted(first.settings)
    assert [n["node_id"] for n in listed["nodes"]] == [first.node_id]


@pytest.mark.integration
async def test_the_cli_lists_and_admits_while_the_node_runs(
    first: Node, tmp_path: Path, clean_env: dict[str, str]
) -> None:
    env = {**clean_env, "BZZZ_DATA_DIR": str(tmp_path / "first"), "BZZZ_BZZZ__ADMISSION": "true"}
    # One key in 64 begins with "-": the CLI must not take it for an option (CI caught it).
    newcomer = next(
        key for key in iter(NodeIdentity.generate, None) if key.public_key_b64.startswith("-")
    )

    def bzzz(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "bzzz.cli", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    admitted = await asyncio.to_thread(bzzz, "node", "admit", newcomer.public_key_b64)
    assert admitted.returncode == 0, admitted.stderr
    assert admitted.stdout.strip() == f"admitted {newcomer.node_id}"
    listed = await asyncio.to_thread(bzzz, "node", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    nodes = {n["node_id"] for n in json.loads(listed.stdout)["nodes"]}
    assert nodes == {first.node_id, newcomer.node_id}
    await first.projector.wait_until(
        lambda: first.projector.admission.is_member(newcomer.public_key_b64, newcomer.node_id),
        _WAIT,
    )
    wrong = await asyncio.to_thread(bzzz, "node", "remove", "nobody-here")
    assert wrong.returncode == 1
    assert "nobody-here is not admitted" in wrong.stderr


@pytest.mark.integration
async def test_an_unadmitted_nodes_heartbeats_stay_off_the_peer_list_until_it_is_admitted(
    tmp_path: Path, nats_url: str
) -> None:
    fast = {"heartbeat_interval": 0.2}
    async with (
        Node(_settings(tmp_path / "a", nats_url, **fast)) as first,
        Node(_settings(tmp_path / "b", nats_url, **fast)) as second,
    ):
        await first.peers.wait_for(lambda _: first.peers.rejected["not_admitted"] >= 1, _WAIT)
        assert second.node_id not in {p.id for p in first.peers.peers()}

        await node_admin.admit(first.settings, second.identity.public_key_b64)
        await first.peers.wait_for(lambda peers: second.node_id in peers, _WAIT)
