"""The Bus on NATS JetStream: one stream per network, one consumer per node."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg
from nats.errors import (
    BadSubscriptionError,
    ConnectionClosedError,
    NoServersError,
    SlowConsumerError,
)
from nats.errors import Error as NatsError
from nats.errors import TimeoutError as NatsTimeoutError
from nats.js import JetStreamContext
from nats.js.api import (
    AckPolicy,
    ConsumerConfig,
    DeliverPolicy,
)
from nats.js.errors import (
    NotFoundError,
)

from bzzz.errors import NetworkError
from bzzz.network import partitions, subjects
from bzzz.network.base import (
    BatchHandler,
    BusMessage,
    PeerHandler,
    PingHandler,
    RequestHandler,
    Stored,
)
from bzzz.network.deliveries import NodeConsumer, drain, still_wanted, to_bus
from bzzz.network.nats_auth import NatsAuth, redact_url
from bzzz.network.nats_calls import RETRYABLE, retried
from bzzz.network.node_requests import NodeRequests
from bzzz.network.peer_board import PeerBoard

logger = logging.getLogger(__name__)

T = TypeVar("T")


def stream_name(network: str) -> str:
    """The JetStream stream that holds a network's log."""
    return "BZZZ_" + network.replace("-", "_").upper()


def _seq(msg: Msg) -> int:
    return int(msg.metadata.sequence.stream)


def _reason(exc: BaseException) -> str:
    """Why a connection failed, in words a user acts on (a refused login above all)."""
    text = str(exc) or type(exc).__name__
    if "authorization" in text.lower() or "authentication" in text.lower():
        return "the server refused this node's credentials: check BZZZ_NATS_CREDS or the URL"
    return text


PENDING_MSGS_LIMIT = 100_000
FOLLOW_RETRY = 2.0


class JetStreamBus:
    """Publishes to and consumes from the network's JetStream stream."""

    def __init__(
        self,
        servers: Sequence[str],
        network: str,
        *,
        replicas: int = 1,
        publish_timeout: float = 10.0,
        batch_size: int = 512,
        name: str = "bzzz",
        create: bool = True,
        auth: NatsAuth | None = None,
    ) -> None:
        self._servers = list(servers)
        self._auth = auth or NatsAuth()
        self._network = network
        self._replicas = replicas
        self._publish_timeout = publish_timeout
        self._batch_size = batch_size
        self._name = name
        self._create = create
        self._nc: NatsClient | None = None
        self._js: JetStreamContext | None = None
        self._closing = False
        self._refused = asyncio.Event()
        self.stream = stream_name(network)
        # How many streams the servers spread projects over (their subject mapping; 1: none),
        # asked when the bus starts.
        self.partitions = 1
        # The client's buffer of undelivered deliveries; past it, nats-py drops them.
        self.pending_msgs_limit = PENDING_MSGS_LIMIT
        # Why the node's consumer was made again, how often: deliveries the client dropped, or
        # the consumer lost with its server (the latest consume's counts).
        self.consumer_restarts: dict[str, int] = {"dropped": 0, "lost": 0}
        # Subscriptions the client dropped deliveries of (nats-py's slow consumer error).
        self._dropped_sids: set[int] = set()
        self._board = PeerBoard(self._jetstream, network, replicas=replicas, within=publish_timeout)
        self._requests = NodeRequests(self._client, network)

    @property
    def connected(self) -> bool:
        """True while the NATS connection is up."""
        return self._nc is not None and self._nc.is_connected

    def _jetstream(self) -> JetStreamContext:
        if self._js is None:
            raise RuntimeError("bus not started")
        return self._js

    async def start(self) -> None:
        """Connect (retrying forever in the background once connected) and ensure the stream."""
        if self._nc is not None:
            raise RuntimeError("bus already started")
        nc = NatsClient()
        self._refused = asyncio.Event()
        try:
            await self._connect(nc)
        except (TimeoutError, NoServersError, OSError, NatsError) as exc:
            # The URLs may carry a user and password: only their redacted form is shown.
            shown = [redact_url(url) for url in self._servers]
            raise NetworkError(
                f"cannot reach NATS at {', '.join(shown)} ({_reason(exc)})",
                details={"servers": shown},
            ) from exc
        self._nc = nc
        self._js = nc.jetstream(timeout=self._publish_timeout)
        try:
            self.partitions = await partitions.probe(nc)
        except (ValueError, NatsError, TimeoutError) as exc:
            await nc.close()
            self._nc = self._js = None
            raise NetworkError(f"cannot tell how the servers partition projects: {exc}") from exc
        if self._create:
            await self._ensure_stream()

    async def _connect(self, nc: NatsClient) -> None:
        """Connect; a server that refuses the credentials fails it at once (no endless retry)."""
        connecting = asyncio.ensure_future(
            nc.connect(
                servers=self._servers,
                name=self._name,
                error_cb=self._on_error,
                disconnected_cb=self._on_disconnected,
                reconnected_cb=self._on_reconnected,
                max_reconnect_attempts=-1,
                reconnect_time_wait=0.5,  # type: ignore[arg-type]  # nats-py says int; a float works
                connect_timeout=5,
                allow_reconnect=True,
                **self._auth.connect_options(),
            )
        )
        refused = asyncio.ensure_future(self._refused.wait())
        try:
            await asyncio.wait({connecting, refused}, return_when=asyncio.FIRST_COMPLETED)
        except BaseException:
            connecting.cancel()  # a cancelled start leaves no connection retrying behind
            raise
        finally:
            refused.cancel()
        if connecting.done():
            connecting.result()
            return
        connecting.cancel()
        with contextlib.suppress(asyncio.CancelledError, NatsError):
            await connecting
        await nc.close()
        raise NatsError("Authorization Violation")

    async def _retried(self, failure: str, call: Callable[[], Awaitable[T]]) -> T:
        """``call``, made again on a retryable error until publish_timeout."""
        return await retried(failure, call, self._publish_timeout)

    async def _ensure_stream(self) -> None:
        await partitions.ensure_log(
            self._jetstream(), self._network, self.stream, self.partitions, self._replicas
        )

    async def close(self) -> None:
        """Drain nothing, just close: unacked messages are redelivered to the durable later."""
        self._closing = True
        nc, self._nc, self._js = self._nc, None, None
        self._board.forget()
        self._requests.forget()
        if nc is not None and not nc.is_closed:
            await nc.close()

    async def publish(self, subject: str, data: bytes, msg_id: str) -> int:
        """Store one envelope, retrying with the same id until stored or publish_timeout; its
        sequence in the log (a partition's envelope once the servers copied it in)."""
        return await self.logged(await self.store(subject, data, msg_id), subject)

    def logs_directly(self, subject: str) -> bool:
        """Whether the log itself takes ``subject`` (not a project partition's stream)."""
        return self.partitions <= 1 or subjects.project_token(self._network, subject) is None

    async def logged(self, stored: Stored, subject: str) -> int:
        """The log's sequence of an envelope ``store`` returned: a partition's is the log's
        once the servers copy it in (waited for, until publish_timeout)."""
        if stored.stream is None:
            return stored.seq
        wanted = (stored.stream, stored.seq)

        async def find() -> int:
            return await partitions.log_sequence_of(
                self._jetstream(), self.stream, self._network, subject, wanted
            )

        failure = "the log did not take the partition's envelope"
        try:
            # The walk back is bounded too: many envelopes on the subject after ours.
            async with asyncio.timeout(2 * self._publish_timeout):
                return await self._retried(failure, find)
        except TimeoutError as exc:
            raise NetworkError(failure, details={"stream": stored.stream}) from exc

    async def store(self, subject: str, data: bytes, msg_id: str) -> Stored:
        """``publish``, and whether the stream held ``msg_id`` already (its duplicate window)."""
        js = self._jetstream()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._publish_timeout
        delay = 0.05
        while True:
            remaining = deadline - loop.time()
            try:
                ack = await js.publish(
                    subject,
                    data,
                    timeout=max(0.5, min(remaining, 2.0)),
                    headers={"Nats-Msg-Id": msg_id},
                )
            except RETRYABLE as exc:
                if loop.time() + delay >= deadline:
                    raise NetworkError(
                        "the network did not store the message in time; it was not posted",
                        details={"timeout_seconds": self._publish_timeout},
                    ) from exc
                logger.warning("publish of %s not acknowledged (%r); retrying", msg_id, exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 1.0)
                continue
            except NatsError as exc:
                raise NetworkError(
                    f"the network refused the message ({exc}); it was not posted"
                ) from exc
            # A project's partition took it: the log holds it once the servers copy it in.
            # (Another network's stream, a federated post's, is that network's log.)
            partition = ack.stream if partitions.is_partition(self._network, ack.stream) else None
            return Stored(int(ack.seq), duplicate=bool(ack.duplicate), stream=partition)

    async def consume(
        self,
        durable: str,
        handler: BatchHandler,
        start_seq: int = 1,
        filters: Sequence[str] | None = None,
    ) -> None:
        """Deliver batches from the node's push consumer (:class:`NodeConsumer`); ack after
        the handler.

        ``filters`` become the consumer's filter subjects (nats-server 2.10+): the server
        delivers only the projects this node serves, and skips the rest of the log.
        """
        consumer = NodeConsumer(
            self._jetstream,
            self.stream,
            durable,
            list(filters) if filters else [f"bzzz.{self._network}.>"],
            batch_size=self._batch_size,
            pending_msgs_limit=self.pending_msgs_limit,
            dropped_sids=self._dropped_sids,
        )
        self.consumer_restarts = consumer.restarts
        await consumer.run(handler, start_seq)

    async def last_sequence(self, subject: str | None = None) -> int:
        """The stream's last sequence; with ``subject``, the newest on a subject it matches.

        Asked again on a retryable error until publish_timeout, then NetworkError.
        """
        return await self._retried(
            "the network did not say where its log ends",
            lambda: self._last_sequence_once(subject),
        )

    async def _last_sequence_once(self, subject: str | None) -> int:
        if subject is None:
            info = await self._jetstream().stream_info(self.stream)
            return int(info.state.last_seq)
        try:
            raw = await self._jetstream().get_last_msg(self.stream, subject)
        except NotFoundError:
            return 0
        return int(raw.seq or 0)

    def _filters(self, kind: str, key: str | None) -> list[str]:
        return subjects.kind_filters(self._network, kind, key)

    async def read_kind(
        self,
        kind: str,
        key: str | None = None,
        *,
        before_seq: int | None = None,
        after_seq: int | None = None,
    ) -> list[BusMessage]:
        """Every stored envelope of subjects ``bzzz.<network>.<kind>.<key or >>``, in log order,
        below ``before_seq`` and above ``after_seq`` when given (the CLI derives the admitted
        nodes from these alone). The read's consumer starts after ``after_seq``: what lies
        before it is never fetched.

        A read consumer of a just-made replicated stream may answer "service unavailable" until
        its leader is elected: the read is made again until publish_timeout.
        """
        return await self._retried(
            f"the network did not return its {kind} envelopes",
            lambda: self._read_kind_once(kind, key, before_seq, after_seq),
        )

    async def _read_kind_once(
        self, kind: str, key: str | None, before_seq: int | None, after_seq: int | None
    ) -> list[BusMessage]:
        if before_seq is not None and after_seq is not None and before_seq <= after_seq + 1:
            return []
        msgs = await self._scan(self._filters(kind, key), before_seq, after_seq=after_seq)
        return [to_bus(msg) for msg in msgs]

    async def removed_count(self) -> int:
        """The stream's last sequence less the messages it holds (its purged, deleted and
        aged-out sequences). Asked again on a retryable error until publish_timeout."""

        async def once() -> int:
            state = (await self._jetstream().stream_info(self.stream)).state
            return int(state.last_seq) - int(state.messages)

        return await self._retried("the network did not say what its log let go of", once)

    async def _scan(
        self,
        filters: list[str],
        before_seq: int | None,
        *,
        headers_only: bool = False,
        after_seq: int | None = None,
    ) -> list[Msg]:
        """The log's messages on ``filters``, in order, below ``before_seq`` and above
        ``after_seq`` when given."""
        js = self._jetstream()
        start = after_seq + 1 if after_seq else None
        sub = await js.pull_subscribe(
            filters[0],
            stream=self.stream,
            config=ConsumerConfig(
                filter_subjects=filters,
                deliver_policy=DeliverPolicy.ALL
                if start is None
                else DeliverPolicy.BY_START_SEQUENCE,
                opt_start_seq=start,
                ack_policy=AckPolicy.NONE,
                inactive_threshold=30.0,
                headers_only=headers_only or None,
            ),
        )
        try:
            pending = int((await sub.consumer_info()).num_pending or 0)
            if before_seq is not None:
                # No more than the sequences between can be wanted: fetch no further.
                pending = min(pending, max(0, before_seq - (start or 1)))
            found: list[Msg] = []
            while len(found) < pending:
                batch = min(256, pending - len(found))
                found.extend(await sub.fetch(batch, timeout=self._publish_timeout))
                if before_seq is not None and found and _seq(found[-1]) >= before_seq:
                    break
            if before_seq is not None:
                found = [msg for msg in found if _seq(msg) < before_seq]
            return found
        finally:
            with contextlib.suppress(ConnectionClosedError, NatsTimeoutError, BadSubscriptionError):
                await sub.unsubscribe()
            if sub._consumer is not None:
                # An ephemeral consumer outlives its last read by inactive_threshold (30 s):
                # loops of reads (as_of replays make several each) piled them up on the
                # stream. Removed at once; one the server lost is gone anyway.
                with contextlib.suppress(*RETRYABLE, NatsError):
                    await js.delete_consumer(self.stream, sub._consumer)

    async def get(self, seq: int) -> BusMessage | None:
        """The envelope at ``seq`` (a direct stream read), None when it is not there."""
        try:
            raw = await self._jetstream().get_msg(self.stream, seq)
        except NotFoundError:
            return None
        except (*RETRYABLE, NatsError) as exc:
            raise NetworkError(f"the network did not return entry {seq} ({exc!r})") from exc
        if raw.data is None or raw.subject is None:
            return None
        return BusMessage(subject=raw.subject, data=raw.data, seq=int(raw.seq or seq))

    async def purge(self, kind: str, key: str | None = None, *, before_seq: int) -> None:
        """JetStream purge of the subject filter up to (not including) ``before_seq``, and of
        the project partitions' copies of what it removes (``partitions.source_bounds``)."""
        if before_seq <= 1:
            return  # seq 0 (or none) would purge the whole subject: nothing lies below 1
        filters = self._filters(kind, key)
        try:
            bounds = [(self.stream, before_seq)]
            if self.partitions > 1:
                below = await self._scan(filters, before_seq, headers_only=True)
                found = partitions.source_bounds([msg.headers for msg in below], self._network)
                held = await partitions.held_bounds(self._jetstream(), found)
                bounds = [*held.items(), *bounds]
            for stream, bound in bounds:
                for subject in filters:
                    await self._jetstream().purge_stream(stream, seq=bound, subject=subject)
        except (*RETRYABLE, NatsError) as exc:
            raise NetworkError(f"the network did not purge {kind} ({exc!r})") from exc

    async def delete(self, seq: int) -> None:
        """Remove one stored envelope (JetStream's message delete, which erases it), and its
        project partition's copy first: what is left behind is found again by a rerun."""
        js = self._jetstream()
        try:
            raw = await js.get_msg(self.stream, seq)
            await partitions.delete_copy(js, self._network, raw)
            await js.delete_msg(self.stream, seq)
        except NotFoundError:
            return
        except (*RETRYABLE, NatsError) as exc:
            raise NetworkError(f"the network did not delete entry {seq} ({exc!r})") from exc

    # --- the peer board (network/peer_board.py) ----------------------------------------------

    async def put_peer(self, key: str, data: bytes) -> None:
        """Replace an entry of the board (retried until publish_timeout)."""
        await self._board.put(key, data)

    async def delete_peer(self, key: str) -> None:
        """Take an entry off the board (a delete marker: its watchers see it go)."""
        await self._board.delete(key)

    async def peer_entries(self) -> dict[str, bytes]:
        """The board as it is now: key -> newest heartbeat."""
        return await self._board.entries()

    async def watch_peers(self, handler: PeerHandler, patterns: Sequence[str] = (">",)) -> None:
        """The board's entries under ``patterns``, then their changes, until cancelled."""
        await self._board.watch(handler, patterns)

    # --- node to node (network/node_requests.py) -------------------------------------------

    def _client(self) -> NatsClient:
        if self._nc is None:
            raise RuntimeError("bus not started")
        return self._nc

    @property
    def client(self) -> NatsClient:
        """The bus's NATS connection, for what else lives on the servers (the agent directory)."""
        return self._client()

    async def serve_pings(self, node_id: str, handler: PingHandler) -> None:
        """Answer pings on the node's subject (core NATS; resubscribed on reconnect)."""
        await self._requests.serve_pings(node_id, handler)

    async def ping(self, node_id: str, data: bytes, within: float) -> bytes:
        """One request/reply to the node's ping subject."""
        return await self._requests.ping(node_id, data, within)

    async def serve_requests(
        self, subjects: Sequence[str], queue: str, handler: RequestHandler
    ) -> None:
        """Answer requests on ``subjects`` in the queue group ``queue`` (core NATS)."""
        await self._requests.serve(subjects, queue, handler)

    def new_inbox(self) -> str:
        """A reply subject of this bus's own for one ``request(reply=…)``."""
        return self._requests.new_inbox()

    async def request(
        self, subject: str, data: bytes, within: float, *, reply: str | None = None
    ) -> bytes | None:
        """One request/reply; None when nats-server says no one listens."""
        return await self._requests.request(subject, data, within, reply=reply)

    # --- other networks --------------------------------------------------------------------

    async def follow(self, network: str, kinds: Sequence[str], handler: BatchHandler) -> None:
        """Read another network's subjects of ``kinds`` from its start (an ordered consumer)."""
        js = self._jetstream()
        # Both layouts, every project: a follower reads the whole network's agents.
        filters = [f for kind in kinds for f in subjects.kind_filters(network, kind)]
        while True:
            still_wanted()
            try:
                sub = await js.subscribe(
                    filters[0],
                    stream=stream_name(network),
                    ordered_consumer=True,
                    config=ConsumerConfig(
                        deliver_policy=DeliverPolicy.ALL, filter_subjects=filters
                    ),
                    pending_msgs_limit=100_000,
                )
                break
            except (NotFoundError, *RETRYABLE):
                # That network has no log yet (no node of it has started) or NATS is away.
                logger.info("network %s has no log to follow yet; waiting", network)
                await asyncio.sleep(FOLLOW_RETRY)
        try:
            while True:
                still_wanted()
                first = await sub.next_msg(timeout=None)
                batch = [first, *drain(sub, self._batch_size - 1)]
                await handler([to_bus(msg) for msg in batch])
        finally:
            with contextlib.suppress(ConnectionClosedError, NatsTimeoutError):
                await sub.unsubscribe()

    async def _on_error(self, exc: Exception) -> None:
        if isinstance(exc, SlowConsumerError):
            self._dropped_sids.add(exc.sid)  # the consumer's loop starts it again
        if self._nc is None and "authorization violation" in str(exc).lower():
            self._refused.set()  # refused before ever connecting: start() gives up
            return
        logger.warning("NATS: %s", exc)

    async def _on_disconnected(self) -> None:
        if not self._closing:
            logger.warning("NATS disconnected; reconnecting")

    async def _on_reconnected(self) -> None:
        logger.info("NATS reconnected")
