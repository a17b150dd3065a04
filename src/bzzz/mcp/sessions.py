"""MCP sessions: a stable key per client connection, and what to do when one ends."""

from __future__ import annotations

import itertools
import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from mcp.server.connection import Connection
from mcp.types.version import MODERN_PROTOCOL_VERSIONS

from bzzz.access.keys import STATELESS, principal_key, session_key
from bzzz.errors import PermissionDenied
from bzzz.eventlog import Caller
from bzzz.principal import ANONYMOUS, LOCAL, Principal

# Where the HTTP auth middleware leaves the request's principal (``scope["state"]``).
PRINCIPAL_STATE = "bzzz_principal"

logger = logging.getLogger(__name__)

_counter = itertools.count(1)


def principal_of(request: Any) -> Principal:
    """Who made an MCP request: set on HTTP by the auth middleware; stdio is the local user."""
    if request is None:
        return LOCAL
    found = getattr(request, "scope", {}).get("state", {}).get(PRINCIPAL_STATE)
    return found if isinstance(found, Principal) else ANONYMOUS


def _stateless_key(headers: Any, who: Principal) -> str:
    """The agent key of a sessionless HTTP request (see bzzz.access.keys)."""
    named = str(headers.get("x-bzzz-session", ""))[:64]
    if named:
        # A named session is the principal's own: another credential naming it holds nothing.
        scope = "" if not who.authenticated else principal_key(who)[10:22] + "-"
        return session_key(f"http-{scope}".rstrip("-"), named)
    if who.authenticated:
        return principal_key(who)
    return STATELESS


class SessionRegistry:
    """Maps MCP connections to callers; runs ``on_end`` when a connection closes."""

    def __init__(
        self, on_end: Callable[[Caller], Awaitable[None]], process_key: str | None = None
    ) -> None:
        self._on_end = on_end
        # The stdio transport has one client for the life of the process: requests of the
        # sessionless 2026 protocol (a new connection each) all belong to that client.
        self._process_key = process_key or f"proc-{uuid.uuid4().hex[:12]}"
        self.connections: dict[str, Connection] = {}
        self.resource_subscriptions: dict[str, set[str]] = {}

    def caller(self, session: Any, request: Any = None, handle: str | None = None) -> Caller:
        """The caller behind an MCP request (``ctx.session``, the HTTP request, the handle)."""
        who = principal_of(request)
        return Caller(self._key(session, request, who), who, handle)

    def _key(self, session: Any, request: Any, who: Principal) -> str:
        # The SDK has no public accessor for the per-connection object in 2.3; its own tests
        # reach it the same way. ctx.session itself is a fresh proxy on every request.
        conn: Connection = session._connection
        key = conn.state.get("bzzz_session")
        if key is not None:
            _same_principal(conn, who)
            return str(key)
        conn.state["bzzz_principal"] = who.id
        if conn.session_id:
            key = session_key("mcp", conn.session_id)
        elif request is not None:
            # A stateless HTTP request has no session: each request is its own connection.
            key = _stateless_key(request.headers, who)
            conn.state["bzzz_session"] = key
            return key
        elif getattr(conn, "protocol_version", None) in MODERN_PROTOCOL_VERSIONS:
            conn.state["bzzz_session"] = self._process_key
            return self._process_key
        else:
            key = f"conn-{next(_counter)}-{id(conn):x}"
        conn.state["bzzz_session"] = key
        self.connections[key] = conn
        conn.exit_stack.push_async_callback(self._ended, key)
        return key

    async def _ended(self, key: str) -> None:
        self.connections.pop(key, None)
        self.resource_subscriptions.pop(key, None)
        try:
            await self._on_end(Caller(key))
        except Exception:
            # Runs in the SDK's connection teardown: it must not raise into it.
            logger.exception("cleanup of session %s failed", key)

    def subscribe(self, key: str, uri: str) -> None:
        """Remember that a session wants resources/updated for ``uri``."""
        self.resource_subscriptions.setdefault(key, set()).add(uri)

    def unsubscribe(self, key: str, uri: str) -> None:
        """Forget a resource subscription."""
        self.resource_subscriptions.get(key, set()).discard(uri)

    async def notify_updated(self, uris: set[str]) -> int:
        """Send resources/updated to every session subscribed to one of ``uris``."""
        sent = 0
        for key, wanted in list(self.resource_subscriptions.items()):
            conn = self.connections.get(key)
            if conn is None:
                continue
            for uri in wanted & uris:
                await conn.send_resource_updated(uri)
                sent += 1
        return sent


def _same_principal(conn: Connection, who: Principal) -> None:
    # A legacy session belongs to the credential that opened it: another one presenting
    # its session id must not act as the session's agents.
    opened_by = conn.state.get("bzzz_principal")
    if opened_by is not None and opened_by != who.id:
        raise PermissionDenied(
            "this MCP session was opened with another credential",
            details={"missing": "session_owner"},
        )
