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
wakes the streams; they read the store.

Reads are shared: the streams woken by one commit ask for their rows together, and one query
(``_SharedReads``) answers them all, so a node with many open streams (a dashboard in many
browsers) makes one query per commit, not one per stream. Rows are sent as stored (the event's
JSON text is not decoded and encoded again), a batch of them in one chunk.

A stream's subscription outlives a dropped connection by :data:`RESUME_SECONDS`, then is removed
(when any stream opens or closes on the node, and at the latest when the node stops, which ends
every subscription without a webhook).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any, cast

from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import Table, TextClause
from sqlalchemy import text as sql_text
from starlette.requests import Request
from starlette.responses import StreamingResponse

from bzzz import domain
from bzzz.api.handlers import API, Operation, caller_of, query_of
from bzzz.errors import BzzzError, InvalidParameters
from bzzz.eventlog import Caller
from bzzz.node.core import Node
from bzzz.schemas import MAX_EVENT_TYPES, SubscribeInput
from bzzz.store.database import Database
from bzzz.store.models import EventRow, SealedJSON

# (row id, event type, the event's JSON text) of one stored event.
Row = tuple[int, str, str]

RESUME_SECONDS = 300.0
PING_SECONDS = 15.0
BATCH = 100
OPEN_EVENT = "stream_open"


class EventsQuery(BaseModel):
    """GET /api/v1/events."""

    model_config = ConfigDict(extra="forbid")

    types: list[str] = Field(
        default_factory=lambda: list(domain.EVENT_TYPES), min_length=1, max_length=MAX_EVENT_TYPES
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


def sse(event_id: str, event: str, data: dict[str, Any] | str) -> bytes:
    """One server-sent event (``data``: a JSON object, or its JSON text on one line)."""
    body = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    return f"id: {event_id}\nevent: {event}\ndata: {body}\n\n".encode()


_PAYLOAD_TYPE = cast(SealedJSON, cast(Table, EventRow.__table__).c.payload.type)


# The subscriptions one statement reads at most (two bound values each: SQLite's limit is far).
SUBSCRIPTIONS_A_QUERY = 400


@functools.lru_cache(maxsize=64)
def _since_each_sql(count: int) -> str:
    where = " OR ".join(f"(subscription_id = :s{i} AND id > :a{i})" for i in range(count))
    return (
        f"SELECT id, subscription_id, event_type, payload FROM {EventRow.__tablename__} "
        f"WHERE {where} ORDER BY id LIMIT :limit"
    )


def _since_each(count: int) -> TextClause:
    """Rows of ``count`` subscriptions, each after its own point (``:s<i>``, ``:a<i>``), in
    order, at most ``:limit``. Plain text: the statement a varying number of subscriptions
    makes is not built and compiled again for each read (that cost ~30 ms for 100 streams);
    each (subscription, id) range is one search of ix_subscription_events_sub."""
    return sql_text(_since_each_sql(count))


class _SharedReads:
    """One query for the reads the streams ask for together (those of one wake-up).

    A stream asks for its rows after ``after``; the asks that arrive before the query starts
    (every stream woken by the same commit runs before it) share it. Each stream gets its rows
    in order, and ``more`` when the shared query was cut at its limit: it asks again.
    """

    def __init__(self, db: Database) -> None:
        self._db = db
        self._asks: dict[str, list[tuple[int, asyncio.Future[tuple[list[Row], bool]]]]] = {}
        self._reader: asyncio.Task[None] | None = None

    async def after(self, sub_id: str, after: int) -> tuple[list[Row], bool]:
        """This subscription's rows after ``after`` (at most BATCH), and whether more wait."""
        future: asyncio.Future[tuple[list[Row], bool]] = asyncio.get_running_loop().create_future()
        self._asks.setdefault(sub_id, []).append((after, future))
        if self._reader is None:
            self._reader = asyncio.create_task(self._read(), name="bzzz-stream-reads")
        return await future

    async def _read(self) -> None:
        try:
            while self._asks:
                asks, self._asks = self._asks, {}
                try:
                    rows, cut = await self._query(asks)
                except Exception as exc:  # a fan-out boundary: every waiting stream hears of it
                    for waiting in asks.values():
                        for _, future in waiting:
                            if not future.done():
                                future.set_exception(exc)
                    continue
                self._answer(asks, rows, cut)
        finally:
            self._reader = None

    async def _query(
        self, asks: dict[str, list[tuple[int, Any]]]
    ) -> tuple[dict[str, list[Row]], bool]:
        # Each subscription from its own point: one bound for all (the lowest point of any)
        # let a subscription's old rows fill the limit, and a stream far ahead of a fresh one
        # got nothing, asked again, and got nothing again, for ever.
        points = [(sub_id, min(after for after, _ in waiting)) for sub_id, waiting in asks.items()]
        limit = BATCH * len(asks)
        fetched: list[Any] = []
        async with self._db.session() as session:
            for start in range(0, len(points), SUBSCRIPTIONS_A_QUERY):
                part = points[start : start + SUBSCRIPTIONS_A_QUERY]
                binds: dict[str, Any] = {"limit": limit}
                for i, (sub_id, after) in enumerate(part):
                    binds[f"s{i}"], binds[f"a{i}"] = sub_id, after
                result = await session.execute(_since_each(len(part)), binds)
                fetched.extend(result.all())
        cut = len(fetched) >= limit
        fetched = sorted(fetched, key=lambda row: row[0])[:limit]
        rows: dict[str, list[Row]] = {}
        for row_id, sub_id, event_type, payload in fetched:
            # Sealed in the store: the box opens to the payload's JSON text, sent as is.
            text = _PAYLOAD_TYPE.opened_text(payload, self._db.keyring)
            rows.setdefault(sub_id, []).append((row_id, event_type, text))
        return rows, cut

    @staticmethod
    def _answer(
        asks: dict[str, list[tuple[int, asyncio.Future[tuple[list[Row], bool]]]]],
        rows: dict[str, list[Row]],
        cut: bool,
    ) -> None:
        for sub_id, waiting in asks.items():
            mine = rows.get(sub_id, [])
            for after, future in waiting:
                if future.done():  # its stream closed meanwhile
                    continue
                newer = [row for row in mine if row[0] > after]
                future.set_result((newer[:BATCH], cut or len(newer) > BATCH))


class EventStreams:
    """The node's open event streams: woken after each commit, their subscriptions reaped."""

    def __init__(self, node: Node) -> None:
        self.node = node
        self._wakers: dict[str, set[asyncio.Event]] = {}
        self._detached: dict[str, float] = {}
        self._reads = _SharedReads(node.db)
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
                rows, more = await self._reads.after(sub_id, after)
                rows = rows[: left if left > 0 else None]
                if rows:
                    after = rows[-1][0]
                    left -= len(rows)
                    yield b"".join(sse(f"{sub_id}:{n}", kind, text) for n, kind, text in rows)
                # A commit since the read set the waker again: the wait below returns at once.
                if more or left == 0:
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
