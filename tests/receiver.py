"""A real HTTP/1.1 receiver on loopback for webhooks, the human channel and SLURP endpoints."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest


@dataclass(slots=True)
class Request:
    """One POST as the receiver saw it, and the status it answered."""

    path: str
    headers: dict[str, str]
    body: bytes
    status: int

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Receiver:
    """An HTTP/1.1 server on 127.0.0.1 that answers each request with the next status."""

    statuses: Callable[[int], int]
    url: str = ""
    requests: list[Request] = field(default_factory=list)
    _arrived: asyncio.Condition = field(default_factory=asyncio.Condition)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
            _method, path, _version = head[0].split(" ", 2)
            headers = {}
            for line in head[1:]:
                if line:
                    name, _, value = line.partition(":")
                    headers[name.strip().lower()] = value.strip()
            body = await reader.readexactly(int(headers.get("content-length", "0")))
            status = self.statuses(len(self.requests))
            writer.write(
                f"HTTP/1.1 {status} X\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".encode()
            )
            await writer.drain()
        finally:
            writer.close()
        async with self._arrived:
            self.requests.append(Request(path, headers, body, status))
            self._arrived.notify_all()

    async def wait_for(self, count: int, within: float = 5.0) -> list[Request]:
        """The first ``count`` requests, once they have arrived."""
        async with asyncio.timeout(within), self._arrived:
            await self._arrived.wait_for(lambda: len(self.requests) >= count)
        return self.requests[:count]


ReceiverFactory = Callable[[Callable[[int], int]], AbstractAsyncContextManager[Receiver]]


@pytest.fixture
def http_receiver() -> ReceiverFactory:
    """Start a receiver whose answer to the n-th request (from 0) is ``statuses(n)``."""

    @asynccontextmanager
    async def start(statuses: Callable[[int], int]) -> AsyncIterator[Receiver]:
        receiver = Receiver(statuses)
        server = await asyncio.start_server(receiver.handle, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        receiver.url = f"http://127.0.0.1:{port}/hooks/bzzz"
        try:
            yield receiver
        finally:
            server.close()
            await server.wait_closed()

    return start
