"""The node's side of its consumer of the log: delivering, acknowledging, starting again.

``NodeConsumer`` runs the node's consumer: one R1 consumer in the memory of one server (the
engine handles them by the thousand; a replicated consumer per node costs every server of a
cluster a raft group per node). It is made afresh from the store's next sequence whenever it
can no longer be trusted to deliver everything: deliveries the client dropped, or the consumer
lost with its server. ``Acks`` paces the server with few acknowledgements (AckPolicy.ALL);
``until_gap`` finds where the consumer's own sequence jumps, the mark of dropped deliveries;
``Unreceived`` finds deliveries lost with nothing after them to show a gap.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

from nats.aio.msg import Msg
from nats.errors import BadSubscriptionError, ConnectionClosedError
from nats.errors import Error as NatsError
from nats.errors import TimeoutError as NatsTimeoutError
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
from nats.js.errors import APIError, NotFoundError

from bzzz.network.base import BatchHandler, BusMessage

logger = logging.getLogger(__name__)

ACK_EVERY = 1_000
ACK_AFTER = 0.2
# The server sends again what a node has not acknowledged this long after delivery. The node
# finds deliveries a dropped connection lost itself (a gap in the consumer's sequence, or
# ``Unreceived`` when nothing came after them), so this is only a last resort, and long: a node
# applying fewer than MAX_ACK_PENDING / ACK_WAIT envelopes a second would be sent each window
# twice (at 60 s, the saturated nodes of the 100-node, million-agent harness were, overflowed
# their clients' buffers and made their consumers again and again).
ACK_WAIT = 600.0
# An idle node acknowledges its newest handled delivery again this often: a lost ack would
# otherwise hold a full window until ACK_WAIT.
ACK_AGAIN = 5.0
# The server sends a node at most this many messages it has not acknowledged.
MAX_ACK_PENDING = 20_000
# How long the consumer waits for a delivery before it looks for dropped ones.
DROP_CHECK = 1.0
# After this long without a delivery the node asks the server whether its consumer still
# exists: a consumer in one server's memory is lost with that server, and then nothing comes.
CONSUMER_CHECK = 5.0
# Between attempts to make the consumer again while the cluster cannot (an election).
RESUBSCRIBE_RETRY = 1.0


class Acks:
    """Acknowledges a durable consumer's deliveries a few at a time.

    Acks only pace the server (``max_ack_pending``); where a node resumes comes from its store.
    With ``AckPolicy.ALL`` one ack covers everything before it, so the newest handled message
    is acknowledged every ``ACK_EVERY`` messages and ``ACK_AFTER`` seconds after it was
    handled: an ack per batch cost every lone post one more send to the server. An idle
    consumer acknowledges its newest again every ``ACK_AGAIN`` seconds (a lost ack is
    repaired without the server's ``ACK_WAIT``).
    """

    def __init__(self) -> None:
        self._newest: Msg | None = None
        self._acked: Msg | None = None
        self._count = 0

    async def handled(self, msg: Msg, count: int) -> None:
        """Note a handled batch ending at ``msg``; acknowledge now if many are waiting."""
        self._newest = msg
        self._count += count
        if self._count >= ACK_EVERY:
            await self.flush()

    async def flush(self) -> None:
        """Acknowledge everything handled so far."""
        newest, self._newest, self._count = self._newest, None, 0
        if newest is not None:
            self._acked = newest
            await newest.ack()

    async def run(self) -> None:
        """Acknowledge what was handled, every ACK_AFTER seconds, until cancelled."""
        loop = asyncio.get_running_loop()
        last = loop.time()
        while True:
            await asyncio.sleep(ACK_AFTER)
            try:
                if self._newest is not None:
                    await self.flush()
                    last = loop.time()
                elif self._acked is not None and loop.time() - last >= ACK_AGAIN:
                    last = loop.time()
                    await _ack_again(self._acked)
            except (ConnectionClosedError, NatsError) as exc:
                # A lost ack costs nothing: a later one covers the same messages.
                logger.info("could not acknowledge the log's deliveries: %r", exc)


def still_wanted() -> None:
    """Raise CancelledError if this task was cancelled and a nats-py call swallowed it
    (``asyncio.wait_for`` on Python 3.11 can, when its answer comes with the cancellation):
    a loop that runs until cancelled (the node's consumer, a peer watch) would go on, and a
    stopping node would wait for it forever."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError


async def _ack_again(msg: Msg) -> None:
    """The same ack once more (nats-py's ``ack`` refuses a message acknowledged already)."""
    if msg.reply:
        await msg._client.publish(msg.reply)


class Unreceived:
    """Whether the server delivered messages this node never received.

    A connection that drops can lose deliveries; one after them shows a gap in the consumer's
    sequence (``until_gap``), but when none comes (a quiet project) only the consumer's own
    count tells: its last delivered sequence past what the node has handled, with nothing
    waiting in the client's buffer, seen twice unchanged with no delivery in between (once
    can be deliveries still on the wire of a busy machine; a count still moving, a server
    still sending).
    """

    def __init__(self) -> None:
        self._seen = 0
        self._delivered = 0

    def check(self, delivered: int, expected: int, buffered: bool) -> bool:
        """Note one look at the consumer (``delivered``: its last delivered sequence;
        ``expected``: the sequence of the next delivery the node awaits)."""
        if delivered < expected or buffered:
            self._seen = 0
        else:
            self._seen = self._seen + 1 if delivered == self._delivered else 1
        self._delivered = delivered
        return self._seen >= 2

    def reset(self) -> None:
        """A delivery came, or the consumer was made again."""
        self._seen = 0


def until_gap(batch: list[Msg], expected: int) -> tuple[list[Msg], bool]:
    """The messages of ``batch`` before the first gap in the consumer's sequence, and
    whether there is one (a redelivery, at or before ``expected``, is no gap)."""
    for index, msg in enumerate(batch):
        delivered = int(msg.metadata.sequence.consumer)
        if delivered > expected:
            return batch[:index], True
        expected = max(expected, delivered + 1)
    return batch, False


class NodeConsumer:
    """The node's push consumer on ``stream``: batches to a handler, in log order, each once.

    ``dropped_sids`` is where the client's error callback notes subscriptions whose deliveries
    it dropped (nats-py's slow consumer error). ``restarts`` counts why the consumer was made
    again: ``dropped`` deliveries (a gap, or delivered and never received) or a ``lost``
    consumer.
    """

    def __init__(
        self,
        js: Callable[[], JetStreamContext],
        stream: str,
        durable: str,
        filters: list[str],
        *,
        batch_size: int,
        pending_msgs_limit: int,
        dropped_sids: set[int],
    ) -> None:
        self._js = js
        self._stream = stream
        self._durable = durable
        self._filters = filters
        self._batch_size = batch_size
        self._pending_msgs_limit = pending_msgs_limit
        self._dropped_sids = dropped_sids
        self.restarts = {"dropped": 0, "lost": 0}

    async def run(self, handler: BatchHandler, start_seq: int) -> None:
        """Deliver from ``start_seq`` until cancelled; ack after the handler.

        A delivery the client dropped leaves a gap in the consumer's own sequence, and an ack
        of a later message (AckPolicy.ALL) would cover it for good: at a gap, or when the
        consumer is gone, it starts again just after the last message handled. A consumer its
        server rebuilt empty (a quick restart) delivers again from where it was first made:
        a first delivery below ``start_seq`` makes it again too.
        """
        loop = asyncio.get_running_loop()
        acks = Acks()
        unreceived = Unreceived()
        sub = await self._subscribe(start_seq)
        try:
            async with asyncio.TaskGroup() as group:
                group.create_task(acks.run(), name="bzzz-bus-acks")
                expected = 1  # the consumer's sequence of its next delivery
                heard = loop.time()
                unanswered = 0  # checks in a row the server did not answer
                while True:
                    still_wanted()
                    try:
                        batch = [
                            await sub.next_msg(timeout=DROP_CHECK),
                            *drain(sub, self._batch_size - 1),
                        ]
                        heard = loop.time()
                        unreceived.reset()
                    except NatsTimeoutError:
                        batch = []  # nothing came: a drop at the tail of a burst shows now
                    rewound = bool(batch) and _rewound(batch[0], start_seq)
                    handled, gap = ([], False) if rewound else until_gap(batch, expected)
                    if handled:
                        await handler([to_bus(msg) for msg in handled])
                        await acks.handled(handled[-1], len(handled))
                        expected = int(handled[-1].metadata.sequence.consumer) + 1
                        start_seq = max(start_seq, int(handled[-1].metadata.sequence.stream) + 1)
                    why = "lost" if rewound else "dropped" if gap or self._dropped(sub) else None
                    if why is None and loop.time() - heard >= CONSUMER_CHECK:
                        delivered = await self._delivered(sub)
                        heard = loop.time()
                        unanswered = unanswered + 1 if delivered is None else 0
                        # Gone, or twice no answer (one can be a busy server): made again.
                        if delivered is False or unanswered >= 2:
                            why = "lost"
                        elif delivered is not None and unreceived.check(
                            delivered, expected, not sub._pending_queue.empty()
                        ):
                            why = "dropped"
                    if why is not None:
                        self.restarts[why] += 1
                        logger.warning("%s; consuming again from sequence %d", _WHY[why], start_seq)
                        with contextlib.suppress(ConnectionClosedError, NatsError):
                            await acks.flush()
                        await _unsubscribe(sub)
                        self._dropped_sids.discard(sub._sub._id)
                        sub = await self._resubscribe(start_seq)
                        expected, unanswered, heard = 1, 0, loop.time()
                        unreceived.reset()
        finally:
            await _unsubscribe(sub)

    def _dropped(self, sub: Any) -> bool:
        # Dropped at the tail of a burst: known once what was buffered has been handled.
        return bool(sub._sub._id in self._dropped_sids and sub._pending_queue.empty())

    async def _delivered(self, sub: Any) -> int | bool | None:
        """The consumer's last delivered sequence; False when the server has no such
        consumer, None when it did not answer."""
        try:
            info = await sub.consumer_info()
        except APIError as exc:
            if exc.code != 503:  # not found, or offline with its server: JetStream's answer
                logger.info("the server has no live consumer of this node's (%r)", exc)
                return False
            logger.info("JetStream did not answer about the node's consumer (%r)", exc)
            return None
        except (TimeoutError, NatsError) as exc:
            logger.info("no answer about the node's consumer of the log (%r)", exc)
            return None
        return int(info.delivered.consumer_seq or 0) if info.delivered else 0

    async def _resubscribe(self, start_seq: int) -> Any:
        """The consumer made again, as many times as it takes while the cluster cannot (an
        election, a server away: no answer or a 5xx); a refusal for good (4xx) ends the
        consumer, and the node shows itself unhealthy."""
        while True:
            try:
                return await self._subscribe(start_seq)
            except (TimeoutError, NatsError) as exc:
                if isinstance(exc, APIError) and exc.code is not None and exc.code < 500:
                    raise  # refused for good (no such stream, a bad or forbidden request)
                logger.warning("could not make the node's consumer of the log again (%r)", exc)
            await asyncio.sleep(RESUBSCRIBE_RETRY)

    async def _subscribe(self, start_seq: int) -> Any:
        """The node's consumer, made afresh to deliver from ``start_seq``."""
        js = self._js()
        # A consumer left by an earlier run may hold deliveries it will only resend after
        # ack_wait; the store knows exactly what was applied, so start afresh from there.
        with contextlib.suppress(NotFoundError):
            await js.delete_consumer(self._stream, self._durable)
        wanted = self._filters
        return await js.subscribe(
            wanted[0],
            durable=self._durable,
            stream=self._stream,
            manual_ack=True,
            config=ConsumerConfig(
                filter_subjects=wanted if len(wanted) > 1 else None,
                # Acking a batch's last message acks the whole batch: one ack per batch.
                ack_policy=AckPolicy.ALL,
                deliver_policy=DeliverPolicy.BY_START_SEQUENCE,
                opt_start_seq=max(1, start_seq),
                max_ack_pending=MAX_ACK_PENDING,
                ack_wait=ACK_WAIT,
                # One server holds it, in memory: where it resumes comes from the store, so a
                # replicated, persisted consumer would keep nothing the node needs.
                num_replicas=1,
                mem_storage=True,
            ),
            pending_msgs_limit=self._pending_msgs_limit,
        )


_WHY = {
    "dropped": "deliveries of the log were lost before they were handled "
    "(dropped by a slow client, or with a connection)",
    "lost": "the node's consumer of the log is gone (lost with its server, or rebuilt empty)",
}


def _rewound(msg: Msg, start_seq: int) -> bool:
    """A first delivery of what the node handled already: the consumer started over."""
    return bool(msg.metadata.num_delivered == 1 and msg.metadata.sequence.stream < start_seq)


def drain(sub: Any, most: int) -> list[Msg]:
    """Up to ``most`` deliveries already buffered, so catch-up applies many per transaction."""
    extra: list[Msg] = []
    queue = sub._pending_queue  # nats-py keeps delivered messages here
    while len(extra) < most and not queue.empty():
        extra.append(queue.get_nowait())
        queue.task_done()
    sub._pending_size -= sum(len(m.data) for m in extra)
    return extra


def to_bus(msg: Msg) -> BusMessage:
    """A delivery as the Bus hands it on."""
    return BusMessage(subject=msg.subject, data=msg.data, seq=int(msg.metadata.sequence.stream))


async def _unsubscribe(sub: Any) -> None:
    # Once more for one already ended (a stop while the consumer was being made again).
    with contextlib.suppress(ConnectionClosedError, NatsTimeoutError, BadSubscriptionError):
        await sub.unsubscribe()
