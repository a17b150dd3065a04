"""Agent keys and handles: what ties an agent to the caller that announced it.

A sessionless (2026-07-28) caller has no session to hold its agents. A credentialed one holds
them as its principal (``principal-…``); an anonymous one holds each through the
``agent_handle`` that ``bzzz_announce`` minted (``handle-…``), passed back as an argument.
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
