"""A node's Ed25519 identity: the key in the data directory, the node id derived from it.

The key is kept as PKCS#8 PEM (``cryptography``); signing and verifying go through libsodium
(PyNaCl), which does both in about half the time here (verify 56 vs 104 µs, sign 21 vs 33 µs)
and releases the GIL, so a batch verifies on two threads at once.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from nacl.bindings import crypto_sign, crypto_sign_open, crypto_sign_seed_keypair
from nacl.exceptions import BadSignatureError, CryptoError

KEY_FILE = "node.key"
SIGNATURE_BYTES = 64
PUBLIC_KEY_BYTES = 32


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
    _secret: bytes = field(init=False, repr=False)  # libsodium's 64-byte form of the key

    def __post_init__(self) -> None:
        seed = self.private_key.private_bytes(
            serialization.Encoding.Raw,
            serialization.PrivateFormat.Raw,
            serialization.NoEncryption(),
        )
        raw, secret = crypto_sign_seed_keypair(seed)
        object.__setattr__(self, "_secret", secret)
        object.__setattr__(self, "public_key", raw)
        object.__setattr__(self, "public_key_b64", _b64(raw))
        object.__setattr__(self, "node_id", node_id_for(raw))

    def sign(self, data: bytes) -> str:
        """Sign bytes; the signature as unpadded URL-safe base64."""
        return _b64(crypto_sign(data, self._secret)[:SIGNATURE_BYTES])

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
def origin_of(public_key_b64: str) -> tuple[str, bytes]:
    """The node id and raw bytes of an origin key (cached: a network has few nodes).

    Raises ValueError for a key that is not base64 of a 32-byte Ed25519 public key.
    """
    raw = unb64(public_key_b64)
    if len(raw) != PUBLIC_KEY_BYTES:
        raise ValueError("an Ed25519 public key has 32 bytes")
    return node_id_for(raw), raw


def verify_signature(public_key_b64: str, signature_b64: str, data: bytes) -> bool:
    """True when ``signature_b64`` is a valid signature of ``data`` by that key."""
    try:
        _, key = origin_of(public_key_b64)
        signature = unb64(signature_b64)
        if len(signature) != SIGNATURE_BYTES:
            return False
        crypto_sign_open(signature + data, key)
    except (BadSignatureError, CryptoError, ValueError):
        return False
    return True
