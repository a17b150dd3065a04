"""What an OAuth 2.1 resource server tells its clients: RFC 9728 metadata and the 401 challenge.

Also the bridge to the MCP SDK: ``McpTokenVerifier`` fits ``mcp.server.auth.provider.TokenVerifier``
so a ``JwtVerifier`` can back the SDK's ``BearerAuthBackend`` / ``MCPServer(token_verifier=…)``.
"""

from __future__ import annotations

import logging
import re
from typing import Any
from urllib.parse import urlsplit

from mcp.server.auth.provider import AccessToken, TokenVerifier

from bzzz.access.jwt import JwtIdentity, JwtRejected, JwtVerifier

logger = logging.getLogger(__name__)

WELL_KNOWN = "/.well-known/oauth-protected-resource"
_UNSAFE = re.compile(r'[\x00-\x1f\x7f"\\]')


def protected_resource_metadata_url(resource_url: str) -> str:
    """Where RFC 9728 §3.1 puts a resource's metadata: the well-known segment before its path."""
    parts = urlsplit(resource_url)
    path = parts.path.rstrip("/")
    return f"{parts.scheme}://{parts.netloc}{WELL_KNOWN}{path}"


def protected_resource_metadata(
    resource_url: str, issuer: str | None, scopes: list[str]
) -> dict[str, Any]:
    """This resource's RFC 9728 metadata (``authorization_servers`` only with an issuer)."""
    metadata: dict[str, Any] = {"resource": resource_url}
    if issuer is not None:
        metadata["authorization_servers"] = [issuer]
    metadata["scopes_supported"] = list(scopes)
    metadata["bearer_methods_supported"] = ["header"]
    return metadata


def _quoted(value: str) -> str:
    """An RFC 9110 quoted-string; characters that could break out of it are dropped."""
    return '"' + _UNSAFE.sub("", value) + '"'


def www_authenticate(
    metadata_url: str,
    error: str | None = None,
    description: str | None = None,
    *,
    scope: str | None = None,
) -> str:
    """A 401/403's ``WWW-Authenticate``: ``Bearer resource_metadata="…"`` (RFC 9728 §5.1).

    ``error`` is an RFC 6750 §3.1 code (``invalid_request``, ``invalid_token``,
    ``insufficient_scope``); ``scope`` names the scopes an ``insufficient_scope`` answer needs.
    """
    params = [f"resource_metadata={_quoted(metadata_url)}"]
    if error is not None:
        params.append(f"error={_quoted(error)}")
    if description is not None:
        params.append(f"error_description={_quoted(description)}")
    if scope is not None:
        params.append(f"scope={_quoted(scope)}")
    return "Bearer " + ", ".join(params)


def grant_scopes(identity: JwtIdentity) -> list[str]:
    """The bzzz scope values that give exactly this identity's grants, level first."""
    return [
        f"bzzz:{identity.scope}",
        *(f"bzzz:project:{project}" for project in sorted(identity.projects)),
        *(f"bzzz:role:{role}" for role in sorted(identity.roles)),
    ]


class McpTokenVerifier(TokenVerifier):
    """The MCP SDK's ``TokenVerifier`` over a ``JwtVerifier``: an ``AccessToken`` or None.

    The SDK's bearer backend answers None with 401; the refusal's reason goes to the debug log.
    ``AccessToken.resource`` is the audience the token was checked against, so the SDK's
    ``validate_token_resource`` holds when the audience is the resource server URL.
    """

    def __init__(self, verifier: JwtVerifier) -> None:
        self._verifier = verifier

    async def verify_token(self, token: str) -> AccessToken | None:
        """The SDK's view of a token this node accepts; None for any refused token."""
        try:
            identity = await self._verifier.verify(token)
        except JwtRejected as exc:
            logger.debug("bearer token refused: %s", exc.reason)
            return None
        claims: dict[str, Any] = {"iss": identity.issuer}
        if identity.token_id is not None:
            claims["jti"] = identity.token_id
        return AccessToken(
            token=token,
            client_id=identity.subject,
            scopes=grant_scopes(identity),
            expires_at=int(identity.expires_at.timestamp()),
            resource=self._verifier.audience,
            subject=identity.subject,
            claims=claims,
        )
