"""Envelopes: every state change travels the event log as one signed envelope.

With a keyring, an envelope's payload is sealed before it is signed (``$sealed``: an AEAD box
naming its key, bound to the envelope's id and type; see ``network/sealing.py``), so every
receiver verifies the signature without the key and only the network's nodes read the
content. The payloads of agents, nodes, tokens and audit heads stay clear (addresses, ids,
roles, capabilities, statuses, hashes): federation and admission read them as they are.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, PrivateAttr, StringConstraints, ValidationError
from ulid import ULID

from bzzz.network.identity import NodeIdentity, origin_of, verify_signature
from bzzz.network.sealing import Keyring, SealError, box_key_id

SEALED = "$sealed"
# Types whose payload stays clear: no content, only addresses, ids, roles, statuses, hashes.
_CLEAR_PREFIXES = ("agent.", "node.", "token.", "audit.head")


def seals_payload(type_: str) -> bool:
    """Whether envelopes of ``type_`` carry content (their payload is sealed)."""
    return not type_.startswith(_CLEAR_PREFIXES)


def _aad(envelope_id: str, type_: str) -> bytes:
    return f"{envelope_id}|{type_}".encode()


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
    # The payload before it was sealed, as the log's readers will open it (sealed here only).
    _plain: dict[str, Any] | None = PrivateAttr(default=None)

    def signing_bytes(self) -> bytes:
        """The canonical bytes the signature covers (everything but the signature)."""
        return canonical_bytes(self.model_dump(exclude={"sig"}))

    def to_bytes(self) -> bytes:
        """The wire form."""
        return self.model_dump_json().encode()

    def opened(self) -> Envelope | None:
        """This node's sealed envelope with its payload open (no second decryption); None
        when it was not sealed here (read its bytes as any reader does)."""
        if self._plain is None:
            return None
        return self.model_copy(update={"payload": self._plain})

    @property
    def sealed(self) -> bool:
        """Whether the payload is still a sealed box (this node could not open it yet)."""
        return SEALED in self.payload and len(self.payload) == 1

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
    keyring: Keyring | None = None,
) -> Envelope:
    """Build and sign an envelope originating at this node (a fresh ULID unless given).

    With ``keyring`` a content payload is sealed under its current key, then signed.
    """
    envelope_id = envelope_id or str(ULID())
    plain: dict[str, Any] | None = None
    if keyring is not None and seals_payload(type_):
        text = json.dumps(payload, separators=(",", ":"))
        plain = json.loads(text)  # what every reader opens: JSON's types, not the caller's
        payload = {SEALED: keyring.seal(text.encode(), _aad(envelope_id, type_))}
    body: dict[str, Any] = {
        "id": envelope_id,
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
    envelope = Envelope.model_validate(body | {"sig": identity.sign(canonical_bytes(body))})
    envelope._plain = plain
    return envelope


def open_own(envelope: Envelope | None, trusted: frozenset[str] | None) -> Envelope | None:
    """A payload this process sealed, as ``open_envelope`` would open its bytes; None when the
    envelope was not sealed here with a key (then its bytes are read as any reader does)."""
    opened = envelope.opened() if envelope is not None else None
    if (
        opened is not None
        and trusted is not None
        and not ({opened.origin_key, opened.origin} & trusted)
    ):
        raise EnvelopeRejected("untrusted")
    return opened


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
    keyring: Keyring | None = None,
) -> Envelope:
    """Parse and verify wire bytes; raise EnvelopeRejected when they are not a valid envelope.

    ``trusted`` (public keys or node ids), when given, is the network's allow-list: an origin
    outside it is refused even with a valid signature. ``sealed_here`` says the bytes are exactly
    those this process signed and published: their signature needs no second check. A sealed
    payload is opened with ``keyring``; one under a key it lacks comes back still sealed
    (``envelope.sealed``: a key added later in the log may open it, see ``unseal``).
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
    if keyring is not None and envelope.sealed:
        try:
            return unseal(envelope, keyring)
        except SealError as exc:
            if exc.reason != "unknown_key":
                raise EnvelopeRejected(exc.reason) from exc
    return envelope


def sealed_key_id(envelope: Envelope) -> str | None:
    """The key id a sealed envelope's box names."""
    box = envelope.payload.get(SEALED)
    return box_key_id(box) if isinstance(box, str) else None


def unseal(envelope: Envelope, keyring: Keyring) -> Envelope:
    """The envelope with its payload opened; SealError when the keyring cannot open it."""
    box = envelope.payload[SEALED]
    if not isinstance(box, str):
        raise SealError("bad_seal")
    plain = keyring.open_json(box, _aad(envelope.id, envelope.type))
    if not isinstance(plain, dict):
        raise SealError("bad_seal")
    return envelope.model_copy(update={"payload": plain})
