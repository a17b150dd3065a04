"""GET /api/v1/events: the subscription event types as a server-sent-event stream.

A stream is a subscription of the caller's (``bzzz_subscribe`` without a webhook), so it sees
exactly what a subscription of that caller would: the event types asked for (``types=``),
inside the filter address (``address=``), and only events of the caller's projects (the
subscription carries the principal's projects, as the projector's fan-out filters them).

Event ids are ``<subscription_id>:<n>``, ``n`` the row id of the event in the node's
``subscription_events`` table: ordered, and kept in the store, so a client that reconnects with
``Last-Event-ID`` gets every event it missed, in order, then the live ones. The first message of
a new stream (``stream_open``) carries ``<subscription_id>:0``, so even a stream that saw no event
can be resumed (a resumed stream keeps its subscription's types and address; ``types=`` and
``address=`` of the reconnecting request are not applied again). The projector's listener only
wakes the streams; they read the store, the streams woken together in one query
(:mod:`bzzz.api.stream_reads`).

A stream's subscription outlives a dropped connection by :data:`RESUME_SECONDS`, then is removed
(when any stream opens or closes on the node, and at the latest when the node stops, which ends
every subscription without a webhook).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from starlette.requests import Request
from starlette.responses import StreamingResponse

from bzzz import domain
from bzzz.api.handlers import Operation, caller_of, query_of
from bzzz.api.rest import API
from bzzz.api.stream_reads import BatchedReads
from bzzz.errors import BzzzError, InvalidParameters
from bzzz.eventlog import Caller
from bzzz.node import Node
from bzzz.schemas import SubscribeInput

RESUME_SECONDS = 300.0
PING_SECONDS = 15.0
BATCH = 100
OPEN_EVENT = "stream_open"


class EventsQuery(BaseModel):
    """GET /api/v1/events."""

    model_config = ConfigDict(extra="forbid")

    types: list[str] = Field(
        default_factory=lambda: list(domain.EVENT_TYPES), min_length=1, max_length=16
    )
    address: str | None = Field(None, min_length=1, max_length=1024)
    max_events: int | None = Field(
        None, ge=1, le=100_000, description="end the stream after this many messages"
    )


def parse_event_id(value: str) -> tuple[str, int]:
    """``<subscription_id>:<n>`` from a Last-Event-ID header; INVALID_PARAMETERS otherwise."""
    sub_id, _, number = value.strip().rpartition(":")
    if not sub_id.startswith("sub-") or not number.isdigit() or len(sub_id) > 64:
        raise InvalidParameters(
            "Last-Event-ID must be an event id of this stream ('<subscription_id>:<n>')",
            details={"field": "Last-Event-ID"},
        )
    return sub_id, int(number)


def sse(event_id: str, event: str, data: dict[str, Any]) -> bytes:
    """One server-sent event."""
    body = json.dumps(data, separators=(",", ":"))
    return f"id: {event_id}\nevent: {event}\ndata: {body}\n\n".encode()


class EventStreams:
    """The node's open event streams: woken after each commit, their subscriptions reaped."""

    def __init__(self, node: Node) -> None:
        self.node = node
        self._wakers: dict[str, set[asyncio.Event]] = {}
        self._detached: dict[str, float] = {}
        self._reads = BatchedReads(node.db, BATCH)
        node.projector.add_listener(self._on_events)

    async def _on_events(self, matched: Sequence[tuple[domain.Subscription, domain.Event]]) -> None:
        for sub_id in {sub.id for sub, _ in matched}:
            for waker in self._wakers.get(sub_id, ()):
                waker.set()

    async def open(self, request: Request) -> StreamingResponse:
        """Start (or resume, with Last-Event-ID) a stream for the caller."""
        query = query_of(request, EventsQuery, lists=("types",))
        caller = caller_of(request)
        resumed = request.headers.get("last-event-id")
        await self._reap()
        if resumed:
            sub_id, after = parse_event_id(resumed)
            await self.node.subscriptions.events(caller, sub_id, limit=1)  # the caller's own?
            first = None
        else:
            sub_id, after = await self._subscribe(caller, query), 0
            first = sse(f"{sub_id}:0", OPEN_EVENT, {"subscription_id": sub_id})
        return StreamingResponse(
            self._run(sub_id, after, first, query.max_events),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        )

    async def _subscribe(self, caller: Caller, query: EventsQuery) -> str:
        params = SubscribeInput(event_types=query.types, filter_address=query.address)
        made = await self.node.subscriptions.subscribe(caller, params)
        return str(made["subscription_id"])

    async def _run(
        self, sub_id: str, after: int, first: bytes | None, limit: int | None
    ) -> AsyncIterator[bytes]:
        waker = asyncio.Event()
        self._wakers.setdefault(sub_id, set()).add(waker)
        self._detached.pop(sub_id, None)
        left = limit if limit is not None else -1
        try:
            if first is not None:
                yield first
                left -= 1
            while left != 0:
                waker.clear()
                rows = await self._after(sub_id, after)
                for row_id, event_type, payload in rows[: left if left > 0 else None]:
                    after = row_id
                    left -= 1
                    yield sse(f"{sub_id}:{row_id}", event_type, payload)
                if rows or left == 0:
                    continue
                try:
                    async with asyncio.timeout(PING_SECONDS):
                        await waker.wait()
                except TimeoutError:
                    yield b": ping\n\n"
        finally:
            self._detach(sub_id, waker)

    def _detach(self, sub_id: str, waker: asyncio.Event) -> None:
        wakers = self._wakers.get(sub_id, set())
        wakers.discard(waker)
        if not wakers:
            self._wakers.pop(sub_id, None)
            self._detached[sub_id] = time.monotonic()

    async def _after(self, sub_id: str, after: int) -> list[tuple[int, str, dict[str, Any]]]:
        return await self._reads.after(sub_id, after)

    async def _reap(self) -> None:
        """Remove the subscriptions of streams gone longer than RESUME_SECONDS."""
        now = time.monotonic()
        gone = [s for s, at in self._detached.items() if now - at > RESUME_SECONDS]
        for sub_id in gone:
            self._detached.pop(sub_id, None)
            # Already removed (unsubscribed, or its node stopped): nothing to reap.
            with contextlib.suppress(BzzzError):
                await self.node.subscriptions.remove(sub_id, None, "event stream closed")


def operations(node: Node) -> list[Operation]:
    """The event-stream route."""
    streams = EventStreams(node)

    async def events(request: Request) -> StreamingResponse:
        return await streams.open(request)

    return [
        Operation(
            "GET",
            f"{API}/events",
            "Server-sent events of the subscription event types (resumable: Last-Event-ID)",
            events,
            "events",
            query=EventsQuery,
            errors=(400, 403, 429, 503),
            stream=True,
            headers=("Last-Event-ID",),
        )
    ]
