"""An audit record: its fields, its canonical form and hash, and the parameters' digest."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, fields
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from bzzz.store.models import AuditRecordRow

GENESIS = "0" * 64
HEAD_CONTEXT = b"bzzz-audit-head\x00"

# Parameters that carry a secret or message content: never part of a digest's input, so a
# digest cannot be used to confirm a guessed secret or text.
SECRET_FIELDS = frozenset(
    {
        "agent_handle",
        "content",
        "token",
        "secret",
        "password",
        "api_key",
        "apikey",
        "authorization",
        "access_token",
        "refresh_token",
        "client_secret",
        "messages",
        "system_prompt",
    }
)
URL_FIELDS = frozenset({"callback_webhook", "url", "webhook"})
# The argument that names what an action is about, in order of preference.
TARGET_FIELDS = (
    "target_address",
    "address",
    "thread_id",
    "semantic_address",
    "filter_address",
    "subscription_id",
    "task_id",
    "agent_id",
)


def canonical(body: Any) -> bytes:
    """Sorted, compact JSON: the one form hashes and signatures cover."""
    return json.dumps(
        body, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str
    ).encode()


def sha256(data: bytes) -> str:
    """Hex SHA-256."""
    return hashlib.sha256(data).hexdigest()


def _is_secret(key: str) -> bool:
    lowered = key.lower()
    return lowered in SECRET_FIELDS or lowered.endswith(("_token", "_secret", "_key"))


def _bare_url(value: Any) -> Any:
    # A webhook URL's query and user part may hold its receiver's credential.
    if not isinstance(value, str):
        return value
    try:
        parts = urlsplit(value)
        port = parts.port
    except ValueError:
        # A port out of range or a malformed host: the tool refuses the URL, and recording
        # the refusal must not fail on it (nothing of it is kept).
        return "(malformed url)"
    host = parts.hostname or ""
    netloc = f"{host}:{port}" if port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def scrub(value: Any) -> Any:
    """``value`` without secret-bearing fields (recursively); webhook URLs without query."""
    if isinstance(value, dict):
        kept: dict[str, Any] = {}
        for key, item in value.items():
            name = str(key)
            if _is_secret(name):
                continue
            kept[name] = _bare_url(item) if name.lower() in URL_FIELDS else scrub(item)
        return kept
    if isinstance(value, list | tuple):
        return [scrub(item) for item in value]
    return value


def digest(params: Any) -> str:
    """SHA-256 of the canonical JSON of the scrubbed parameters."""
    return sha256(canonical(scrub(params)))


def target_of(params: Any) -> str | None:
    """The address or thread an action names, if any (bounded to the column)."""
    if not isinstance(params, dict):
        return None
    for name in TARGET_FIELDS:
        value = params.get(name)
        if isinstance(value, str) and value:
            return value[:512]
    return None


def stamp(when: datetime) -> str:
    """A record's time as its canonical form holds it."""
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True, slots=True)
class Action:
    """What happened, before it has a place in the chain."""

    at: str
    principal: str
    session: str
    action: str
    outcome: str
    digest: str
    agent: str | None = None
    target: str | None = None


@dataclass(frozen=True, slots=True)
class Record:
    """One link of a node's chain."""

    node_id: str
    seq: int
    prev_hash: str
    hash: str
    at: str
    principal: str
    agent: str | None
    session: str
    action: str
    target: str | None
    outcome: str
    digest: str

    def body(self) -> dict[str, Any]:
        """Every field but the hash: what the hash covers."""
        body = self.to_json()
        del body["hash"]
        return body

    def computed_hash(self) -> str:
        """The hash the record's fields give now."""
        return sha256(canonical(self.body()))

    def to_json(self) -> dict[str, Any]:
        """The record as list and export show it."""
        return {name: getattr(self, name) for name in RECORD_FIELDS}

    @classmethod
    def from_row(cls, row: AuditRecordRow) -> Record:
        """The record a stored row holds."""
        return cls(
            row.node_id,
            row.seq,
            row.prev_hash,
            row.hash,
            row.at,
            row.principal,
            row.agent,
            row.session,
            row.action,
            row.target,
            row.outcome,
            row.digest,
        )

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Record:
        """A record of an export (JSON lines)."""
        values: dict[str, Any] = {name: data.get(name) for name in cls.__slots__}
        return cls(**values)


# The fields' names, read once: ``dataclasses.asdict`` deep-copies every value, and these are
# all strings and integers (it was ~250 function calls a tool call).
ACTION_FIELDS = tuple(f.name for f in fields(Action))
RECORD_FIELDS = tuple(f.name for f in fields(Record))


def chain(node_id: str, seq: int, prev_hash: str, action: Action) -> Record:
    """The record ``action`` becomes at ``seq`` after ``prev_hash``."""
    body: dict[str, Any] = {"node_id": node_id, "seq": seq, "prev_hash": prev_hash}
    body.update((name, getattr(action, name)) for name in ACTION_FIELDS)
    return Record(hash=sha256(canonical(body)), **body)


def head_bytes(node_id: str, seq: int, hash_: str) -> bytes:
    """What a chain head's signature covers."""
    return HEAD_CONTEXT + canonical({"node_id": node_id, "seq": seq, "hash": hash_})
