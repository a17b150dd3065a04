"""Content sealing: the network data key, its keyring, and AEAD boxes that name their key.

Content (messages, tasks, memories, summaries, webhook bodies, SLURP events, escalation
notices, model prompts and replies, knowledge) is sealed before it leaves the process: in the
envelopes of the network's log (``network/envelope.py``) and in the store's content columns
(``store/models.py``, ``Sealed*`` column types). Addresses, ids, roles, capabilities and
statuses stay clear, so lookups stay fast.

A sealed value is text: ``bz1.<key id>.<base64url(nonce || AES-256-GCM ciphertext)>``. The key
id is the first 16 hex digits of a SHA-256 over the key: it names the key without revealing
it, and two networks that generated keys apart never share an id. The associated data binds
a box to where it belongs (an envelope's id and type, a table column), so a box moved
elsewhere does not open.

Keys: the network's nodes share a **keyring** (every key ever used, the newest one used for
new writes). It comes from ``BZZZ_NETWORK_KEY`` (one or more base64 keys, comma separated,
oldest first) and from a keyring file (``encryption.key_file``, by default
``<data dir>/keys/network.json``, mode 0600 in a 0700 directory). A node with neither
generates one key into that file (the embedded default: every local process on the data
directory shares it); other nodes of the network must be given the same key.

Rotation travels the log: ``bzzz keys rotate`` publishes a ``keys.added`` envelope carrying
the new key, itself sealed under the current key. Every node, in log order, adds the key to
its keyring file and seals its later writes with it; older keys keep reading. A node that
joins later needs only the key the log starts with. This limits how much one key seals; it
does not take a leaked key away (the log holds later keys sealed under it): after a leak,
give every node a new key out of band (``BZZZ_NETWORK_KEY``) and rebuild the log.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import json
import logging
import os
import secrets
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from bzzz.config import Settings
from bzzz.errors import ConfigError

logger = logging.getLogger(__name__)

PREFIX = "bz1."
KEY_BYTES = 32
NONCE_BYTES = 12
KEYS_DIR = "keys"
KEYRING_FILE = "network.json"
# The envelope type that carries a rotated key over the log.
KEY_ADDED = "keys.added"
KEYS_KIND = "keys"  # subject kind: bzzz.<network>.keys.<key id>
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class SealError(Exception):
    """A box that does not open: unknown key id, or it was altered (``reason`` says which)."""

    def __init__(self, reason: str, key_id: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.key_id = key_id


class KeyMissing(ConfigError):
    """The network's content is sealed under a key this node does not hold (start refused)."""


def key_id(secret: bytes) -> str:
    """The public name of a key: 16 hex digits of SHA-256 over a label and the key."""
    return hashlib.sha256(b"bzzz network key\x00" + secret).hexdigest()[:16]


def new_secret() -> bytes:
    """A fresh random key (rotation)."""
    return secrets.token_bytes(KEY_BYTES)


def first_secret() -> bytes:
    """The key a node generates when none is configured (tests replace it with a shared one)."""
    return secrets.token_bytes(KEY_BYTES)


def decode_secret(text: str) -> bytes:
    """A 32-byte key from base64 (standard or URL-safe); ConfigError otherwise."""
    cleaned = text.strip()
    try:
        raw = base64.urlsafe_b64decode(cleaned.replace("+", "-").replace("/", "_") + "==")
    except (binascii.Error, ValueError) as exc:
        raise ConfigError("the network key is not base64") from exc
    if len(raw) != KEY_BYTES:
        raise ConfigError(f"the network key must be {KEY_BYTES} bytes (base64), not {len(raw)}")
    return raw


def encode_secret(secret: bytes) -> str:
    """The base64 form of a key (what BZZZ_NETWORK_KEY and the keyring file hold)."""
    return base64.b64encode(secret).decode()


def is_sealed(value: object) -> bool:
    """Whether ``value`` is a sealed box."""
    return isinstance(value, str) and value.startswith(PREFIX)


def box_key_id(box: str) -> str:
    """The key id a box names."""
    return box[len(PREFIX) :].split(".", 1)[0]


@dataclass(frozen=True, slots=True)
class NetworkKey:
    """One key of the keyring: its id, the secret and when it was made."""

    id: str
    secret: bytes
    created_at: datetime

    @classmethod
    def of(cls, secret: bytes, created_at: datetime | None = None) -> NetworkKey:
        """A key with its derived id."""
        return cls(key_id(secret), secret, created_at or _EPOCH)


def _private_dir(path: Path) -> None:
    path.mkdir(parents=True, exist_ok=True)
    path.chmod(0o700)


def _write_private(path: Path, text: str) -> None:
    """Replace ``path`` at once with a 0600 file."""
    _private_dir(path.parent)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.replace(tmp, path)


def read_keyring_file(path: Path) -> list[NetworkKey]:
    """The keys of a keyring file (none when it does not exist)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return []
    except (OSError, ValueError) as exc:
        raise ConfigError(f"the keyring file {path} cannot be read: {exc}") from exc
    keys = []
    for entry in data.get("keys", []):
        secret = decode_secret(str(entry["key"]))
        created = datetime.fromisoformat(str(entry.get("created_at") or _EPOCH.isoformat()))
        keys.append(NetworkKey.of(secret, created))
    return keys


def _keyring_text(keys: Iterable[NetworkKey]) -> str:
    entries = [
        {"id": k.id, "key": encode_secret(k.secret), "created_at": k.created_at.isoformat()}
        for k in keys
    ]
    return json.dumps({"keys": entries}, indent=2) + "\n"


class Keyring:
    """The network's keys: every one opens what it sealed; the newest seals new content.

    Thread-safe for reading (the projector opens envelopes on two threads); adding a key
    replaces the whole table at once. One per node: nothing here is process-global, so nodes
    with different keys share a test process.
    """

    def __init__(self, keys: Iterable[NetworkKey], *, path: Path | None = None) -> None:
        self.path = path
        self._keys: dict[str, NetworkKey] = {}
        self._aeads: dict[str, AESGCM] = {}
        self._current: NetworkKey | None = None
        self._mtime: float | None = None
        self._lock = threading.Lock()
        for key in keys:
            self._put(key)

    def _put(self, key: NetworkKey) -> bool:
        if key.id in self._keys:
            return False
        aeads = dict(self._aeads)
        aeads[key.id] = AESGCM(key.secret)
        keys = dict(self._keys)
        keys[key.id] = key
        self._keys, self._aeads = keys, aeads
        if self._current is None or key.created_at >= self._current.created_at:
            self._current = key
        return True

    @property
    def current(self) -> NetworkKey:
        """The key new content is sealed with."""
        if self._current is None:
            raise ConfigError("the keyring holds no key")
        return self._current

    def all_keys(self) -> list[NetworkKey]:
        """Every key, oldest first."""
        return sorted(self._keys.values(), key=lambda k: k.created_at)

    def holds(self, kid: str) -> bool:
        """Whether the keyring has the key named ``kid``."""
        return kid in self._keys

    def add(self, key: NetworkKey) -> bool:
        """Add a key (it seals new content from now on if it is the newest); True if new.

        With a keyring file, the key is written there too, so a restart keeps it.
        """
        with self._lock:
            if not self._put(key):
                return False
            if self.path is not None:
                self._merge_file()
        logger.info("network key %s added to the keyring", key.id)
        return True

    def _merge_file(self) -> None:
        assert self.path is not None
        known = {k.id: k for k in read_keyring_file(self.path)}
        for key in self._keys.values():
            known.setdefault(key.id, key)
        _write_private(self.path, _keyring_text(sorted(known.values(), key=lambda k: k.created_at)))
        with contextlib.suppress(OSError):
            self._mtime = self.path.stat().st_mtime

    def reload(self) -> bool:
        """Read keys another process added to the keyring file (``bzzz keys rotate``)."""
        if self.path is None:
            return False
        try:
            mtime = self.path.stat().st_mtime
        except OSError:
            return False
        if mtime == self._mtime:
            return False
        with self._lock:
            self._mtime = mtime
            added = [self._put(k) for k in read_keyring_file(self.path)]
        return any(added)

    # --- boxes --------------------------------------------------------------------------------

    def seal(self, plain: bytes, aad: bytes) -> str:
        """A box of ``plain`` under the current key, bound to ``aad``."""
        key = self.current
        nonce = os.urandom(NONCE_BYTES)
        sealed = self._aeads[key.id].encrypt(nonce, plain, aad)
        body = base64.urlsafe_b64encode(nonce + sealed).decode().rstrip("=")
        return f"{PREFIX}{key.id}.{body}"

    def open(self, box: str, aad: bytes) -> bytes:
        """The plain bytes of a box; SealError when its key is unknown or it was altered."""
        kid, _, body = box[len(PREFIX) :].partition(".")
        aead = self._aeads.get(kid)
        if aead is None and self.reload():
            aead = self._aeads.get(kid)
        if aead is None:
            raise SealError("unknown_key", kid)
        try:
            raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
            return aead.decrypt(raw[:NONCE_BYTES], raw[NONCE_BYTES:], aad)
        except (InvalidTag, binascii.Error, ValueError) as exc:
            raise SealError("bad_seal", kid) from exc

    def seal_json(self, value: Any, aad: bytes) -> str:
        """A box of a JSON value."""
        return self.seal(json.dumps(value, separators=(",", ":")).encode(), aad)

    def open_json(self, box: str, aad: bytes) -> Any:
        """The JSON value of a box."""
        return json.loads(self.open(box, aad))


def key_payload(key: NetworkKey) -> dict[str, str]:
    """The payload of a ``keys.added`` envelope (sealed under the current key on the log)."""
    return {
        "key_id": key.id,
        "key": encode_secret(key.secret),
        "created_at": key.created_at.isoformat(),
    }


def key_from_payload(payload: dict[str, Any]) -> NetworkKey:
    """The key a ``keys.added`` payload carries; ValueError when its id does not match it."""
    try:
        secret = decode_secret(str(payload["key"]))
    except ConfigError as exc:
        raise ValueError(exc.message) from exc
    created = datetime.fromisoformat(str(payload["created_at"]))
    if created.tzinfo is None:
        raise ValueError("created_at must carry a time zone")
    key = NetworkKey.of(secret, created)
    if key.id != payload["key_id"]:
        raise ValueError("key_id does not name the key")
    return key


def missing_key_message(kid: str | None, keyring: Keyring | None) -> str:
    """The one line a node says when the log's content is sealed under a key it lacks."""
    held = ", ".join(k.id for k in keyring.all_keys()) if keyring is not None else "none"
    return (
        f"this node cannot open the network's content: it is sealed under network key {kid}, "
        f"which this node does not hold (it holds: {held}); give it the network's key with "
        "BZZZ_NETWORK_KEY or encryption.key_file"
    )


def load_keyring(
    data_dir: Path,
    *,
    env_keys: Iterable[str] = (),
    key_file: Path | None = None,
    create: bool = True,
) -> Keyring:
    """The node's keyring: configured keys plus the keyring file's; one generated if none."""
    path = (key_file or data_dir / KEYS_DIR / KEYRING_FILE).expanduser()
    configured = [NetworkKey.of(decode_secret(text)) for text in env_keys if text.strip()]
    # Keys given in the environment are older than any key the log added (oldest first).
    configured = [
        NetworkKey(k.id, k.secret, datetime.fromtimestamp(i, UTC)) for i, k in enumerate(configured)
    ]
    keyring = Keyring([*configured, *read_keyring_file(path)], path=path)
    with contextlib.suppress(OSError):
        keyring._mtime = path.stat().st_mtime
    if not keyring.all_keys() and create:
        keyring.add(NetworkKey.of(first_secret(), datetime.now(UTC)))
        logger.info("generated network key %s in %s", keyring.current.id, path)
    return keyring


def keyring_of(settings: Settings, *, create: bool = True) -> Keyring | None:
    """The network keyring; generated in the data directory if none is given and ``create``.

    None with encryption off, or when there is no key and ``create`` is false (a CLI
    command reading a store that was never sealed).
    """
    enc = settings.encryption
    if not enc.enabled:
        return None
    ring = load_keyring(
        settings.node.data_dir.expanduser(),
        env_keys=enc.env_keys(),
        key_file=enc.key_file,
        create=create,
    )
    return ring if ring.all_keys() else None
