"""Node to node over core NATS: pings and forwarded requests, answered and asked.

Requests are answered in a queue group, each in a task of its own; a request that wants its
answer on a reply subject of the asker's own (``new_inbox``) is awaited on one wildcard
subscription for all of them.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import Callable, Sequence

from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.errors import BadSubscriptionError, NoRespondersError
from nats.errors import Error as NatsError
from nats.js.api import Header

from bzzz.errors import NetworkError
from bzzz.network.base import PingHandler, RequestHandler, Unanswered, ping_subject
from bzzz.network.nats_calls import RETRYABLE

# Forwarded calls a node runs at once (each waits for the store and the log).
REQUESTS_IN_FLIGHT = 256


class NodeRequests:
    """Pings and requests on the connection the bus gives it."""

    def __init__(self, client: Callable[[], NatsClient], network: str) -> None:
        self._client = client
        self._network = network
        self._reply_root = f"_INBOX.{secrets.token_hex(11)}"
        self._reply_sub: Subscription | None = None
        self._reply_lock = asyncio.Lock()
        self._replies: dict[str, asyncio.Future[Msg]] = {}

    def forget(self) -> None:
        """Drop the reply subscription (its connection closed)."""
        self._reply_sub = None

    async def serve_pings(self, node_id: str, handler: PingHandler) -> None:
        """Answer pings on the node's subject (core NATS; resubscribed on reconnect)."""

        async def on_ping(msg: Msg) -> None:
            answer = await handler(msg.data)
            if answer is not None and msg.reply:
                with contextlib.suppress(NatsError):
                    await msg.respond(answer)

        sub = await self._client().subscribe(ping_subject(self._network, node_id), cb=on_ping)
        try:
            await asyncio.Event().wait()
        finally:
            with contextlib.suppress(NatsError, BadSubscriptionError):
                await sub.unsubscribe()

    async def ping(self, node_id: str, data: bytes, within: float) -> bytes:
        """One request/reply to the node's ping subject."""
        subject = ping_subject(self._network, node_id)
        try:
            reply = await self._client().request(subject, data, timeout=within)
        except (*RETRYABLE, NatsError) as exc:
            raise NetworkError(f"node {node_id} did not answer the ping ({exc!r})") from exc
        return reply.data

    async def serve(self, subjects: Sequence[str], queue: str, handler: RequestHandler) -> None:
        """Answer requests on ``subjects`` in the queue group ``queue``.

        nats-py runs a subscription's callback for one message at a time: each request is
        answered in a task of its own (at most ``REQUESTS_IN_FLIGHT`` at once), so a slow call
        holds up no other.
        """
        slots = asyncio.Semaphore(REQUESTS_IN_FLIGHT)
        running: set[asyncio.Task[None]] = set()

        async def answer(msg: Msg) -> None:
            try:
                reply = await handler(msg.data, msg.reply)
                if reply is not None and msg.reply:
                    with contextlib.suppress(NatsError):
                        await msg.respond(reply)
            finally:
                slots.release()

        async def on_request(msg: Msg) -> None:
            await slots.acquire()
            task = asyncio.create_task(answer(msg))
            running.add(task)
            task.add_done_callback(running.discard)

        nc = self._client()
        subs = [await nc.subscribe(s, queue=queue, cb=on_request) for s in subjects]
        try:
            await nc.flush()
            await asyncio.Event().wait()
        finally:
            for sub in subs:
                with contextlib.suppress(NatsError, BadSubscriptionError):
                    await sub.unsubscribe()
            for task in running:
                task.cancel()

    def new_inbox(self) -> str:
        """A reply subject of this connection's own for one ``request(reply=…)``."""
        return f"{self._reply_root}.{secrets.token_hex(8)}"

    async def request(
        self, subject: str, data: bytes, within: float, *, reply: str | None = None
    ) -> bytes | None:
        """One request/reply; None when nats-server says no one listens."""
        try:
            if reply is None:
                answer = await self._client().request(subject, data, timeout=within)
            else:
                answer = await self._request_on(subject, data, within, reply)
        except NoRespondersError:
            return None
        except (*RETRYABLE, NatsError) as exc:
            raise Unanswered(f"no answer on {subject} within {within:g}s ({exc!r})") from exc
        return answer.data

    async def _request_on(self, subject: str, data: bytes, within: float, reply: str) -> Msg:
        """Publish with ``reply`` (a ``new_inbox`` subject) and await the one answer there."""
        if not reply.startswith(f"{self._reply_root}."):
            raise ValueError("reply must come from new_inbox()")
        nc = self._client()
        await self._replies_subscribed(nc)
        waiting: asyncio.Future[Msg] = asyncio.get_running_loop().create_future()
        self._replies[reply] = waiting
        try:
            await nc.publish(subject, data, reply=reply)
            async with asyncio.timeout(within):
                answer = await waiting
        finally:
            self._replies.pop(reply, None)
        if answer.headers and answer.headers.get(Header.STATUS) == "503":
            raise NoRespondersError
        return answer

    async def _replies_subscribed(self, nc: NatsClient) -> None:
        async with self._reply_lock:
            if self._reply_sub is not None:
                return

            async def on_reply(msg: Msg) -> None:
                waiting = self._replies.pop(msg.subject, None)
                if waiting is not None and not waiting.done():
                    waiting.set_result(msg)

            self._reply_sub = await nc.subscribe(f"{self._reply_root}.*", cb=on_reply)
