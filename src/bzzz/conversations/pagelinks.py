"""Signed ack and resolve links: a person paged by a webhook answers without a credential.

A link names the escalation, the action (``ack`` or ``resolve``), the rota step and the name
it was sent to, and when it expires; ``sig`` is an HMAC-SHA256 of those under a key derived
from the network's data key (every node holds it, so any node verifies a link another signed;
with encryption off, from this node's own secret: only the signing node verifies it). A key
rotation keeps older links valid: every key of the keyring is tried.

A link is used once: the first use acknowledges (or resolves) the escalation and a second
finds it acknowledged (or resolved) and is refused, as any use after ``exp``.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlencode

from bzzz.errors import InvalidParameters, PermissionDenied

LINK_CONTEXT = b"bzzz-escalation-link\x00"
ACTIONS = ("ack", "resolve")
SIGNED_PREFIX = "/api/v1/signed/escalations"
_HEX = re.compile(r"^[0-9a-f]{64}$")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 ._@-]{0,127}$")


@dataclass(frozen=True, slots=True)
class LinkClaims:
    """What a verified link says: who it was sent to (the rota step and its name)."""

    escalation_id: str
    action: str
    step: int
    by: str
    expires: int


def _message(claims: LinkClaims) -> bytes:
    fields = (claims.escalation_id, claims.action, str(claims.step), claims.by, str(claims.expires))
    return "\n".join(fields).encode()


class LinkSigner:
    """Signs and verifies links with the network's keys (the first signs, every one verifies)."""

    def __init__(self, secrets: Callable[[], list[bytes]]) -> None:
        self._secrets = secrets

    def _mac(self, secret: bytes, claims: LinkClaims) -> str:
        key = hmac.new(secret, LINK_CONTEXT, hashlib.sha256).digest()
        return hmac.new(key, _message(claims), hashlib.sha256).hexdigest()

    def sign(self, claims: LinkClaims) -> str:
        """The ``sig`` of a link."""
        return self._mac(self._secrets()[0], claims)

    def url(self, base: str, claims: LinkClaims) -> str:
        """The whole link: POST it (a JSON body with ``reason`` is optional for resolve)."""
        query = urlencode(
            {"step": claims.step, "by": claims.by, "exp": claims.expires, "sig": self.sign(claims)}
        )
        path = f"{SIGNED_PREFIX}/{claims.escalation_id}/{claims.action}"
        return f"{base.rstrip('/')}{path}?{query}"

    def verify(
        self, escalation_id: str, action: str, query: dict[str, str], now: float
    ) -> LinkClaims:
        """The link's claims; PERMISSION_DENIED for a bad or expired signature."""
        if action not in ACTIONS:
            raise InvalidParameters(f"no link action {action[:16]!r}", details={"field": "action"})
        try:
            claims = LinkClaims(
                escalation_id, action, int(query["step"]), query["by"], int(query["exp"])
            )
            sig = query["sig"]
        except (KeyError, ValueError):
            raise InvalidParameters(
                "a signed link carries step, by, exp and sig", details={"field": "sig"}
            ) from None
        if not _HEX.match(sig) or not _NAME.match(claims.by) or not 0 <= claims.step < 64:
            raise PermissionDenied("the link is not valid", details={"missing": "signature"})
        if not any(hmac.compare_digest(self._mac(s, claims), sig) for s in self._secrets()):
            raise PermissionDenied("the link is not valid", details={"missing": "signature"})
        if claims.expires < now:
            raise PermissionDenied(
                "the link has expired", details={"missing": "signature", "expired": True}
            )
        return claims
