"""Network tokens: minted once, stored as SHA-256, known to every node through the log."""

from __future__ import annotations

import hashlib
import re
import secrets
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from sqlalchemy import select

from bzzz.network.envelope import Envelope
from bzzz.principal import Principal, Scope, principal
from bzzz.store.database import Database
from bzzz.store.models import AccessTokenRow

TOKEN_PREFIX = "bzzz_"
# An agent id as bzzz_announce takes it (bzzz.schemas.Identifier), as the store checks it.
AGENT_ID = re.compile(r"^[A-Za-z0-9._-]{1,128}$")
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*$")
_UNITS = {"": 86400, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def secret_hash(secret: str) -> str:
    """The SHA-256 (hex) under which a token is stored and looked up."""
    return hashlib.sha256(secret.encode()).hexdigest()


def mint_secret() -> str:
    """A new token secret: 256 random bits, recognisable by its prefix in leak scanners."""
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def parse_duration(text: str) -> timedelta:
    """``30d``, ``12h``, ``90m``, ``45s``, ``2w`` (a bare number is days)."""
    match = _DURATION.match(text)
    if match is None or float(match.group(1)) <= 0:
        raise ValueError(f"{text!r} is not a duration such as 30d, 12h or 90m")
    return timedelta(seconds=float(match.group(1)) * _UNITS[match.group(2)])


@dataclass(frozen=True, slots=True)
class TokenRecord:
    """What a node knows of a network token."""

    id: str
    name: str
    secret_hash: str
    projects: tuple[str, ...]
    roles: tuple[str, ...]
    scope: Scope
    created_by: str
    created_at: datetime
    expires_at: datetime | None
    revoked_at: datetime | None = None
    # The one agent this token is (an agent token), or None.
    agent: str | None = None

    def valid_at(self, now: datetime) -> bool:
        """Neither revoked nor expired at ``now``."""
        return self.revoked_at is None and (self.expires_at is None or now < self.expires_at)

    def status(self, now: datetime) -> str:
        """active, expired or revoked."""
        if self.revoked_at is not None:
            return "revoked"
        return "active" if self.valid_at(now) else "expired"

    def principal(self) -> Principal:
        """The principal a holder of this token is."""
        return principal(
            f"token:{self.id}",
            "token",
            self.projects,
            self.roles,
            self.scope,
            self.name,
            self.agent,
        )

    def to_json(self, now: datetime) -> dict[str, object]:
        """The token as `bzzz token list` shows it: never its secret or hash."""
        return {
            "id": self.id,
            "name": self.name,
            "projects": list(self.projects),
            "roles": list(self.roles),
            "scope": self.scope.label,
            "agent": self.agent,
            "status": self.status(now),
            "created_by": self.created_by,
            "created_at": self.created_at.isoformat(),
            "expires_at": self.expires_at.isoformat() if self.expires_at else None,
            "revoked_at": self.revoked_at.isoformat() if self.revoked_at else None,
        }


def _record_of(row: AccessTokenRow) -> TokenRecord:
    return TokenRecord(
        id=row.id,
        name=row.name,
        secret_hash=row.secret_hash,
        projects=tuple(row.projects),
        roles=tuple(row.roles),
        scope=Scope.parse(row.scope),
        created_by=row.created_by,
        created_at=row.created_at,
        expires_at=row.expires_at,
        revoked_at=row.revoked_at,
        agent=row.agent_id,
    )


def _agent_of(agent: object, scope: str) -> str | None:
    """A token envelope's agent binding, refused as the store refuses it (ValueError)."""
    if agent is None:
        return None
    if not isinstance(agent, str) or not AGENT_ID.match(agent) or scope == "admin":
        raise ValueError("not an agent token's binding")
    return agent


class TokenRegistry:
    """The network's tokens in memory, kept current by the projector's applied envelopes."""

    def __init__(self) -> None:
        self._by_id: dict[str, TokenRecord] = {}
        self._by_hash: dict[str, str] = {}

    def __len__(self) -> int:
        return len(self._by_id)

    async def load(self, db: Database) -> None:
        """Read every token from the store (start-up)."""
        async with db.session() as session:
            rows = (await session.scalars(select(AccessTokenRow))).all()
        self._put_all(_record_of(row) for row in rows)

    def _put_all(self, records: Iterable[TokenRecord]) -> None:
        for record in records:
            self._by_id[record.id] = record
            self._by_hash[record.secret_hash] = record.id

    def on_applied(self, envelopes: Sequence[Envelope]) -> None:
        """Follow token.created / token.revoked as the projector commits them."""
        for env in envelopes:
            if env.type == "token.created":
                self._created(env)
            elif env.type == "token.revoked":
                self._revoked(env)

    def _created(self, env: Envelope) -> None:
        p = env.payload
        if p.get("token_id") in self._by_id:
            return
        expires = p.get("expires_at")
        agent = p.get("agent_id")
        try:
            record = TokenRecord(
                id=str(p["token_id"]),
                name=str(p["name"]),
                secret_hash=str(p["secret_hash"]),
                projects=tuple(p["projects"]),
                roles=tuple(p["roles"]),
                scope=Scope.parse(str(p["scope"])),
                created_by=str(p["created_by"]),
                created_at=env.timestamp,
                expires_at=datetime.fromisoformat(expires) if expires else None,
                agent=_agent_of(agent, str(p["scope"])),
            )
        except (KeyError, TypeError, ValueError):
            return  # the store refused it as a bad payload too
        self._put_all([record])

    def _revoked(self, env: Envelope) -> None:
        record = self._by_id.get(str(env.payload.get("token_id")))
        if record is not None and record.revoked_at is None:
            self._by_id[record.id] = replace(record, revoked_at=env.timestamp)

    def by_secret(self, secret: str) -> TokenRecord | None:
        """The token whose secret this is, valid or not (None: no such token)."""
        token_id = self._by_hash.get(secret_hash(secret))
        return self._by_id.get(token_id) if token_id else None

    def get(self, token_id: str) -> TokenRecord | None:
        """A token by id."""
        return self._by_id.get(token_id)

    def all(self) -> list[TokenRecord]:
        """Every token, oldest first."""
        return sorted(self._by_id.values(), key=lambda r: (r.created_at, r.id))
