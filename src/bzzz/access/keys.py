"""Agent keys and handles: what ties an agent to the caller that announced it.

A sessionless (2026-07-28) caller has no session to hold its agents. A credentialed one holds
them as its principal (``principal-…``); an anonymous one holds each through the
``agent_handle`` that ``bzzz_announce`` minted (``handle-…``), passed back as an argument.

A session's key is a digest of the transport's session id (:func:`session_key`): an MCP
session id (``Mcp-Session-Id``) or a named HTTP session (``X-Bzzz-Session``) lets whoever
holds it speak in that session, so it is never written down: the agent's envelope on the log
(``agent.announced``), the store's rows, the audit trail and forwarded calls carry the digest,
which finds the same agents and tells nobody the id.
"""

from __future__ import annotations

import hashlib
import secrets

from bzzz.domain import canonical_agent_id, network_wide_key
from bzzz.eventlog import Caller
from bzzz.principal import Principal

# The key of a sessionless call without a credential: it holds nothing by itself.
STATELESS = "stateless"


def holder_of(caller: Caller) -> str:
    """What holds the caller's agents, as messages name it: ``session``, or ``caller`` for a
    call without one (2026-07-28, REST), whose principal or handle holds them."""
    sessionless = caller.session_id == STATELESS or network_wide_key(caller.session_id)
    return "caller" if sessionless else "session"


def session_key(kind: str, session_id: str) -> str:
    """The key of a transport session: its kind and a digest of its id (never the id)."""
    digest = hashlib.sha256(b"bzzz session\x00" + session_id.encode()).hexdigest()
    return f"{kind}-{digest[:32]}"


def principal_key(who: Principal) -> str:
    """The key under which a principal's sessionless calls hold agents.

    An agent token's is its agent's: every token made for one agent (a new one after a
    revoke, one per machine) holds the same agent. No principal id starts with ``agent:``.
    """
    named = who.id if who.agent is None else "agent:" + canonical_agent_id(who.agent)
    return "principal-" + hashlib.sha256(named.encode()).hexdigest()[:32]


def mint_handle(agent_id: str) -> str:
    """A new handle for ``agent_id``: the id, then 192 random bits."""
    return f"{agent_id}:{secrets.token_urlsafe(24)}"


def handle_hash(handle: str) -> str:
    """What the network stores of a handle (never the handle)."""
    return hashlib.sha256(handle.encode()).hexdigest()


def handle_key(handle: str) -> str:
    """The key under which a handle holds its agent."""
    return "handle-" + handle_hash(handle)[:32]


def handle_agent(handle: str) -> str:
    """The agent id a handle names (the part before its first ':')."""
    return handle.partition(":")[0]
