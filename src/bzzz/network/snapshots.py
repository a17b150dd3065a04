"""Snapshots in the network's object store: a node's projected state, signed, sealed, verified.

Bucket ``bzzz_snap_<network>`` (a JetStream object store, ``bzzz.stream_replicas``
replicas), one object per set of served projects (``covers``: ``*`` or the sorted names,
``shop,ops``): each new snapshot replaces the one before, so the newest wins. An object is
one line of JSON — the header, signed by the writing node — then the body:

- header: format, network, covers, ``sequence`` (the log sequence the rows are the state
  of), ``writer`` and ``writer_key`` (the node and its Ed25519 key), ``created``, ``rows``,
  ``size`` and ``sha256`` of the body, ``key_id`` (the network key that seals the body, or
  None with encryption off);
- body: the rows as the store dumps them (``store/snapshot.py``: a compressed SQLite file),
  sealed as one box under the network key (bound to network, covers and sequence), so no
  plaintext of the store's sealed columns reaches the object store.

``open_snapshot`` refuses (``SnapshotRefused`` with a reason) a snapshot of another network
or project set, a header whose signature does not verify or whose key is not the writer's, a
writer the caller does not admit, and a body whose hash or seal does not match. The object's
description repeats sequence and writer unsigned: a cheap hint of what is there, never
trusted. ``InMemorySnapshots`` is the same store for unit tests.

An object is untrusted before it is opened, its size included: ``get`` takes the reader's
limit (``snapshots.max_bytes``), refuses an object whose metadata says it is bigger before a
chunk of it is read (``too_large``), then reads it a chunk at a time (one direct get a chunk),
counting, so an object whose metadata lies about its size stops at the first chunk past it
(``malformed``) and one whose chunks do not hash to its digest is refused (``bad_hash``).
Memory holds at most the limit.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import io
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

from bzzz.errors import NetworkError
from bzzz.network.envelope import canonical_bytes
from bzzz.network.identity import NodeIdentity, origin_of, verify_signature
from bzzz.network.sealing import Keyring, SealError, is_sealed

if TYPE_CHECKING:
    from nats.aio.client import Client as NatsClient
    from nats.js.api import ObjectInfo, RawStreamMsg
    from nats.js.object_store import ObjectStore

# 2: the body is a SQLite file of the rows (1 was JSON lines).
FORMAT = 2
_CHUNK = 128 * 1024


def snapshot_bucket(network: str) -> str:
    """The object store bucket that holds a network's snapshots."""
    return f"bzzz_snap_{network}"


def object_name(covers: str) -> str:
    """The object of one set of served projects (``*`` or ``a,b``)."""
    return f"snapshot.{covers}"


class SnapshotRefused(Exception):
    """A snapshot that must not be loaded; ``reason`` is counted and shown."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Hint:
    """What an object's (unsigned) description says is there: enough to skip a write."""

    sequence: int
    writer: str


@dataclass(frozen=True, slots=True)
class Snapshot:
    """An opened, verified snapshot."""

    header: dict[str, Any]
    packed: bytes  # the store's dump, opened

    @property
    def sequence(self) -> int:
        """The log sequence its rows are the state of."""
        return int(self.header["sequence"])

    @property
    def writer(self) -> str:
        """The node that wrote it."""
        return str(self.header["writer"])


class SnapshotStore(Protocol):
    """Where a network's snapshots are kept, one object per set of served projects."""

    async def put(self, name: str, data: bytes, hint: Hint) -> None:
        """Store ``data`` as ``name`` (replacing what was there)."""
        ...

    async def get(self, name: str, max_bytes: int) -> bytes | None:
        """The object's bytes; None when there is none.

        SnapshotRefused("too_large") when it is bigger than ``max_bytes``, known before it is
        read.
        """
        ...

    async def hint(self, name: str) -> Hint | None:
        """What the object's description says; None when there is none (or it says nothing)."""
        ...


def _aad(network: str, covers: str, sequence: int) -> bytes:
    return f"bzzz snapshot|{network}|{covers}|{sequence}".encode()


def seal_snapshot(
    identity: NodeIdentity,
    network: str,
    covers: str,
    sequence: int,
    packed: bytes,
    rows: int,
    keyring: Keyring | None,
    *,
    now: datetime | None = None,
) -> bytes:
    """The object of a snapshot: signed header line, then the compressed, sealed body."""
    aad = _aad(network, covers, sequence)
    body = packed if keyring is None else keyring.seal(packed, aad).encode()
    header = {
        "format": FORMAT,
        "network": network,
        "covers": covers,
        "sequence": sequence,
        "writer": identity.node_id,
        "writer_key": identity.public_key_b64,
        "created": (now or datetime.now(UTC)).isoformat(),
        "rows": rows,
        "size": len(body),
        "sha256": hashlib.sha256(body).hexdigest(),
        "key_id": keyring.current.id if keyring is not None else None,
    }
    signed = {"header": header, "sig": identity.sign(canonical_bytes(header))}
    return json.dumps(signed, separators=(",", ":")).encode() + b"\n" + body


def read_header(data: bytes) -> tuple[dict[str, Any], str, bytes]:
    """(header, signature, body) of an object; SnapshotRefused("malformed") when it is none."""
    line, newline, body = data.partition(b"\n")
    try:
        signed = json.loads(line)
        header, sig = signed["header"], signed["sig"]
    except (ValueError, KeyError, TypeError) as exc:
        raise SnapshotRefused("malformed") from exc
    if not newline or not isinstance(header, dict) or not isinstance(sig, str):
        raise SnapshotRefused("malformed")
    return header, sig, body


def open_snapshot(
    data: bytes,
    network: str,
    covers: str,
    keyring: Keyring | None,
    admits: Callable[[str, str], bool],
) -> Snapshot:
    """Verify and open an object; SnapshotRefused says why it must not be loaded.

    ``admits(public key, node id)``: whether the writer is admitted to the network now.
    """
    header, sig, body = read_header(data)
    _check_header(header, sig, network, covers, admits)
    if hashlib.sha256(body).hexdigest() != header.get("sha256"):
        raise SnapshotRefused("bad_hash")
    return Snapshot(header, _opened(body, header, network, covers, keyring))


def _check_header(
    header: dict[str, Any],
    sig: str,
    network: str,
    covers: str,
    admits: Callable[[str, str], bool],
) -> None:
    if header.get("format") != FORMAT or not isinstance(header.get("sequence"), int):
        raise SnapshotRefused("malformed")
    if header.get("network") != network:
        raise SnapshotRefused("wrong_network")
    if header.get("covers") != covers:
        raise SnapshotRefused("wrong_projects")
    key, writer = header.get("writer_key"), header.get("writer")
    if not isinstance(key, str) or not isinstance(writer, str):
        raise SnapshotRefused("malformed")
    try:
        node_id, _ = origin_of(key)
    except ValueError as exc:
        raise SnapshotRefused("bad_key") from exc
    if node_id != writer:
        raise SnapshotRefused("origin_mismatch")
    if not verify_signature(key, sig, canonical_bytes(header)):
        raise SnapshotRefused("bad_signature")
    if not admits(key, writer):
        raise SnapshotRefused("not_admitted")


def _opened(
    body: bytes, header: dict[str, Any], network: str, covers: str, keyring: Keyring | None
) -> bytes:
    if header.get("key_id") is None:
        return body
    text = body.decode("ascii", errors="replace")
    if keyring is None or not is_sealed(text):
        raise SnapshotRefused("sealed")
    try:
        return keyring.open(text, _aad(network, covers, int(header["sequence"])))
    except SealError as exc:
        raise SnapshotRefused(exc.reason) from exc


def _digest_of(text: str) -> bytes:
    """The SHA-256 an object's metadata declares (``SHA-256=<base64url>``); b"" if none."""
    encoded = text.removeprefix("SHA-256=").removeprefix("sha-256=")
    try:
        return base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4))
    except (binascii.Error, ValueError):
        return b""


def _hint_text(hint: Hint) -> str:
    return json.dumps({"sequence": hint.sequence, "writer": hint.writer})


def _hint_of(text: str | None) -> Hint | None:
    try:
        said = json.loads(text or "")
        return Hint(int(said["sequence"]), str(said["writer"]))
    except (ValueError, KeyError, TypeError):
        return None


class InMemorySnapshots:
    """Snapshots in a dict (unit tests; the in-memory bus holds one)."""

    def __init__(self) -> None:
        self.objects: dict[str, tuple[bytes, Hint]] = {}

    async def put(self, name: str, data: bytes, hint: Hint) -> None:
        """Replace the object."""
        self.objects[name] = (data, hint)

    async def get(self, name: str, max_bytes: int) -> bytes | None:
        """The object's bytes."""
        found = self.objects.get(name)
        if found is not None and len(found[0]) > max_bytes:
            raise SnapshotRefused("too_large")
        return found[0] if found is not None else None

    async def hint(self, name: str) -> Hint | None:
        """The object's description."""
        found = self.objects.get(name)
        return found[1] if found is not None else None


class JetStreamSnapshots:
    """Snapshots in the network's JetStream object store (see the module docstring)."""

    def __init__(
        self, nc: NatsClient, network: str, *, replicas: int = 1, timeout: float = 10.0
    ) -> None:
        self._js = nc.jetstream(timeout=timeout)
        self.bucket = snapshot_bucket(network)
        self._replicas = replicas
        self._store: ObjectStore | None = None
        self._direct = True

    async def _bound(self) -> ObjectStore:
        from nats.js.api import ObjectStoreConfig, StorageType
        from nats.js.errors import BucketNotFoundError, NotFoundError

        if self._store is None:
            try:
                self._store = await self._js.object_store(self.bucket)
            except (BucketNotFoundError, NotFoundError):
                self._store = await self._js.create_object_store(
                    self.bucket,
                    ObjectStoreConfig(
                        bucket=self.bucket,
                        description="BZZZ snapshots",
                        storage=StorageType.FILE,
                        replicas=self._replicas,
                    ),
                )
        return self._store

    async def put(self, name: str, data: bytes, hint: Hint) -> None:
        """Replace the object (chunks of 128 KB); NetworkError when it was not stored."""
        from nats.js.api import ObjectMeta, ObjectMetaOptions

        meta = ObjectMeta(
            name=name,
            description=_hint_text(hint),
            options=ObjectMetaOptions(max_chunk_size=_CHUNK),
        )
        try:
            await (await self._bound()).put(name, data, meta=meta)
        except Exception as exc:  # nats-py raises many kinds; all mean "not stored"
            raise NetworkError(f"the snapshot {name} was not stored ({exc!r})") from exc

    async def get(self, name: str, max_bytes: int) -> bytes | None:
        """The object's bytes, its size checked first and its chunks read one at a time.

        None when there is none; SnapshotRefused ``too_large`` (from the metadata, nothing
        read), ``malformed`` (its chunks are not what its metadata says) or ``bad_hash``.
        """
        from nats.js.errors import NotFoundError, ObjectDeletedError, ObjectNotFoundError

        try:
            info = await (await self._bound()).get_info(name)
        except (NotFoundError, ObjectNotFoundError, ObjectDeletedError):
            return None
        except Exception as exc:  # nats-py raises many kinds; all mean "not read"
            raise NetworkError(f"the snapshot {name} could not be read ({exc!r})") from exc
        size = info.size or 0
        if size > max_bytes:
            raise SnapshotRefused("too_large")
        if info.is_link() or not info.nuid or not info.digest:
            raise SnapshotRefused("malformed")
        try:
            return await self._chunks(info, size)
        except SnapshotRefused:
            raise
        except Exception as exc:  # nats-py raises many kinds; all mean "not read"
            raise NetworkError(f"the snapshot {name} could not be read ({exc!r})") from exc

    async def _chunks(self, info: ObjectInfo, size: int) -> bytes:
        """The object's chunks in order, never more than ``size`` bytes, hashed as they come.

        Not nats-py's ``ObjectStore.get``: it reads every chunk its consumer pushes, whatever
        the metadata said (and an ordered consumer buffers what it is sent ahead of the reader).
        """
        from nats.js.errors import NotFoundError

        subject = f"$O.{self.bucket}.C.{info.nuid}"
        buffer = io.BytesIO()
        digest = hashlib.sha256()
        seq, read = 1, 0
        while read < size:
            try:
                msg = await self._chunk(subject, seq)
            except NotFoundError:
                raise SnapshotRefused("malformed") from None  # fewer bytes than it says
            data = msg.data or b""
            read += len(data)
            if not data or read > size:
                raise SnapshotRefused("malformed")  # more bytes than it says
            buffer.write(data)
            digest.update(data)
            seq = int(msg.seq or 0) + 1
        if digest.digest() != _digest_of(info.digest or ""):
            raise SnapshotRefused("bad_hash")
        return buffer.getvalue()

    async def _chunk(self, subject: str, seq: int) -> RawStreamMsg:
        """The first message on ``subject`` from ``seq`` on: a direct get, one chunk."""
        from nats.errors import NoRespondersError
        from nats.js.errors import NotFoundError

        stream = f"OBJ_{self.bucket}"
        if self._direct:
            try:
                return await self._js.get_msg(
                    stream, seq=seq, subject=subject, next=True, direct=True
                )
            except NoRespondersError:
                self._direct = False  # a bucket made without direct gets
            except NotFoundError:
                pass  # a replica behind the leader: ask the leader
        return await self._js.get_msg(stream, seq=seq, subject=subject, next=True)

    async def hint(self, name: str) -> Hint | None:
        """The object's description; None when there is no object."""
        from nats.js.errors import NotFoundError, ObjectDeletedError, ObjectNotFoundError

        try:
            info = await (await self._bound()).get_info(name)
        except (NotFoundError, ObjectNotFoundError, ObjectDeletedError):
            return None
        except Exception as exc:  # nats-py raises many kinds; all mean "not read"
            raise NetworkError(f"the snapshot {name} could not be read ({exc!r})") from exc
        return _hint_of(info.description)
