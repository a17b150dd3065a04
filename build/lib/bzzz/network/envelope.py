"""Envelopes: every state change travels the event log as one signed envelope."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, StringConstraints, ValidationError
from ulid import ULID

from bzzz.network.identity import NodeIdentity, origin_of, verify_signature


class Envelope(BaseModel):
    """One signed change: id (ULID), network, origin node, type, subject, payload, time."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # Bounded to what the store's columns hold: a signed envelope with an oversized field
    # must be rejected here, not stop a projector on a database that enforces lengths.
    id: Annotated[str, StringConstraints(pattern=r"^[0-9A-HJKMNP-TV-Z]{26}$")]
    network: Annotated[str, StringConstraints(max_length=64)]
    origin: Annotated[str, StringConstraints(max_length=64)]
    origin_key: Annotated[str, StringConstraints(max_length=64)]
    type: Annotated[str, StringConstraints(pattern=r"^[a-z0-9_.]{1,64}$")]
    subject: Annotated[str, StringConstraints(max_length=512)]
    payload: dict[str, Any]
    ts: str
    sig: str = ""

    def signing_bytes(self) -> bytes:
        """The canonical bytes the signature covers (everything but the signature)."""
        return canonical_bytes(self.model_dump(exclude={"sig"}))

    def to_bytes(self) -> bytes:
        """The wire form."""
        return self.model_dump_json().encode()

    @property
    def timestamp(self) -> datetime:
        """The envelope's time as an aware datetime."""
        return datetime.fromisoformat(self.ts)


def canonical_bytes(body: dict[str, Any]) -> bytes:
    """The signed form of an envelope's fields (without ``sig``): sorted, compact JSON."""
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def seal(
    identity: NodeIdentity,
    network: str,
    type_: str,
    subject: str,
    payload: dict[str, Any],
    *,
    now: datetime | None = None,
    envelope_id: str | None = None,
) -> Envelope:
    """Build and sign an envelope originating at this node (a fresh ULID unless given)."""
    body: dict[str, Any] = {
        "id": envelope_id or str(ULID()),
        "network": network,
        "origin": identity.node_id,
        "origin_key": identity.public_key_b64,
        "type": type_,
        "subject": subject,
        "payload": payload,
        "ts": (now or datetime.now(UTC)).isoformat(),
    }
    # Signed from the fields as given and validated once with the signature: validation keeps
    # str fields and the payload's values as they are, so signing_bytes() gives these bytes.
    return Envelope.model_validate(body | {"sig": identity.sign(canonical_bytes(body))})


class EnvelopeRejected(Exception):
    """An envelope that must not be applied; ``reason`` is counted and audited."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def open_envelope(
    data: bytes,
    network: str,
    trusted: frozenset[str] | None = None,
    *,
    sealed_here: bool = False,
) -> Envelope:
    """Parse and verify wire bytes; raise EnvelopeRejected when they are not a valid envelope.

    ``trusted`` (public keys or node ids), when given, is the network's allow-list: an origin
    outside it is refused even with a valid signature. ``sealed_here`` says the bytes are exactly
    those this process signed and published: their signature needs no second check.
    """
    try:
        fields = json.loads(data)
        envelope = Envelope.model_validate(fields)
    except (ValueError, ValidationError) as exc:
        raise EnvelopeRejected("malformed") from exc
    if envelope.network != network:
        raise EnvelopeRejected("wrong_network")
    try:
        origin, _ = origin_of(envelope.origin_key)
    except ValueError as exc:
        raise EnvelopeRejected("bad_key") from exc
    if origin != envelope.origin:
        raise EnvelopeRejected("origin_mismatch")
    # The parsed fields are what the model holds (validation keeps them as they are), so the
    # signed bytes come from them without dumping the model again.
    fields.pop("sig", None)
    if not sealed_here and not verify_signature(
        envelope.origin_key, envelope.sig, canonical_bytes(fields)
    ):
        raise EnvelopeRejected("bad_signature")
    if trusted is not None and not ({envelope.origin_key, envelope.origin} & trusted):
        raise EnvelopeRejected("untrusted")
    return envelope
