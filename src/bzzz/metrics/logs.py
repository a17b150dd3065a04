"""Logs: text or JSON lines, to stderr or a rotating file, each record with its request id.

A request id lives in a context variable for the time of one HTTP request (``RequestIds``,
taken from ``X-Request-Id`` when the caller sends a sane one, echoed in the answer) or one MCP
call (``in_request``, which ``mcp/metrics.py`` wraps around each); every record logged
meanwhile carries it.
"""

from __future__ import annotations

import json
import logging
import logging.handlers
import re
import secrets
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from bzzz import logsummary

if TYPE_CHECKING:
    from bzzz.config import LoggingSettings

request_id: ContextVar[str | None] = ContextVar("bzzz_request_id", default=None)
_SANE_ID = re.compile(r"[A-Za-z0-9._:-]{1,64}")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s [%(request_id)s]: %(message)s"


def new_request_id() -> str:
    """A fresh id (16 hex digits)."""
    return secrets.token_hex(8)


@contextmanager
def in_request(rid: str | None = None) -> Iterator[str]:
    """Run the block under a request id (a new one unless given)."""
    rid = rid or new_request_id()
    token = request_id.set(rid)
    try:
        yield rid
    finally:
        request_id.reset(token)


class RequestIdFilter(logging.Filter):
    """Puts the current request id (or "-") on every record."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Always keep the record; only annotate it."""
        record.request_id = request_id.get() or "-"
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, request id, exception."""

    def format(self, record: logging.LogRecord) -> str:
        """The record as a JSON line."""
        entry: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "request_id": getattr(record, "request_id", None) or request_id.get(),
        }
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


def make_handler(settings: LoggingSettings) -> logging.Handler:
    """stderr, or the file rotated at ``max_bytes`` keeping ``backups`` old files."""
    handler: logging.Handler
    if settings.file:
        path = Path(settings.file).expanduser()
        path.parent.mkdir(parents=True, exist_ok=True)
        handler = logging.handlers.RotatingFileHandler(
            path, maxBytes=settings.max_bytes, backupCount=settings.backups, encoding="utf-8"
        )
    else:
        # stdout belongs to the MCP stdio transport.
        handler = logging.StreamHandler(sys.stderr)
    formatter = JsonFormatter() if settings.format == "json" else logging.Formatter(TEXT_FORMAT)
    handler.setFormatter(formatter)
    handler.addFilter(RequestIdFilter())
    return handler


def configure(settings: LoggingSettings) -> None:
    """Route the process's logs as the settings say (root at WARNING, bzzz at its level)."""
    root = logging.getLogger()
    for old in root.handlers:
        old.close()
    handler = make_handler(settings)
    # A stream of like warnings (rejected envelopes, untrusted heartbeats, failing webhooks)
    # is one line, then a count per minute.
    logsummary.install(handler)
    root.handlers[:] = [handler]
    root.setLevel(logging.WARNING)
    logging.getLogger("bzzz").setLevel(settings.level)


class RequestIds:
    """ASGI wrapper: each HTTP request runs under a request id, echoed as ``X-Request-Id``."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Set the id for the request, then pass it on."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given = None
        for name, value in scope.get("headers", []):
            if name == b"x-request-id":
                given = value.decode("latin-1")
        rid = given if given and _SANE_ID.fullmatch(given) else None
        with in_request(rid) as current:

            async def send_with_id(message: Message) -> None:
                if message["type"] == "http.response.start":
                    headers = list(message.get("headers", []))
                    headers.append((b"x-request-id", current.encode()))
                    message = {**message, "headers": headers}
                await send(message)

            await self.app(scope, receive, send_with_id)
