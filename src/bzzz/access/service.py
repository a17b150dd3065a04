"""Who is calling: credentials to principals, and the management of network tokens."""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import logging
import re
from datetime import timedelta
from typing import Any, Protocol

from ulid import ULID

from bzzz import domain
from bzzz.access.tokens import (
    AGENT_ID,
    TokenRecord,
    TokenRegistry,
    mint_secret,
    secret_hash,
)
from bzzz.errors import BzzzError, InvalidParameters, PermissionDenied, Unauthenticated
from bzzz.principal import ALL, Principal, Scope, principal

logger = logging.getLogger(__name__)

MAX_TOKEN_LENGTH = 8192
# What a refused caller reads: how to get a credential, and how to send it.
GET_A_TOKEN = (
    "No token yet? On the node's machine, 'bzzz init' makes an admin token and prints the "
    "client configurations; 'bzzz token create NAME --agent AGENT_ID --project P' makes one "
    "per agent."
)
FIX = "send 'Authorization: Bearer <token>'; get a token with 'bzzz init' on the node's machine"
_SPACE = re.compile(r"\s")


class TokenLog(Protocol):
    """Where token changes go: the node's event log, or the CLI's one-envelope join."""

    async def emit(
        self, type_: str, kind: str, key: str, payload: dict[str, Any]
    ) -> dict[str, Any]:
        """Store one change on the network's log; its outcome (``ok``, ``reason``)."""
        ...


class TokenVerifier(Protocol):
    """Verifies a JWT access token and says who holds it (the OAuth resource server part)."""

    async def principal_of(self, token: str) -> Principal:
        """The token's principal, or Unauthenticated."""
        ...

    async def aclose(self) -> None:
        """Release what the verifier holds (its HTTP client)."""
        ...


def admin_principal(secret: str) -> Principal:
    """The principal of a BZZZ_AUTH_TOKENS secret: an admin of everything."""
    tag = hashlib.sha256(secret.encode()).hexdigest()[:12]
    return principal(f"admin-token:{tag}", "admin-token", [ALL], [ALL], Scope.ADMIN, f"admin {tag}")


def bearer_of(header: str | None) -> str | None:
    """The credential in an Authorization header: ``Bearer <token>``, scheme in any case.

    None when there is no header; Unauthenticated for any other shape (no scheme, Basic, …).
    """
    if header is None:
        return None
    scheme, _, value = header.strip().partition(" ")
    value = value.strip()
    if scheme.lower() != "bearer" or not value:
        raise Unauthenticated(
            "the Authorization header must be 'Bearer <token>'",
            details={"expected": "Authorization: Bearer <token>"},
        )
    if len(value) > MAX_TOKEN_LENGTH or _SPACE.search(value):
        raise Unauthenticated("the bearer token is malformed")
    return value


def _looks_like_jwt(token: str) -> bool:
    return token.count(".") == 2 and not token.startswith("bzzz_")


class AccessService:
    """Resolves credentials to principals and manages the network's tokens."""

    def __init__(
        self,
        tokens: TokenRegistry,
        admin_tokens: list[str],
        *,
        required: bool | None,
        loopback: bool = True,
        issuer: bool = False,
        log: TokenLog | None = None,
        jwt: TokenVerifier | None = None,
    ) -> None:
        self.tokens = tokens
        self._admin = [t.encode() for t in admin_tokens]
        self._setting = required
        self._open_without_credentials = loopback and not admin_tokens and not issuer
        self.jwt = jwt
        self._log = log

    @property
    def required(self) -> bool:
        """Whether a caller must bring a credential, decided from the network's current state.

        ``auth.required`` decides when set. Otherwise only a loopback node with no credential
        at all is open: no admin token, no issuer and no network token, not even a revoked
        one (a token created by the CLI arrives over the log while the node runs, and from
        then on nobody is the anonymous admin).
        """
        if self._setting is not None:
            return self._setting
        return not (self._open_without_credentials and len(self.tokens) == 0)

    async def authenticate(self, header: str | None) -> Principal | None:
        """The principal behind an Authorization header; None: no credential was given."""
        secret = bearer_of(header)
        if secret is None:
            if self.required:
                raise Unauthenticated(
                    "this node requires a credential: send 'Authorization: Bearer <token>'. "
                    + GET_A_TOKEN,
                    details={"fix": FIX},
                )
            return None
        given = secret.encode()
        # Every configured admin token is compared, in constant time, whatever matches.
        matched = [hmac.compare_digest(given, token) for token in self._admin]
        if any(matched):
            return admin_principal(secret)
        if _looks_like_jwt(secret) and self.jwt is not None:
            return await self.jwt.principal_of(secret)
        record = self.tokens.by_secret(secret)
        if record is None:
            raise Unauthenticated(
                "unknown bearer token: send one that 'bzzz init' or 'bzzz token create' printed "
                "('bzzz token list' on the node shows which exist)",
                details={"fix": FIX},
            )
        if not record.valid_at(domain.utcnow()):
            raise Unauthenticated(
                f"token {record.id} is {record.status(domain.utcnow())}: ask an admin of its "
                "project for a new one ('bzzz token create')",
                details={"fix": FIX},
            )
        return record.principal()

    async def close(self) -> None:
        """Release the JWT verifier's HTTP client."""
        if self.jwt is not None:
            await self.jwt.aclose()

    # --- tokens ----------------------------------------------------------------------------

    async def create_token(
        self,
        by: Principal,
        name: str,
        projects: list[str],
        roles: list[str],
        scope: Scope,
        expires_in: timedelta | None,
        agent: str | None = None,
    ) -> tuple[TokenRecord, str]:
        """Mint a token no broader than its creator's grants; returns it and its secret.

        ``agent``: the token is that one agent (an agent token), of one project.
        """
        by.require(Scope.ADMIN, "creating a token")
        self._check_grants(by, projects, roles, scope)
        if not name.strip() or len(name) > 128:
            raise InvalidParameters("a token needs a name of 1 to 128 characters")
        if agent is not None:
            _check_agent_token(agent, projects, scope)
        secret = mint_secret()
        token_id = f"tok-{ULID()}"
        now = domain.utcnow()
        payload: dict[str, Any] = {
            "token_id": token_id,
            "name": name.strip(),
            "secret_hash": secret_hash(secret),
            "projects": sorted(set(projects)),
            "roles": sorted(set(roles)),
            "scope": scope.label,
            "created_by": by.id,
            "expires_at": (now + expires_in).isoformat() if expires_in else None,
        }
        if agent is not None:
            payload["agent_id"] = agent
        await self._emit("token.created", token_id, payload)
        record = self.tokens.get(token_id)
        if record is None:
            raise BzzzError("the network did not record the token; try again")
        return record, secret

    @staticmethod
    def _check_grants(by: Principal, projects: list[str], roles: list[str], scope: Scope) -> None:
        if not projects:
            raise InvalidParameters("a token needs at least one --project (or '*')")
        for project in projects:
            if project == ALL and not by.all_projects:
                raise PermissionDenied(
                    "only an admin of every project may grant '*'",
                    details={"missing": "project:*"},
                )
            by.require_project(project if project != ALL else None, "granting a project")
        for role in roles:
            if not by.may_role(role):
                raise PermissionDenied(
                    f"cannot grant role '{role}'", details={"missing": f"role:{role}"}
                )
        if scope > by.scope:
            raise PermissionDenied(
                f"cannot grant '{scope.label}'", details={"missing": f"scope:{scope.label}"}
            )

    def list_tokens(self, by: Principal) -> list[TokenRecord]:
        """The tokens an admin may see: those whose projects it holds."""
        by.require(Scope.ADMIN, "listing tokens")
        return [t for t in self.tokens.all() if self._manages(by, t)]

    async def revoke_token(self, by: Principal, token_id: str) -> TokenRecord:
        """Revoke a token on every node; refused for a token outside the admin's projects."""
        by.require(Scope.ADMIN, "revoking a token")
        record = self.tokens.get(token_id)
        if record is None or not self._manages(by, record):
            raise InvalidParameters(f"no token '{token_id[:64]}'", details={"token_id": token_id})
        if record.revoked_at is None:
            await self._emit("token.revoked", token_id, {"token_id": token_id, "revoked_by": by.id})
        revoked = self.tokens.get(token_id)
        assert revoked is not None
        return revoked

    @staticmethod
    def _manages(by: Principal, record: TokenRecord) -> bool:
        return by.all_projects or (
            ALL not in record.projects and set(record.projects) <= by.projects
        )

    async def _emit(self, type_: str, token_id: str, payload: dict[str, Any]) -> None:
        if self._log is None:
            raise BzzzError("this process cannot change tokens (no event log)")
        outcome = await self._log.emit(type_, "token", token_id, payload)
        if not outcome["ok"]:
            raise InvalidParameters(f"refused: {outcome.get('reason')}")


def _check_agent_token(agent: str, projects: list[str], scope: Scope) -> None:
    """An agent token is one agent of one project, with at most the 'write' scope."""
    if not AGENT_ID.match(agent):
        raise InvalidParameters(
            f"--agent must be an agent id (letters, digits, - _ ., at most 128), not "
            f"{agent[:64]!r}",
            details={"field": "agent"},
        )
    if len(set(projects)) != 1 or ALL in projects:
        raise InvalidParameters(
            "an agent token is of one project: pass one --project (not '*')",
            details={"field": "project"},
        )
    if scope > Scope.WRITE:
        raise InvalidParameters(
            "an agent token has the 'read' or 'write' scope; an admin token is a person's "
            "(bzzz init, or a token without --agent)",
            details={"field": "scope"},
        )


def serves_loopback_only(http_host: str, *, stdio: bool = False) -> bool:
    """True for a node reachable from its own machine alone (stdio, or a loopback bind)."""
    if stdio:
        return True
    host = http_host.strip().strip("[]").lower()
    if host in ("localhost", "localhost."):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a name, or every interface: reachable from elsewhere
