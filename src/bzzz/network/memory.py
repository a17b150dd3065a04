"""An in-memory Bus for unit tests: one process, no durability beyond the object's life."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Sequence

from bzzz.errors import NetworkError
from bzzz.network import subjects
from bzzz.network.base import (
    BatchHandler,
    BusMessage,
    PeerHandler,
    PingHandler,
    RequestHandler,
    Stored,
    Unanswered,
    subject_matches,
)
from bzzz.network.directory import InMemoryDirectory
from bzzz.network.forward import ONCE_TTL
from bzzz.network.once import InMemoryOnce
from bzzz.network.snapshots import InMemorySnapshots


class InMemoryBus:
    """A list of messages and a cursor per durable consumer."""

    def __init__(self, batch_size: int = 256) -> None:
        # Position n holds sequence n + 1; a purged or deleted entry leaves None in its place.
        self._log: list[BusMessage | None] = []
        self._ids: dict[str, int] = {}
        self._cursors: dict[str, int] = {}
        self._changed = asyncio.Condition()
        self._batch_size = batch_size
        self._peers: dict[str, bytes] = {}
        self._peer_watchers: list[asyncio.Queue[tuple[str, bytes | None]]] = []
        self._pingers: dict[str, PingHandler] = {}
        # (subject pattern, queue, handler) of every request subscription, in order.
        self._responders: list[tuple[str, str, RequestHandler]] = []
        self._turn = 0
        self._inboxes = itertools.count(1)
        # Each durable consumer's filter subjects (as a server's consumer info shows them).
        self.filters: dict[str, list[str]] = {}
        self.closed = False
        # The network's agent directory, shared by the nodes on this bus.
        self.directory = InMemoryDirectory()
        # The network's snapshots (its object store), shared likewise.
        self.snapshots = InMemorySnapshots()
        # The forwarded request ids the network has used, shared likewise.
        self.once = InMemoryOnce(ONCE_TTL)

    async def start(self) -> None:
        """Nothing to connect to."""

    async def close(self) -> None:
        """Forget nothing: a closed in-memory bus can be consumed again (like a restart)."""
        self.closed = True

    async def publish(self, subject: str, data: bytes, msg_id: str) -> int:
        """Append unless ``msg_id`` was seen; return the sequence."""
        return (await self.store(subject, data, msg_id)).seq

    async def store(self, subject: str, data: bytes, msg_id: str) -> Stored:
        """Append unless ``msg_id`` was seen; where the log holds it."""
        if msg_id in self._ids:
            return Stored(self._ids[msg_id], duplicate=True)
        seq = len(self._log) + 1
        self._log.append(BusMessage(subject=subject, data=data, seq=seq))
        self._ids[msg_id] = seq
        async with self._changed:
            self._changed.notify_all()
        return Stored(seq)

    async def consume(
        self,
        durable: str,
        handler: BatchHandler,
        start_seq: int = 1,
        filters: Sequence[str] | None = None,
    ) -> None:
        """Hand out batches from ``start_seq`` (only subjects ``filters`` match, when given),
        waiting for new messages."""
        self.filters[durable] = list(filters or [])
        self._cursors[durable] = max(0, start_seq - 1)
        while True:
            start = self._cursors.get(durable, 0)
            async with self._changed:
                await self._changed.wait_for(lambda: len(self._log) > self._cursors.get(durable, 0))
            window = self._log[start : start + self._batch_size]
            batch = [
                msg
                for msg in window
                if msg is not None
                and (not filters or any(subject_matches(f, msg.subject) for f in filters))
            ]
            if batch:
                await handler(batch)
            self._cursors[durable] = start + len(window)

    def logs_directly(self, subject: str) -> bool:
        """Always: one log, no partitions."""
        return True

    async def last_sequence(self, subject: str | None = None) -> int:
        """The newest sequence (on a subject ``subject`` matches, when given)."""
        if subject is None:
            return len(self._log)
        found = [m.seq for m in self._log if m is not None and subject_matches(subject, m.subject)]
        return max(found, default=0)

    def _matches(self, msg: BusMessage | None, kind: str, key: str | None) -> bool:
        if msg is None:
            return False
        parsed = subjects.kind_and_key(msg.subject)
        return parsed is not None and parsed[0] == kind and (key is None or parsed[1] == key)

    async def read_kind(
        self,
        kind: str,
        key: str | None = None,
        *,
        before_seq: int | None = None,
        after_seq: int | None = None,
    ) -> list[BusMessage]:
        """Stored entries of that kind (and key), in order, below ``before_seq`` and above
        ``after_seq`` if given."""
        limit = len(self._log) if before_seq is None else min(len(self._log), before_seq - 1)
        start = max(0, after_seq or 0)
        return [
            m
            for m in self._log[start : max(start, limit)]
            if m is not None and self._matches(m, kind, key)
        ]

    async def removed_count(self) -> int:
        """The sequences purged or deleted so far."""
        return sum(1 for m in self._log if m is None)

    async def get(self, seq: int) -> BusMessage | None:
        """The entry at ``seq``, None when purged or beyond the end."""
        return self._log[seq - 1] if 1 <= seq <= len(self._log) else None

    async def purge(self, kind: str, key: str | None = None, *, before_seq: int) -> None:
        """Drop the entries of that kind (and key) below ``before_seq``."""
        for index in range(min(len(self._log), max(0, before_seq - 1))):
            if self._matches(self._log[index], kind, key):
                self._log[index] = None

    async def delete(self, seq: int) -> None:
        """Drop the entry at ``seq``."""
        if 1 <= seq <= len(self._log):
            self._log[seq - 1] = None

    async def put_peer(self, key: str, data: bytes) -> None:
        """Replace an entry of the board and tell the watchers."""
        self._peers[key] = data
        for queue in self._peer_watchers:
            queue.put_nowait((key, data))

    async def delete_peer(self, key: str) -> None:
        """Take an entry off the board and tell the watchers."""
        if self._peers.pop(key, None) is not None:
            for queue in self._peer_watchers:
                queue.put_nowait((key, None))

    async def peer_entries(self) -> dict[str, bytes]:
        """The board as it is now."""
        return dict(self._peers)

    async def watch_peers(self, handler: PeerHandler, patterns: Sequence[str] = (">",)) -> None:
        """Current entries, then changes, of the keys ``patterns`` match, until cancelled."""

        def wanted(key: str) -> bool:
            return any(subject_matches(pattern, key) for pattern in patterns)

        queue: asyncio.Queue[tuple[str, bytes | None]] = asyncio.Queue()
        self._peer_watchers.append(queue)
        try:
            for key, data in list(self._peers.items()):
                if wanted(key):
                    await handler(key, data)
            while True:
                key, entry = await queue.get()
                if wanted(key):
                    await handler(key, entry)
        finally:
            self._peer_watchers.remove(queue)

    async def serve_pings(self, node_id: str, handler: PingHandler) -> None:
        """Answer the node's pings until cancelled."""
        self._pingers[node_id] = handler
        try:
            await asyncio.Event().wait()
        finally:
            if self._pingers.get(node_id) is handler:
                del self._pingers[node_id]

    async def ping(self, node_id: str, data: bytes, within: float) -> bytes:
        """The answer of the node's handler; an unanswered ping fails at once (no one waits)."""
        handler = self._pingers.get(node_id)
        answer = await handler(data) if handler is not None else None
        if answer is None:
            raise NetworkError(f"node {node_id} did not answer the ping")
        return answer

    async def serve_requests(
        self, subjects: Sequence[str], queue: str, handler: RequestHandler
    ) -> None:
        """Answer requests on ``subjects`` until cancelled (one member of ``queue``)."""
        entries = [(subject, queue, handler) for subject in subjects]
        self._responders.extend(entries)
        try:
            await asyncio.Event().wait()
        finally:
            for entry in entries:
                self._responders.remove(entry)

    def new_inbox(self) -> str:
        """A reply subject no other request has."""
        return f"_INBOX.memory.{next(self._inboxes)}"

    async def request(
        self, subject: str, data: bytes, within: float, *, reply: str | None = None
    ) -> bytes | None:
        """The answer of one matching responder (taken in turn); None when none matches."""
        matching = [h for pattern, _, h in self._responders if subject_matches(pattern, subject)]
        if not matching:
            return None
        self._turn += 1
        handler = matching[self._turn % len(matching)]
        try:
            async with asyncio.timeout(within):
                answer = await handler(data, reply or self.new_inbox())
        except TimeoutError as exc:
            raise Unanswered(f"no answer on {subject} within {within:g}s") from exc
        if answer is None:
            raise Unanswered(f"no answer on {subject}")
        return answer

    async def follow(self, network: str, kinds: Sequence[str], handler: BatchHandler) -> None:
        """One in-memory bus holds one network: following another finds nothing, forever."""
        await asyncio.Event().wait()
