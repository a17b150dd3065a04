"""RFC 9728 metadata, the Bearer challenge, and the MCP SDK's bearer auth over a JwtVerifier."""

from __future__ import annotations

import asyncio

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.auth.utils import extract_field_from_www_auth
from mcp.client.streamable_http import streamable_http_client
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.middleware.bearer_auth import (
    AuthenticatedUser,
    BearerAuthBackend,
    RequireAuthMiddleware,
)
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer
from mcp.shared.auth import ProtectedResourceMetadata
from pydantic import AnyHttpUrl
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from access.issuer import AUDIENCE, JwtIssuer
from bzzz.access.jwt import JwtVerifier
from bzzz.access.oauth import (
    McpTokenVerifier,
    protected_resource_metadata,
    protected_resource_metadata_url,
    www_authenticate,
)

METADATA_URL = "https://bzzz.test/.well-known/oauth-protected-resource/mcp"
LOCAL = "http://127.0.0.1:7331/mcp"  # the SDK's DNS-rebinding guard wants a loopback Host


def test_the_metadata_url_puts_the_well_known_segment_before_the_path() -> None:
    assert protected_resource_metadata_url(AUDIENCE) == METADATA_URL
    assert protected_resource_metadata_url("http://127.0.0.1:7331/") == (
        "http://127.0.0.1:7331/.well-known/oauth-protected-resource"
    )


def test_the_metadata_names_the_issuer_and_scopes_as_the_sdk_reads_them() -> None:
    scopes = ["bzzz:read", "bzzz:write"]

    metadata = protected_resource_metadata(AUDIENCE, "https://as.example", scopes)

    assert metadata == {
        "resource": AUDIENCE,
        "authorization_servers": ["https://as.example"],
        "scopes_supported": scopes,
        "bearer_methods_supported": ["header"],
    }
    parsed = ProtectedResourceMetadata.model_validate(metadata)
    assert (str(parsed.resource), parsed.scopes_supported) == (AUDIENCE, scopes)


def test_metadata_without_an_issuer_names_no_authorization_server() -> None:
    metadata = protected_resource_metadata(AUDIENCE, None, ["bzzz:read"])

    assert "authorization_servers" not in metadata
    assert metadata["bearer_methods_supported"] == ["header"]


def test_the_challenge_points_at_the_metadata() -> None:
    assert www_authenticate(METADATA_URL) == f'Bearer resource_metadata="{METADATA_URL}"'


def test_the_challenge_carries_the_error_as_the_sdk_client_reads_it() -> None:
    value = www_authenticate(
        METADATA_URL, "insufficient_scope", 'needs "write"\r\n', scope="bzzz:write"
    )
    response = httpx2.Response(403, headers={"WWW-Authenticate": value})

    assert value.startswith("Bearer ")
    assert extract_field_from_www_auth(response, "resource_metadata") == METADATA_URL
    assert extract_field_from_www_auth(response, "error") == "insufficient_scope"
    assert extract_field_from_www_auth(response, "error_description") == "needs write"
    assert extract_field_from_www_auth(response, "scope") == "bzzz:write"


# --- the MCP SDK's bearer auth, backed by McpTokenVerifier ---------------------------------


async def _whoami(scope: Scope, receive: Receive, send: Send) -> None:
    user = scope["user"]
    assert isinstance(user, AuthenticatedUser)
    token = user.access_token
    body = {"subject": token.subject, "scopes": token.scopes, "iss": (token.claims or {})["iss"]}
    await JSONResponse(body)(scope, receive, send)


def _sdk_protected_app(verifier: JwtVerifier) -> Starlette:
    """A route behind the SDK's own bearer backend and RequireAuthMiddleware."""
    backend = BearerAuthBackend(
        McpTokenVerifier(verifier), resource_server_url=AnyHttpUrl(AUDIENCE)
    )
    guarded = RequireAuthMiddleware(_whoami, ["bzzz:write"], AnyHttpUrl(METADATA_URL))
    return Starlette(
        routes=[Route("/mcp", guarded, methods=["GET"])],
        middleware=[Middleware(AuthenticationMiddleware, backend=backend)],
    )


async def test_the_sdk_bearer_auth_accepts_a_good_jwt_and_refuses_others(
    jwt_issuer: JwtIssuer, verifier: JwtVerifier
) -> None:
    app = _sdk_protected_app(verifier)
    good = jwt_issuer.mint("alice", scopes=["bzzz:write", "bzzz:project:p1"], jti="j1")
    read_only = jwt_issuer.mint("bob", scopes=["bzzz:read"])
    expired = jwt_issuer.mint("alice", scopes=["bzzz:write"], exp=-120)

    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="https://bzzz.test"
    ) as client:
        ok = await client.get("/mcp", headers={"Authorization": f"Bearer {good}"})
        refused = await client.get("/mcp", headers={"Authorization": f"Bearer {expired}"})
        forbidden = await client.get("/mcp", headers={"Authorization": f"Bearer {read_only}"})

    assert ok.status_code == 200
    assert ok.json() == {
        "subject": "alice",
        "scopes": ["bzzz:write", "bzzz:project:p1"],
        "iss": jwt_issuer.url,
    }
    assert refused.status_code == 401
    assert f'resource_metadata="{METADATA_URL}"' in refused.headers["www-authenticate"]
    assert forbidden.status_code == 403


def _mcp_server(issuer: JwtIssuer, verifier: JwtVerifier) -> MCPServer:
    """The SDK's MCPServer with its own resource-server auth backed by McpTokenVerifier."""
    auth = AuthSettings(
        issuer_url=issuer.url,
        resource_server_url=LOCAL,
        required_scopes=["bzzz:read"],
        validate_token_resource=True,
    )
    server = MCPServer("jwt-test", token_verifier=McpTokenVerifier(verifier), auth=auth)

    @server.tool()
    def whoami() -> str:
        """The caller's subject and scopes, as the SDK's auth context holds them."""
        token = get_access_token()
        assert token is not None
        return " ".join([token.subject or "", *token.scopes])

    return server


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_the_official_client_calls_an_mcp_server_with_a_jwt(
    mode: str, jwt_issuer: JwtIssuer
) -> None:
    verifier = JwtVerifier(jwt_issuer.url, LOCAL)
    server = _mcp_server(jwt_issuer, verifier)
    app = server.streamable_http_app()
    token = jwt_issuer.mint("zoe", aud=LOCAL, scopes=["bzzz:read", "bzzz:project:p1"])
    wrong = jwt_issuer.mint("zoe", aud=AUDIENCE, scopes=["bzzz:read"])

    http = httpx2.AsyncClient(
        transport=httpx2.ASGITransport(app=app), headers={"Authorization": f"Bearer {token}"}
    )
    async with verifier, server.session_manager.run(), http, asyncio.timeout(30):
        async with Client(streamable_http_client(LOCAL, http_client=http), mode=mode) as client:
            result = await client.call_tool("whoami", {})
        refused = await http.post(LOCAL, json={}, headers={"Authorization": f"Bearer {wrong}"})
        metadata = await http.get(protected_resource_metadata_url(LOCAL))

    assert not result.is_error
    assert result.content[0].text == "zoe bzzz:read bzzz:project:p1"  # type: ignore[union-attr]
    assert refused.status_code == 401
    challenge = f'resource_metadata="{protected_resource_metadata_url(LOCAL)}"'
    assert challenge in refused.headers["www-authenticate"]
    assert metadata.json()["authorization_servers"] == [jwt_issuer.url]
