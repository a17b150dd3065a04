"""An in-memory Bus for unit tests: one process, no durability beyond the object's life."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from bzzz.network.base import BatchHandler, BusMessage, PeerHandler, Stored


class InMemoryBus:
    """A list of messages and a cursor per durable consumer."""

    def __init__(self, batch_size: int = 256) -> None:
        self._log: list[BusMessage] = []
        self._ids: dict[str, int] = {}
        self._cursors: dict[str, int] = {}
        self._changed = asyncio.Condition()
        self._batch_size = batch_size
        self._peers: dict[str, bytes] = {}
        self._peer_watchers: list[asyncio.Queue[tuple[str, bytes | None]]] = []
        self.closed = False

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

    async def consume(self, durable: str, handler: BatchHandler, start_seq: int = 1) -> None:
        """Hand out batches from ``start_seq``, waiting for new messages."""
        self._cursors[durable] = max(0, start_seq - 1)
        while True:
            start = self._cursors.get(durable, 0)
            async with self._changed:
                await self._changed.wait_for(lambda: len(self._log) > self._cursors.get(durable, 0))
            batch = self._log[start : start + self._batch_size]
            await handler(batch)
            self._cursors[durable] = start + len(batch)

    async def last_sequence(self) -> int:
        """The newest sequence."""
        return len(self._log)

    async def put_peer(self, node_id: str, data: bytes) -> None:
        """Replace a node's board entry and tell the watchers."""
        self._peers[node_id] = data
        for queue in self._peer_watchers:
            queue.put_nowait((node_id, data))

    async def peer_entries(self) -> dict[str, bytes]:
        """The board as it is now."""
        return dict(self._peers)

    async def watch_peers(self, handler: PeerHandler) -> None:
        """Current entries, then changes, until cancelled."""
        queue: asyncio.Queue[tuple[str, bytes | None]] = asyncio.Queue()
        self._peer_watchers.append(queue)
        try:
            for node_id, data in list(self._peers.items()):
                await handler(node_id, data)
            while True:
                node_id, entry = await queue.get()
                await handler(node_id, entry)
        finally:
            self._peer_watchers.remove(queue)

    async def follow(self, network: str, kinds: Sequence[str], handler: BatchHandler) -> None:
        """One in-memory bus holds one network: following another finds nothing, forever."""
        await asyncio.Event().wait()
