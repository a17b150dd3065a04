"""A real JWT issuer for tests: OAuth metadata and a JWKS over HTTP on loopback, and token minting.

It stands in for an OAuth 2.1 authorization server as a resource server sees one: a Starlette app
under uvicorn in a background thread, on ``127.0.0.1`` and a port the OS picks, so any process
(the test itself, a spawned ``bzzz serve`` given ``BZZZ_AUTH_ISSUER=issuer.url``) reaches it at
a real URL until ``stop()``. Tokens are minted in the test process with the issuer's keys.

API::

    with JwtIssuer() as issuer:          # or the ``jwt_issuer`` fixture below
        issuer.url                       # the issuer identifier: http://127.0.0.1:<port>[<path>]
        issuer.jwks_url                  # where the metadata's jwks_uri points
        issuer.mint("alice", scopes=["bzzz:write", "bzzz:project:p1"])  # aud=AUDIENCE, exp +300 s
        issuer.mint("alice", exp=-120)   # exp / nbf are seconds from now; None leaves them out
        issuer.mint("alice", kid="ghost")  # an unknown kid: signed by a key the JWKS does not list
        issuer.publish("ghost")          # ... until it is published
        issuer.rotate()                  # a new signing key replaces the published ones
                                         # (keep_old=True keeps them); returns its kid
        issuer.unsigned(...)             # forgeries: alg "none", and HS256 keyed with the
        issuer.hs256_with_public_key(...)  # public key's PEM (algorithm confusion)
        issuer.tamper(token, scope=...)  # the claims changed, the original signature kept
        issuer.count("/jwks")            # how many requests a path got (issuer.requests: all)

Options: ``JwtIssuer(path="/tenant")`` gives an issuer with a path (RFC 8414 §3.1: the metadata
lives at ``/.well-known/oauth-authorization-server/tenant``); ``algorithm`` is ``RS256`` (default),
``ES256`` or ``EdDSA``; ``serve`` is which metadata documents exist (``{"oauth", "openid"}`` by
default, ``{"openid"}`` to test the fallback); ``metadata_overrides`` (a dict, changeable at any
time) is merged into both documents, e.g. ``{"issuer": "https://elsewhere"}``.

``mint(sub, *, kid, aud, scopes, exp, nbf, iss, scope_claim, jti, **extra)``: ``aud`` a string or a
list (default ``AUDIENCE``), ``scopes`` a list (default ``["bzzz:read"]``; None for no scope
claim) sent as the space-separated ``scope`` or, with ``scope_claim="scp"``, as an ``scp`` list;
``iss`` defaults to ``issuer.url``; ``extra`` claims are added as given. ``claims(...)`` returns
the claims without signing them; ``sign(claims, kid=None)`` signs any claims as they are.

From another test directory: ``from access.issuer import AUDIENCE, JwtIssuer, jwt_issuer`` (the
last in a conftest.py, as tests/access/conftest.py does), then e.g. start a node with
``BZZZ_AUTH_ISSUER=jwt_issuer.url`` and ``BZZZ_AUTH_AUDIENCE=AUDIENCE`` and call it with
``Authorization: Bearer <jwt_issuer.mint(...)>``.
"""

from __future__ import annotations

import base64
import hmac
import json
import socket
import threading
import time
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from hashlib import sha256
from typing import Any, Self

import jwt
import pytest
import uvicorn
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from jwt.algorithms import ECAlgorithm, OKPAlgorithm, RSAAlgorithm
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

AUDIENCE = "https://bzzz.test/mcp"
START_TIMEOUT = 10.0

_UNSET: Any = object()


@dataclass(frozen=True, slots=True)
class SigningKey:
    """A private key with its kid and JWS algorithm."""

    kid: str
    algorithm: str
    private: Any

    @classmethod
    def generate(cls, algorithm: str, kid: str | None = None) -> SigningKey:
        kid = kid or uuid.uuid4().hex[:12]
        if algorithm == "RS256":
            private: Any = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        elif algorithm == "ES256":
            private = ec.generate_private_key(ec.SECP256R1())
        elif algorithm == "EdDSA":
            private = ed25519.Ed25519PrivateKey.generate()
        else:
            raise ValueError(f"unsupported algorithm {algorithm}")
        return cls(kid, algorithm, private)

    def jwk(self) -> dict[str, Any]:
        """The public half as a JWK with kid, alg and use."""
        codecs: dict[str, Any] = {
            "RS256": RSAAlgorithm,
            "ES256": ECAlgorithm,
            "EdDSA": OKPAlgorithm,
        }
        codec = codecs[self.algorithm]
        jwk: dict[str, Any] = codec.to_jwk(self.private.public_key(), as_dict=True)
        return {**jwk, "kid": self.kid, "alg": self.algorithm, "use": "sig"}

    def public_pem(self) -> bytes:
        return bytes(
            self.private.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        )


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _json_b64(value: dict[str, Any]) -> str:
    return _b64(json.dumps(value, separators=(",", ":")).encode())


class _Server(uvicorn.Server):
    """uvicorn that says when it listens, and leaves signals to the main thread."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.listening = threading.Event()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        self.listening.set()


class JwtIssuer:
    """An OAuth authorization server's public face (metadata, JWKS) plus a token mint."""

    def __init__(
        self,
        *,
        path: str = "",
        algorithm: str = "RS256",
        serve: Iterable[str] = ("oauth", "openid"),
    ) -> None:
        self.path = path.rstrip("/")
        self.algorithm = algorithm
        self.serve = set(serve)
        self.metadata_overrides: dict[str, Any] = {}
        self.requests: list[str] = []
        self._lock = threading.Lock()
        self._current = SigningKey.generate(algorithm)
        self._keys = {self._current.kid: self._current}
        self._published = {self._current.kid}
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.bind(("127.0.0.1", 0))
        self.port: int = self._socket.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}{self.path}"
        self.jwks_url = f"http://127.0.0.1:{self.port}{self.path}/jwks"
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # --- lifecycle ---------------------------------------------------------------------------

    def start(self) -> Self:
        """Serve until ``stop()``; returns once the port accepts connections."""
        config = uvicorn.Config(
            self._app(), log_level="warning", access_log=False, lifespan="off", loop="asyncio"
        )
        self._server = _Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._socket]}, daemon=True
        )
        self._thread.start()
        if not self._server.listening.wait(START_TIMEOUT):
            raise RuntimeError("the test JWT issuer did not start")
        return self

    def stop(self) -> None:
        """Stop serving: the URL refuses connections from now on."""
        if self._server is not None and self._thread is not None:
            self._server.should_exit = True
            self._thread.join(START_TIMEOUT)
            self._server = self._thread = None
        self._socket.close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # --- keys --------------------------------------------------------------------------------

    @property
    def kid(self) -> str:
        """The kid tokens are signed with by default."""
        return self._current.kid

    def rotate(self, *, keep_old: bool = False) -> str:
        """A new signing key, published; the old ones stay published only with ``keep_old``."""
        key = SigningKey.generate(self.algorithm)
        with self._lock:
            self._keys[key.kid] = key
            self._published = ({*self._published} if keep_old else set()) | {key.kid}
            self._current = key
        return key.kid

    def publish(self, kid: str) -> None:
        """List a key (one ``mint(kid=…)`` made up) in the JWKS from now on."""
        with self._lock:
            self._key(kid)
            self._published.add(kid)

    def public_pem(self, kid: str | None = None) -> bytes:
        """The PEM of a key's public half (the current key by default)."""
        return self._key(kid or self.kid).public_pem()

    def _key(self, kid: str) -> SigningKey:
        """The key under kid; an unknown kid gets a new, unpublished key of the default alg."""
        if kid not in self._keys:
            self._keys[kid] = SigningKey.generate(self.algorithm, kid)
        return self._keys[kid]

    def jwks(self) -> dict[str, Any]:
        """The JWKS document as served now."""
        with self._lock:
            return {"keys": [self._keys[kid].jwk() for kid in sorted(self._published)]}

    # --- tokens ------------------------------------------------------------------------------

    def claims(
        self,
        sub: str | None = "alice",
        *,
        aud: str | list[str] | None = AUDIENCE,
        scopes: Iterable[str] | None = ("bzzz:read",),
        exp: float | None = 300,
        nbf: float | None = None,
        iss: str | None = _UNSET,
        scope_claim: str = "scope",
        jti: str | None = None,
        **extra: Any,
    ) -> dict[str, Any]:
        """The claims ``mint`` signs: times are seconds from now, None leaves a claim out."""
        now = int(time.time())
        optional = {
            "iss": self.url if iss is _UNSET else iss,
            "sub": sub,
            "aud": aud,
            "exp": None if exp is None else now + int(exp),
            "nbf": None if nbf is None else now + int(nbf),
            "jti": jti,
        }
        claims: dict[str, Any] = {
            "iat": now,
            **{k: v for k, v in optional.items() if v is not None},
        }
        if scopes is not None:
            values = list(scopes)
            claims[scope_claim] = values if scope_claim == "scp" else " ".join(values)
        return {**claims, **extra}

    def mint(self, sub: str | None = "alice", *, kid: str | None = None, **claims: Any) -> str:
        """A signed access token; see ``claims`` for the arguments."""
        return self.sign(self.claims(sub, **claims), kid=kid)

    def sign(self, claims: dict[str, Any], *, kid: str | None = None) -> str:
        """These claims exactly as given, signed with the key under kid (the current one)."""
        with self._lock:
            key = self._key(kid or self._current.kid)
        # The JWS layer, not jwt.encode: it would refuse claims of the wrong shape.
        payload = json.dumps(claims, separators=(",", ":")).encode()
        headers = {"kid": key.kid, "typ": "at+jwt"}
        return jwt.PyJWS().encode(payload, key.private, algorithm=key.algorithm, headers=headers)

    def unsigned(self, sub: str | None = "alice", **claims: Any) -> str:
        """A forgery: ``alg: none`` and an empty signature."""
        header = _json_b64({"alg": "none", "typ": "JWT", "kid": self.kid})
        return f"{header}.{_json_b64(self.claims(sub, **claims))}."

    def hs256_with_public_key(self, sub: str | None = "alice", **claims: Any) -> str:
        """A forgery: HS256 keyed with the public key's PEM (the classic algorithm confusion)."""
        header = _json_b64({"alg": "HS256", "typ": "JWT", "kid": self.kid})
        signing_input = f"{header}.{_json_b64(self.claims(sub, **claims))}"
        mac = hmac.new(self.public_pem(), signing_input.encode(), sha256).digest()
        return f"{signing_input}.{_b64(mac)}"

    def tamper(self, token: str, **changes: Any) -> str:
        """The token with claims changed (None removes one) and its original signature kept."""
        header, payload, signature = token.split(".")
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        for name, value in changes.items():
            if value is None:
                claims.pop(name, None)
            else:
                claims[name] = value
        return f"{header}.{_json_b64(claims)}.{signature}"

    # --- HTTP --------------------------------------------------------------------------------

    def count(self, path: str) -> int:
        """How many requests a path (``/jwks`` is relative to the issuer's path) has had."""
        full = f"{self.path}{path}" if path == "/jwks" else path
        with self._lock:
            return self.requests.count(full)

    def metadata(self, kind: str) -> dict[str, Any]:
        """The RFC 8414 (``oauth``) or OpenID (``openid``) metadata document."""
        document: dict[str, Any] = {
            "issuer": self.url,
            "jwks_uri": self.jwks_url,
            "authorization_endpoint": f"{self.url}/authorize",
            "token_endpoint": f"{self.url}/token",
            "response_types_supported": ["code"],
            "grant_types_supported": ["authorization_code", "refresh_token"],
            "code_challenge_methods_supported": ["S256"],
            "scopes_supported": ["bzzz:read", "bzzz:write", "bzzz:admin"],
        }
        if kind == "openid":
            document["subject_types_supported"] = ["public"]
            document["id_token_signing_alg_values_supported"] = [self.algorithm]
        return {**document, **self.metadata_overrides}

    def _routes(self) -> dict[str, Any]:
        """Path → what it serves (a callable, so each request sees the current state)."""
        oauth = f"/.well-known/oauth-authorization-server{self.path}"
        openid = [f"/.well-known/openid-configuration{self.path}"]
        if self.path:
            openid.append(f"{self.path}/.well-known/openid-configuration")
        routes: dict[str, Any] = {f"{self.path}/jwks": self.jwks}
        if "oauth" in self.serve:
            routes[oauth] = lambda: self.metadata("oauth")
        if "openid" in self.serve:
            routes.update({path: lambda: self.metadata("openid") for path in openid})
        return routes

    def _app(self) -> Starlette:
        async def endpoint(request: Request) -> Response:
            path = request.url.path
            with self._lock:
                self.requests.append(path)
            serve = self._routes().get(path)
            if serve is None:
                return JSONResponse({"error": "not_found"}, status_code=404)
            return JSONResponse(serve())

        return Starlette(routes=[Route("/{rest:path}", endpoint, methods=["GET"])])


@pytest.fixture
def jwt_issuer() -> Iterator[JwtIssuer]:
    """A JWT issuer serving its metadata and JWKS on loopback for one test."""
    with JwtIssuer() as issuer:
        yield issuer
