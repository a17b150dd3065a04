"""OAuth 2.1 resource server: JWT access tokens of one issuer, checked against its published keys.

A ``JwtVerifier`` finds the issuer's ``jwks_uri`` through its RFC 8414 metadata (falling back to
OpenID Connect discovery), caches the key set for ``jwks_ttl`` seconds and fetches it again when a
token names a key it does not hold — at most once per ``refresh_interval``, so a caller sending
random ``kid`` values cannot make the node hammer the issuer. Only RS256, ES256 and EdDSA
signatures are accepted; the algorithm is bound to the key, never taken from the token alone.
Keys named in a token's header (``jku``, ``x5u``, ``jwk``) are never fetched or used.

Grants come from the ``scope`` claim (a space-separated string) or ``scp`` (a list):
``bzzz:project:<p>``, ``bzzz:role:<r>`` (``*`` = all) and ``bzzz:read`` / ``bzzz:write`` /
``bzzz:admin`` (the highest one wins; ``read`` when the token carries other bzzz grants but no
level). A token without any bzzz grant is refused. Every refusal is one ``JwtRejected`` whose
``reason`` is a short fixed phrase, safe to show a client; the token itself is never echoed.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from types import TracebackType
from typing import Any, Self
from urllib.parse import urlsplit

import httpx
import jwt

from bzzz.errors import ConfigError, Unauthenticated
from bzzz.principal import ALL, Principal, Scope, principal

logger = logging.getLogger(__name__)

ALGORITHMS = frozenset({"RS256", "ES256", "EdDSA"})
LEVELS = ("read", "write", "admin")
MAX_TOKEN_BYTES = 16 * 1024
MAX_DOCUMENT_BYTES = 1024 * 1024
_LOOPBACK_HOSTS = frozenset({"127.0.0.1", "::1", "localhost"})

# PyJWT's refusals, most specific first (several subclass one another), as the reasons we give.
_REASONS: tuple[tuple[type[jwt.PyJWTError], str], ...] = (
    (jwt.ExpiredSignatureError, "expired"),
    (jwt.ImmatureSignatureError, "not yet valid"),
    (jwt.InvalidAudienceError, "wrong audience"),
    (jwt.InvalidIssuerError, "wrong issuer"),
    (jwt.MissingRequiredClaimError, "missing claim"),
    (jwt.InvalidSignatureError, "bad signature"),
    (jwt.InvalidAlgorithmError, "unsupported algorithm"),
    (jwt.InvalidKeyError, "unusable key"),
    (jwt.DecodeError, "malformed token"),
)

# How many verified tokens are remembered (a bounded map: clients reuse their token).
VERIFIED_KEPT = 4096


class JwtRejected(Unauthenticated):
    """A JWT access token was refused; ``reason`` says why in a few words, never with the token."""

    def __init__(self, reason: str) -> None:
        super().__init__(
            f"access token rejected: {reason}",
            details={"reason": reason, "missing": "credential", "invalid_token": True},
        )
        self.reason = reason


@dataclass(frozen=True, slots=True)
class JwtIdentity:
    """The principal a verified token speaks for, and what it was granted."""

    subject: str
    issuer: str
    projects: frozenset[str]
    roles: frozenset[str]
    scope: str  # "read" | "write" | "admin": the highest level granted
    expires_at: datetime
    token_id: str | None  # the token's jti, when it has one


def metadata_urls(issuer: str) -> list[str]:
    """Where an issuer's metadata may live, in the order the MCP authorization spec tries them.

    RFC 8414 §3.1 inserts the well-known segment between host and path; OpenID Connect Discovery
    appends it to the issuer, and RFC 8414 §5 allows the inserted form for it too.
    """
    parts = urlsplit(issuer)
    origin = f"{parts.scheme}://{parts.netloc}"
    path = parts.path.rstrip("/")
    if not path:
        return [
            f"{origin}/.well-known/oauth-authorization-server",
            f"{origin}/.well-known/openid-configuration",
        ]
    return [
        f"{origin}/.well-known/oauth-authorization-server{path}",
        f"{origin}/.well-known/openid-configuration{path}",
        f"{origin}{path}/.well-known/openid-configuration",
    ]


def scopes_of(claims: Mapping[str, Any]) -> list[str]:
    """The scope values of a token: ``scope`` (space-separated) and ``scp`` (list or string)."""
    found: list[str] = []
    for name in ("scope", "scp"):
        value = claims.get(name)
        if isinstance(value, str):
            found.extend(value.split())
        elif isinstance(value, list):
            found.extend(item for item in value if isinstance(item, str))
    return found


def _grants(scopes: Iterable[str]) -> tuple[frozenset[str], frozenset[str], str]:
    """Projects, roles and level from bzzz scope values; refuses a token without any."""
    projects: set[str] = set()
    roles: set[str] = set()
    levels: set[str] = set()
    for value in scopes:
        kind, _, rest = value.partition(":")
        if kind != "bzzz":
            continue
        if rest.startswith("project:") and rest != "project:":
            projects.add(rest.removeprefix("project:"))
        elif rest.startswith("role:") and rest != "role:":
            roles.add(rest.removeprefix("role:"))
        elif rest in LEVELS:
            levels.add(rest)
    if not (projects or roles or levels):
        raise JwtRejected("no bzzz grant")
    level = max(levels, key=LEVELS.index) if levels else "read"
    return frozenset(projects), frozenset(roles), level


def identity_from_claims(claims: Mapping[str, Any]) -> JwtIdentity:
    """The identity of a token whose signature and time claims were already checked."""
    subject = claims.get("sub")
    if not isinstance(subject, str) or not subject:
        raise JwtRejected("missing claim")
    projects, roles, level = _grants(scopes_of(claims))
    token_id = claims.get("jti")
    return JwtIdentity(
        subject=subject,
        issuer=str(claims["iss"]),
        projects=projects,
        roles=roles,
        scope=level,
        expires_at=datetime.fromtimestamp(claims["exp"], UTC),
        token_id=token_id if isinstance(token_id, str) else None,
    )


def _check_url(url: str, what: str) -> None:
    """HTTPS, or plain HTTP on loopback only (OAuth 2.1 §1.5); no query or fragment."""
    parts = urlsplit(url)
    secure = parts.scheme == "https" or (
        parts.scheme == "http" and (parts.hostname or "") in _LOOPBACK_HOSTS
    )
    if not secure or not parts.netloc or parts.query or parts.fragment:
        raise ConfigError(f"{what} must be an https URL (http only on loopback): {url!r}")


def _parse_key(entry: Any) -> jwt.PyJWK | None:
    """One JWKS entry as a signing key we accept, or None (encryption keys, HMAC, other algs)."""
    if not isinstance(entry, dict) or entry.get("use", "sig") != "sig":
        return None
    if entry.get("kty") not in ("RSA", "EC", "OKP"):
        return None
    try:
        key = jwt.PyJWK(entry)
    except jwt.PyJWTError:
        return None
    return key if key.algorithm_name in ALGORITHMS else None


def parse_jwks(document: Any) -> list[jwt.PyJWK]:
    """The acceptable signing keys of a JWKS document; entries we cannot use are skipped."""
    if not isinstance(document, dict) or not isinstance(document.get("keys"), list):
        raise JwtRejected("issuer metadata invalid")
    keys = [key for key in map(_parse_key, document["keys"]) if key is not None]
    if len(keys) < len(document["keys"]):
        skipped = len(document["keys"]) - len(keys)
        logger.debug("JWKS: %d of %d keys skipped", skipped, len(document["keys"]))
    return keys


def _header(token: str) -> tuple[str, str | None]:
    """The token's (alg, kid), refusing what cannot be one of our tokens before any key lookup."""
    if len(token) > MAX_TOKEN_BYTES or token.count(".") != 2:
        raise JwtRejected("malformed token")
    try:
        header = jwt.get_unverified_header(token)
    except jwt.PyJWTError:
        raise JwtRejected("malformed token") from None
    alg, kid = header.get("alg"), header.get("kid")
    if not isinstance(alg, str) or alg not in ALGORITHMS:
        raise JwtRejected("unsupported algorithm")
    if kid is not None and not isinstance(kid, str):
        raise JwtRejected("malformed token")
    return alg, kid


def _reason(exc: jwt.PyJWTError) -> str:
    for kind, reason in _REASONS:
        if isinstance(exc, kind):
            return reason
    return "invalid token"


class JwtVerifier:
    """Verifies JWT access tokens of one issuer for one audience (an OAuth 2.1 resource server).

    Use as ``async with JwtVerifier(issuer, audience) as verifier`` (or call ``aclose()``); an
    ``httpx.AsyncClient`` passed in stays the caller's to close. ``monotonic`` is the clock of the
    key cache (tests move it); token times are checked against the wall clock with ``leeway``.
    """

    def __init__(
        self,
        issuer: str,
        audience: str,
        *,
        http: httpx.AsyncClient | None = None,
        leeway: float = 30,
        jwks_ttl: float = 300,
        refresh_interval: float = 10,
        timeout: float = 5,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        _check_url(issuer, "auth.issuer")
        if not audience:
            raise ConfigError("auth.audience must not be empty")
        self.issuer = issuer
        self.audience = audience
        self._leeway = leeway
        self._jwks_ttl = jwks_ttl
        self._refresh_interval = refresh_interval
        self._monotonic = monotonic
        self._owns_http = http is None
        self._http = http or httpx.AsyncClient(timeout=timeout, follow_redirects=False)
        self._lock = asyncio.Lock()
        self._jwks_uri: str | None = None
        self._keys: list[jwt.PyJWK] | None = None
        self._keys_at = 0.0
        # Tokens already verified: token -> (identity, key-set generation), newest last.
        self._verified: OrderedDict[str, tuple[JwtIdentity, int]] = OrderedDict()
        self._generation = 0  # counts successful fetches, so waiters see that one happened
        # No fetch before this instant, except the regular one when the cache is empty or old.
        self._quiet_until = float("-inf")

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the HTTP client if this verifier made it."""
        if self._owns_http:
            await self._http.aclose()

    async def verify(self, token: str) -> JwtIdentity:
        """The identity a token speaks for; raises ``JwtRejected`` with the reason otherwise.

        A token verified before is answered from memory while it has not expired and the key
        set it was checked against is still the current, fresh one: parsing and checking a JWT
        costs ~90 µs, a tenth of a whole tool call (BENCHMARKS.md, "Access checks").
        """
        known = self._verified.get(token)
        if known is not None and self._still_valid(*known):
            self._verified.move_to_end(token)
            return known[0]
        alg, kid = _header(token)
        keys = await self._keys_for(alg, kid)
        identity = identity_from_claims(self._decode(token, alg, keys))
        self._verified[token] = (identity, self._generation)
        if len(self._verified) > VERIFIED_KEPT:
            self._verified.popitem(last=False)
        return identity

    def _still_valid(self, identity: JwtIdentity, generation: int) -> bool:
        if generation != self._generation:
            return False  # the keys were fetched again (rotated, maybe revoked)
        if self._monotonic() - self._keys_at >= self._jwks_ttl:
            return False
        return datetime.now(UTC) < identity.expires_at + timedelta(seconds=self._leeway)

    def _decode(self, token: str, alg: str, keys: list[jwt.PyJWK]) -> dict[str, Any]:
        """The claims, checked with the first key whose signature matches."""
        failure: jwt.PyJWTError = jwt.InvalidSignatureError()
        for key in keys:
            try:
                claims: dict[str, Any] = jwt.decode(
                    token,
                    key=key,
                    algorithms=[alg],
                    audience=self.audience,
                    issuer=self.issuer,
                    leeway=self._leeway,
                    options={
                        "require": ["exp", "iss", "aud", "sub"],
                        "enforce_minimum_key_length": True,
                    },
                )
            except jwt.InvalidSignatureError as exc:
                failure = exc  # a key without its kid in the token: try the next one
            except jwt.PyJWTError as exc:
                raise JwtRejected(_reason(exc)) from None
            else:
                return claims
        raise JwtRejected(_reason(failure)) from None

    # --- keys --------------------------------------------------------------------------------

    def _matching(self, alg: str, kid: str | None) -> list[jwt.PyJWK]:
        return [
            key
            for key in self._keys or []
            if key.algorithm_name == alg and (kid is None or key.key_id == kid)
        ]

    async def _keys_for(self, alg: str, kid: str | None) -> list[jwt.PyJWK]:
        """The cached keys that may have signed a token, fetching the set when needed."""
        if self._keys is None or self._monotonic() - self._keys_at >= self._jwks_ttl:
            await self._refresh(forced=False)
        keys = self._matching(alg, kid)
        if not keys and kid is not None:
            await self._refresh(forced=True)
            keys = self._matching(alg, kid)
        if not keys:
            raise JwtRejected("unknown key")
        return keys

    async def _refresh(self, *, forced: bool) -> None:
        """Fetch the key set unless the rate limit holds; raises only when no keys are cached."""
        generation = self._generation
        async with self._lock:
            now = self._monotonic()
            if self._generation != generation:
                return  # another caller fetched while this one waited
            if now < self._quiet_until:
                if self._keys is None:
                    raise JwtRejected("issuer unreachable")
                return
            if forced:
                self._quiet_until = now + self._refresh_interval
            try:
                self._keys = await self._fetch_keys()
            except JwtRejected as exc:
                self._quiet_until = now + self._refresh_interval
                logger.warning("JWT issuer %s: keys not fetched (%s)", self.issuer, exc.reason)
                if self._keys is None:
                    raise
            else:
                self._keys_at = self._monotonic()
                self._generation += 1

    async def _fetch_keys(self) -> list[jwt.PyJWK]:
        if self._jwks_uri is None:
            self._jwks_uri = await self._discover()
        document = await self._get_json(self._jwks_uri)
        if document is None:
            self._jwks_uri = None  # the metadata may have moved it: look again next time
            raise JwtRejected("issuer unreachable")
        return parse_jwks(document)

    async def _discover(self) -> str:
        """The ``jwks_uri`` from the first metadata document the issuer serves."""
        for url in metadata_urls(self.issuer):
            document = await self._get_json(url)
            if document is None:
                continue
            # RFC 8414 §3.3: metadata naming another issuer must not be used.
            jwks_uri = document.get("jwks_uri")
            if document.get("issuer") != self.issuer or not isinstance(jwks_uri, str):
                raise JwtRejected("issuer metadata invalid")
            try:
                _check_url(jwks_uri, "jwks_uri")
            except ConfigError:
                raise JwtRejected("issuer metadata invalid") from None
            return jwks_uri
        raise JwtRejected("issuer unreachable")

    async def _get_json(self, url: str) -> dict[str, Any] | None:
        """A JSON object from ``url``; None when it answers anything else (404, HTML, too big)."""
        if self._http.is_closed:
            raise JwtRejected("issuer unreachable")  # closed: only the cached keys remain
        try:
            async with self._http.stream("GET", url, headers={"Accept": "application/json"}) as r:
                if r.status_code != 200:
                    return None
                body = bytearray()
                async for chunk in r.aiter_bytes():
                    body += chunk
                    if len(body) > MAX_DOCUMENT_BYTES:
                        return None
        except httpx.HTTPError as exc:
            logger.debug("JWT issuer %s: GET %s failed: %s", self.issuer, url, exc)
            raise JwtRejected("issuer unreachable") from None
        try:
            document = json.loads(body)
        except ValueError:
            return None
        return document if isinstance(document, dict) else None


class JwtPrincipals:
    """JWT access tokens as BZZZ principals (what ``AccessService`` asks of a verifier)."""

    def __init__(self, verifier: JwtVerifier) -> None:
        self.verifier = verifier

    async def principal_of(self, token: str) -> Principal:
        """The principal of a verified token: ``jwt:<issuer>#<subject>`` with its grants.

        A token that names no ``bzzz:role:`` scope may announce any role, as a network token
        created without ``--role`` does; projects must always be named.
        """
        identity = await self.verifier.verify(token)
        return principal(
            f"jwt:{identity.issuer}#{identity.subject}",
            "jwt",
            identity.projects,
            identity.roles or {ALL},
            Scope.parse(identity.scope),
            identity.subject,
        )

    async def aclose(self) -> None:
        """Close the verifier's HTTP client."""
        await self.verifier.aclose()
