"""A node's Ed25519 identity: the key in the data directory, the node id derived from it."""

from __future__ import annotations

import base64
import functools
import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

KEY_FILE = "node.key"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def node_id_for(public_key: bytes) -> str:
    """The node id that belongs to a raw 32-byte Ed25519 public key."""
    digest = hashlib.sha256(public_key).digest()
    return "node-" + base64.b32encode(digest).decode().lower().rstrip("=")[:20]


@dataclass(frozen=True, slots=True)
class NodeIdentity:
    """This node's signing key; its public forms are derived once, as every envelope uses them."""

    private_key: Ed25519PrivateKey
    public_key: bytes = field(init=False)
    public_key_b64: str = field(init=False)
    node_id: str = field(init=False)

    def __post_init__(self) -> None:
        raw = self.private_key.public_key().public_bytes(
            serialization.Encoding.Raw, serialization.PublicFormat.Raw
        )
        object.__setattr__(self, "public_key", raw)
        object.__setattr__(self, "public_key_b64", _b64(raw))
        object.__setattr__(self, "node_id", node_id_for(raw))

    def sign(self, data: bytes) -> str:
        """Sign bytes; the signature as unpadded URL-safe base64."""
        return _b64(self.private_key.sign(data))

    @classmethod
    def generate(cls) -> NodeIdentity:
        """A fresh identity (tests, benchmarks)."""
        return cls(Ed25519PrivateKey.generate())

    @classmethod
    def load_or_create(cls, directory: Path) -> NodeIdentity:
        """Load the key from ``directory``, creating it (mode 0600) the first time."""
        path = directory / KEY_FILE
        if path.exists():
            key = serialization.load_pem_private_key(path.read_bytes(), password=None)
            if not isinstance(key, Ed25519PrivateKey):
                raise ValueError(f"{path} does not hold an Ed25519 key")
            return cls(key)
        directory.mkdir(parents=True, exist_ok=True)
        key = Ed25519PrivateKey.generate()
        pem = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(pem)
        return cls(key)


@functools.lru_cache(maxsize=4096)
def origin_of(public_key_b64: str) -> tuple[str, Ed25519PublicKey]:
    """The node id and key object of an origin key (cached: a network has few nodes).

    Raises ValueError for a key that is not base64 of a 32-byte Ed25519 public key.
    """
    raw = unb64(public_key_b64)
    return node_id_for(raw), Ed25519PublicKey.from_public_bytes(raw)


def verify_signature(public_key_b64: str, signature_b64: str, data: bytes) -> bool:
    """True when ``signature_b64`` is a valid signature of ``data`` by that key."""
    try:
        _, key = origin_of(public_key_b64)
        key.verify(unb64(signature_b64), data)
    except (InvalidSignature, ValueError):
        return False
    return True
