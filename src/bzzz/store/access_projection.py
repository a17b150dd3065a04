"""Appliers of the access envelopes: network tokens created and revoked.

Tokens are network state: every node applies the same envelopes and so accepts the same
tokens. Only the SHA-256 of a token's secret travels and is stored.
"""

from __future__ import annotations

import re
from datetime import datetime

from sqlalchemy.orm import Session

from bzzz.network.envelope import Envelope
from bzzz.store.models import AccessTokenRow
from bzzz.store.projection import (
    NAME_LENGTH,
    Applied,
    Applier,
    ProjectionLimits,
    _check_names,
    _strict_json,
    _text,
)

_HASH = re.compile(r"^[0-9a-f]{64}$")
SCOPES = ("read", "write", "admin")
# As bzzz_announce takes an agent id (bzzz.schemas.Identifier).
_AGENT_ID = re.compile(r"^[A-Za-z0-9._-]{1,128}$")


def _when(value: object, name: str) -> datetime | None:
    if value is None:
        return None
    return datetime.fromisoformat(_text(value, 64, name))


def apply_token_created(session: Session, env: Envelope, limits: ProjectionLimits) -> Applied:
    """Record a token's grants and secret hash; a second envelope for the same id is refused."""
    p = env.payload
    token_id = _text(p["token_id"], 64, "token_id")
    secret_hash = _text(p["secret_hash"], 64, "secret_hash")
    if not _HASH.match(secret_hash):
        raise ValueError("secret_hash must be a SHA-256 hex digest")
    if p["scope"] not in SCOPES:
        raise ValueError("scope must be read, write or admin")
    agent = p.get("agent_id")
    if agent is not None and not (isinstance(agent, str) and _AGENT_ID.match(agent)):
        raise ValueError("agent_id must be an agent id (letters, digits, - _ ., at most 128)")
    if agent is not None and p["scope"] == "admin":
        raise ValueError("an agent token is not an admin token")
    if session.get(AccessTokenRow, token_id) is not None:
        return Applied({"ok": False, "reason": "exists"})
    session.add(
        AccessTokenRow(
            id=token_id,
            name=_text(p["name"], NAME_LENGTH, "name"),
            secret_hash=secret_hash,
            projects=_check_names(p["projects"], "projects"),
            roles=_check_names(p["roles"], "roles"),
            scope=p["scope"],
            created_by=_text(p["created_by"], 256, "created_by"),
            created_at=env.timestamp,
            expires_at=_when(p.get("expires_at"), "expires_at"),
            agent_id=agent,
        )
    )
    return Applied({"ok": True})


def apply_token_revoked(session: Session, env: Envelope, limits: ProjectionLimits) -> Applied:
    """Mark a token revoked (for good: a revoked token never comes back)."""
    p = env.payload
    row = session.get(AccessTokenRow, _text(p["token_id"], 64, "token_id"))
    if row is None:
        return Applied({"ok": False, "reason": "unknown"})
    if row.revoked_at is None:
        row.revoked_at = env.timestamp
        row.revoked_by = _text(p["revoked_by"], 256, "revoked_by")
    return Applied({"ok": True})


ACCESS_APPLIERS: dict[str, Applier] = {
    "token.created": _strict_json(apply_token_created),
    "token.revoked": _strict_json(apply_token_revoked),
}
