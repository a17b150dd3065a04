"""Sealing: boxes name their key and open only where they belong; envelopes verify without it."""

from __future__ import annotations

import json
import stat
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import select, text

from bzzz.errors import ConfigError
from bzzz.network.envelope import SEALED, EnvelopeRejected, open_envelope, seal, unseal
from bzzz.network.identity import NodeIdentity
from bzzz.network.sealing import (
    Keyring,
    NetworkKey,
    SealError,
    box_key_id,
    decode_secret,
    encode_secret,
    key_from_payload,
    key_payload,
    load_keyring,
)
from bzzz.store.database import Database
from bzzz.store.models import MessageRow

T0 = datetime(2026, 12, 1, tzinfo=UTC)


def ring(fill: int, at: datetime = T0) -> Keyring:
    return Keyring([NetworkKey.of(bytes([fill]) * 32, at)])


def test_a_box_names_its_key_and_opens_only_with_it_and_its_place() -> None:
    mine, other = ring(1), ring(2)
    box = mine.seal(b"the launch word", b"messages.content")
    assert box.startswith(f"bz1.{mine.current.id}.")
    assert box_key_id(box) == mine.current.id
    assert b"launch" not in box.encode()
    assert mine.open(box, b"messages.content") == b"the launch word"
    with pytest.raises(SealError) as unknown:
        other.open(box, b"messages.content")
    assert unknown.value.reason == "unknown_key" and unknown.value.key_id == mine.current.id
    with pytest.raises(SealError) as moved:
        mine.open(box, b"tasks.data")  # the same box in another column
    assert moved.value.reason == "bad_seal"
    tampered = box[:-2] + ("A" if box[-2] != "A" else "B") + box[-1]
    with pytest.raises(SealError):
        mine.open(tampered, b"messages.content")


def test_the_newest_key_seals_and_every_older_one_still_opens() -> None:
    keys = ring(1)
    old = keys.seal(b"before", b"x")
    newer = NetworkKey.of(b"\x07" * 32, datetime(2027, 1, 1, tzinfo=UTC))
    assert keys.add(newer) and not keys.add(newer)
    assert keys.current.id == newer.id
    assert box_key_id(keys.seal(b"after", b"x")) == newer.id
    assert keys.open(old, b"x") == b"before"


def test_a_configured_key_must_be_32_bytes_of_base64() -> None:
    assert decode_secret(encode_secret(b"\x01" * 32)) == b"\x01" * 32
    with pytest.raises(ConfigError, match="32 bytes"):
        decode_secret(encode_secret(b"short"))
    with pytest.raises(ConfigError, match="base64"):
        decode_secret("not base64 at all!")


def test_a_generated_keyring_file_is_private_and_read_back(tmp_path: Path) -> None:
    first = load_keyring(tmp_path)
    path = tmp_path / "keys" / "network.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    again = load_keyring(tmp_path)
    assert [k.id for k in again.all_keys()] == [first.current.id]
    # A key another process added to the file is seen when a box names it.
    other = load_keyring(tmp_path)
    added = NetworkKey.of(b"\x09" * 32, datetime.now(UTC))
    other.add(added)
    assert again.open(other.seal(b"new", b"x"), b"x") == b"new"
    assert load_keyring(tmp_path, create=False).holds(added.id)


def test_environment_keys_are_older_than_any_the_log_adds(tmp_path: Path) -> None:
    a, b = encode_secret(b"\x01" * 32), encode_secret(b"\x02" * 32)
    keys = load_keyring(tmp_path, env_keys=[a, b])
    assert keys.current.id == NetworkKey.of(b"\x02" * 32).id
    assert not (tmp_path / "keys" / "network.json").exists()  # nothing generated
    rotated = NetworkKey.of(b"\x03" * 32, T0)
    keys.add(rotated)
    assert keys.current.id == rotated.id


def test_a_rotation_payload_carries_a_key_whose_id_matches() -> None:
    key = NetworkKey.of(b"\x05" * 32, T0)
    assert key_from_payload(key_payload(key)) == key
    forged = key_payload(key) | {"key_id": "0" * 16}
    with pytest.raises(ValueError, match="does not name"):
        key_from_payload(forged)


def test_a_sealed_envelope_verifies_without_the_key_and_opens_with_it() -> None:
    node, keys = NodeIdentity.generate(), ring(1)
    payload = {"message_id": "m-1", "content": {"text": "secret plans"}}
    env = seal(node, "main", "message.posted", "bzzz.main.msg.a", payload, keyring=keys)
    wire = env.to_bytes()
    assert b"secret plans" not in wire
    # Any node checks the signature (over the box): without the key it stays sealed.
    still = open_envelope(wire, "main")
    assert still.sealed and set(still.payload) == {SEALED}
    assert open_envelope(wire, "main", keyring=ring(2)).sealed  # a key it lacks: later, maybe
    assert open_envelope(wire, "main", keyring=keys).payload == payload
    assert unseal(still, keys).payload == payload
    # The box is bound to its envelope: moved into another one (signed anew), it does not open.
    resigned = seal(node, "main", "message.posted", "bzzz.main.msg.a", still.payload)
    with pytest.raises(EnvelopeRejected, match="bad_seal"):
        open_envelope(resigned.to_bytes(), "main", keyring=keys)
    # Agents stay clear: federation and lookups read them without the key.
    agent = seal(
        node, "main", "agent.announced", "bzzz.main.agent.x", {"agent_id": "x"}, keyring=keys
    )
    assert json.loads(agent.to_bytes())["payload"] == {"agent_id": "x"}


async def _row(db: Database) -> object:
    async with db.session() as session:
        return await session.scalar(select(MessageRow.content).where(MessageRow.id == "m-1"))


async def test_two_stores_in_one_process_seal_with_their_own_keys(tmp_path: Path) -> None:
    first, second = ring(1), ring(2)
    dbs = [
        Database(f"sqlite+aiosqlite:///{tmp_path / 'a.db'}", first),
        Database(f"sqlite+aiosqlite:///{tmp_path / 'b.db'}", second),
    ]
    for db in dbs:
        await db.open()
    try:
        for db, word in zip(dbs, ("alpha", "beta"), strict=True):
            async with db.session() as session:
                session.add(
                    MessageRow(
                        id="m-1",
                        sender="a",
                        target_address="bzzz://b",
                        message_type="text",
                        content={"text": word},
                        priority="medium",
                        recipients=["b"],
                        posted_at=T0,
                    )
                )
        assert await _row(dbs[0]) == {"text": "alpha"}
        assert await _row(dbs[1]) == {"text": "beta"}
        async with dbs[1].session() as session:
            stored = await session.scalar(text("SELECT content FROM messages"))
        assert box_key_id(json.loads(stored)) == second.current.id
        assert b"beta" not in (tmp_path / "b.db").read_bytes()
    finally:
        for db in dbs:
            await db.close()
