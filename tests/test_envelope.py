"""Envelopes: sealed with the origin's key, opened only when every check passes."""

from __future__ import annotations

import json
from typing import Any

import pytest

from bzzz.network.envelope import Envelope, EnvelopeRejected, open_envelope, seal
from bzzz.network.identity import NodeIdentity

NETWORK = "main"


@pytest.fixture
def origin() -> NodeIdentity:
    return NodeIdentity.generate()


@pytest.fixture
def envelope(origin: NodeIdentity) -> Envelope:
    payload = {"agent_id": "architect-001", "role": "architect", "session_id": "s1"}
    return seal(origin, NETWORK, "agent.announced", "bzzz.main.agent.architect-001", payload)


def rejected_reason(data: bytes, network: str = NETWORK) -> str:
    with pytest.raises(EnvelopeRejected) as caught:
        open_envelope(data, network)
    return caught.value.reason


def altered(envelope: Envelope, **changes: Any) -> bytes:
    return envelope.model_copy(update=changes).to_bytes()


def test_a_sealed_envelope_opens_unchanged(origin: NodeIdentity, envelope: Envelope) -> None:
    opened = open_envelope(envelope.to_bytes(), NETWORK)

    assert opened == envelope
    assert opened.origin == origin.node_id
    assert opened.timestamp.tzinfo is not None
    assert len(opened.id) == 26


def test_a_tampered_payload_is_rejected(envelope: Envelope) -> None:
    payload = envelope.payload | {"role": "admin"}

    assert rejected_reason(altered(envelope, payload=payload)) == "bad_signature"


@pytest.mark.parametrize("field", ["type", "subject", "ts", "id"])
def test_every_signed_field_is_covered(envelope: Envelope, field: str) -> None:
    value = getattr(envelope, field)
    changed = value[:-1] + ("0" if value[-1] != "0" else "1")

    assert rejected_reason(altered(envelope, **{field: changed})) == "bad_signature"


def test_a_signature_by_another_key_is_rejected(envelope: Envelope) -> None:
    forger = NodeIdentity.generate()

    forged = forger.sign(envelope.signing_bytes())

    assert rejected_reason(altered(envelope, sig=forged)) == "bad_signature"
    assert rejected_reason(altered(envelope, sig="not-a-signature")) == "bad_signature"
    assert rejected_reason(altered(envelope, sig="")) == "bad_signature"


def test_an_envelope_of_another_network_is_rejected(envelope: Envelope) -> None:
    assert rejected_reason(envelope.to_bytes(), network="staging") == "wrong_network"


def test_an_origin_that_does_not_own_the_key_is_rejected(envelope: Envelope) -> None:
    impersonated = NodeIdentity.generate().node_id

    assert rejected_reason(altered(envelope, origin=impersonated)) == "origin_mismatch"


def test_a_key_that_does_not_belong_to_the_origin_is_rejected(origin: NodeIdentity) -> None:
    signer = NodeIdentity.generate()
    # Signed correctly by the signer, but claiming to come from another node.
    unsigned = Envelope(
        id="01JABCDEFGHJKMNPQRSTVWXYZ0",
        network=NETWORK,
        origin=origin.node_id,
        origin_key=signer.public_key_b64,
        type="agent.announced",
        subject="bzzz.main.agent.x",
        payload={},
        ts="2025-08-09T16:22:20+00:00",
    )
    signed = unsigned.model_copy(update={"sig": signer.sign(unsigned.signing_bytes())})

    assert rejected_reason(signed.to_bytes()) == "origin_mismatch"


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"not json",
        b"[]",
        b'{"id": "x"}',
        json.dumps({"unexpected": True}).encode(),
    ],
)
def test_malformed_bytes_are_rejected(data: bytes) -> None:
    assert rejected_reason(data) == "malformed"


def test_an_extra_field_is_rejected(envelope: Envelope) -> None:
    body = json.loads(envelope.to_bytes()) | {"admin": True}

    assert rejected_reason(json.dumps(body).encode()) == "malformed"
