"""A remote A2A agent's card: fetched, checked well-formed, its JWS signatures verified.

A card that carries signatures is accepted only if one verifies against a key of the JWK set
its protected header names (``jku``, fetched under the same SSRF rules); a card without
signatures is accepted as it is, unless the caller asks for a signed one. An unreachable URL,
a non-A2A answer and a bad signature are refused with a message that says which. A URL is
read in its normal form (``guard.normal_url``), so any spelling of its host ends in one clear
refusal or in the request that was checked; a card or key set past the client's limit
(``a2a.max_card_bytes``) is refused before it is read whole.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any

import httpx
from a2a.client.card_resolver import parse_agent_card
from a2a.types import AgentCard
from google.protobuf.json_format import MessageToDict, ParseError

from bzzz.a2a.guard import Refused, TooLarge, normal_url
from bzzz.errors import InvalidParameters, NetworkError

CARD_PATH = "/.well-known/agent-card.json"
SIGNATURE_ALGORITHMS = ["ES256", "ES384", "RS256", "RS384", "RS512", "PS256", "EdDSA"]


@dataclass(frozen=True, slots=True)
class RemoteCard:
    """A verified card, where it came from, and the JSON-RPC endpoint it names."""

    card_url: str
    card: dict[str, Any]
    endpoint: str
    protocol_version: str
    signed: bool

    @property
    def name(self) -> str:
        """The agent's name on its card."""
        return str(self.card.get("name", ""))


def card_url_of(url: str) -> str:
    """Where an agent's card is: the URL itself when it names a card, else its well-known path."""
    if url.rstrip("/").endswith(".json"):
        return url
    return url.rstrip("/") + CARD_PATH


async def _get_json(http: httpx.AsyncClient, url: str, what: str) -> Any:
    url = normal_url(url, "url")
    try:
        response = await http.get(url, headers={"Accept": "application/json"})
    except TooLarge as exc:
        raise InvalidParameters(
            f"{what} at {url} is larger than {exc.limit} bytes (a2a.max_card_bytes): refused",
            details={"field": "url", "url": url, "max_bytes": exc.limit},
        ) from None
    except Refused as exc:
        raise InvalidParameters(
            f"{what} at {url} is refused: {exc}", details={"field": "url", "url": url}
        ) from None
    except httpx.InvalidURL as exc:
        raise InvalidParameters(
            f"{what} at {url!r} is no valid URL: {exc}", details={"field": "url"}
        ) from None
    except httpx.HTTPError as exc:
        raise NetworkError(
            f"{what} at {url} is unreachable: {exc or type(exc).__name__}",
            details={"url": url},
        ) from None
    if response.status_code != 200:
        raise NetworkError(
            f"{what} at {url} answered HTTP {response.status_code}, not an A2A agent card",
            details={"url": url, "status": response.status_code},
        )
    try:
        return response.json()
    except (ValueError, RecursionError):
        raise InvalidParameters(
            f"{what} at {url} is not JSON: not an A2A agent", details={"url": url}
        ) from None


async def fetch_card(
    http: httpx.AsyncClient, url: str, *, require_signature: bool = False
) -> RemoteCard:
    """The card at ``url`` (an agent's base URL or its card's URL), checked and verified."""
    where = card_url_of(normal_url(url, "url"))
    data = await _get_json(http, where, "the agent card")
    card = _parsed(data, where)
    if card.signatures:
        await _verify(http, card, where)
    elif require_signature:
        raise InvalidParameters(f"the card at {where} is not signed", details={"url": where})
    endpoint, version = _endpoint(card, where)
    return RemoteCard(where, MessageToDict(card), endpoint, version, bool(card.signatures))


def _parsed(data: Any, where: str) -> AgentCard:
    if not isinstance(data, dict):
        raise InvalidParameters(f"the answer at {where} is not an A2A agent card (not an object)")
    try:
        card = parse_agent_card(dict(data))
    except (ParseError, ValueError, TypeError) as exc:
        raise InvalidParameters(
            f"the answer at {where} is not a well-formed A2A agent card: {str(exc)[:300]}",
            details={"url": where},
        ) from None
    if not card.name or not card.supported_interfaces:
        raise InvalidParameters(
            f"the card at {where} is not an A2A agent card: it needs a name and an interface",
            details={"url": where},
        )
    return card


def _endpoint(card: AgentCard, where: str) -> tuple[str, str]:
    """The JSON-RPC interface the bridge speaks: 1.0 first, else 0.3."""
    found = [i for i in card.supported_interfaces if i.protocol_binding.upper() == "JSONRPC"]
    if not found:
        raise InvalidParameters(
            f"the card at {where} offers no JSON-RPC interface (the bridge speaks JSON-RPC)",
            details={"url": where},
        )
    found.sort(key=lambda i: not i.protocol_version.startswith("1."))
    return found[0].url, found[0].protocol_version or "1.0"


def _protected(signature_protected: str) -> dict[str, Any]:
    padded = signature_protected + "=" * (-len(signature_protected) % 4)
    try:
        header = json.loads(base64.urlsafe_b64decode(padded))
    except (ValueError, UnicodeDecodeError):
        return {}
    return header if isinstance(header, dict) else {}


async def _verify(http: httpx.AsyncClient, card: AgentCard, where: str) -> None:
    """Refuse the card unless one of its signatures verifies with a key of its ``jku``."""
    from a2a.utils.signing import SignatureVerificationError, create_signature_verifier
    from jwt import PyJWK, PyJWKSet
    from jwt.exceptions import PyJWKError, PyJWKSetError

    keys: dict[tuple[str | None, str | None], PyJWK] = {}
    for signature in card.signatures:
        header = _protected(signature.protected)
        jku, kid = header.get("jku"), header.get("kid")
        if not isinstance(jku, str):
            continue
        data = await _get_json(http, jku, "the card's key set (jku)")
        try:
            found = PyJWKSet.from_dict(data).keys if "keys" in data else [PyJWK(data)]
        except (PyJWKError, PyJWKSetError, TypeError) as exc:
            raise InvalidParameters(f"the key set at {jku} is not a JWK set: {exc}") from None
        for key in found:
            if kid is None or key.key_id == kid:
                keys[(kid, jku)] = key
    if not keys:
        raise InvalidParameters(
            f"the card at {where} is signed, but no signature names a key set (jku) "
            "with its key: it cannot be verified",
            details={"url": where},
        )

    def key_of(kid: str | None, jku: str | None) -> PyJWK:
        key = keys.get((kid, jku))
        if key is None:
            raise PyJWKError(f"no key {kid} at {jku}")
        return key

    verifier = create_signature_verifier(key_of, SIGNATURE_ALGORITHMS)
    try:
        verifier(card)
    except SignatureVerificationError as exc:
        raise InvalidParameters(
            f"the card at {where} has a bad signature: {exc}; refused",
            details={"url": where, "signature": "invalid"},
        ) from None
