"""Every request of the A2A bridge follows the webhook SSRF rules, and reads a bounded answer.

An httpx transport that checks each request's URL with the node's ``TargetPolicy``, resolves
its host, checks every address, and connects to the address it checked (DNS rebinding reaches
nothing it was not allowed to); redirects are not followed. What comes back is read as it
arrives and counted: a ``Content-Length`` past the limit is refused before the body is read,
and a body without one is refused at the first chunk past the limit, so memory holds at most
the limit (``a2a.max_answer_bytes``, ``a2a.max_card_bytes``). Bodies are asked for
uncompressed (``Accept-Encoding: identity``) and a compressed one is refused: a small gzip can
unpack to any size.

``Refused`` (a target the rules refuse, a body past its limit) is final, never retried, and
is no httpx error, so no client library wraps it as a network failure.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

import httpx

from bzzz.errors import InvalidParameters
from bzzz.events.targets import Resolver, TargetPolicy, parse_target, system_resolver

DEFAULT_MAX_BYTES = 4 << 20
_USERINFO = re.compile(r"^([^:/?#]*://)[^/?#]*@")


class Refused(Exception):
    """A request the guard stops for good (the reason in the message)."""


class RefusedTarget(Refused):
    """A URL the SSRF rules refuse."""


class TooLarge(Refused):
    """An answer past the limit of what is read."""

    def __init__(self, limit: int, url: str) -> None:
        super().__init__(f"the answer of {url} is larger than {limit} bytes")
        self.limit = limit
        self.url = url


class _Bounded(httpx.AsyncByteStream):
    """A response body that refuses to go past ``limit`` bytes."""

    def __init__(self, inner: httpx.AsyncByteStream, limit: int, url: str) -> None:
        self._inner = inner
        self._limit = limit
        self._url = url

    async def __aiter__(self) -> AsyncIterator[bytes]:
        read = 0
        async for chunk in self._inner:
            read += len(chunk)
            if read > self._limit:
                raise TooLarge(self._limit, self._url)
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


class GuardedTransport(httpx.AsyncBaseTransport):
    """An httpx transport that reaches only what the target policy allows, reads bounded."""

    def __init__(
        self,
        policy: TargetPolicy,
        resolver: Resolver = system_resolver,
        *,
        max_bytes: int = DEFAULT_MAX_BYTES,
    ) -> None:
        self.policy = policy
        self.resolver = resolver
        self.max_bytes = max_bytes
        self._inner = httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Check the target, pin its address, send; the answer's body comes bounded."""
        url = str(request.url)
        try:
            target = self.policy.check_url(url)
            address, refusal = await self.policy.pin(target, self.resolver)
        except InvalidParameters as exc:
            raise RefusedTarget(reason_of(exc)) from None
        except (OSError, UnicodeError) as exc:
            raise httpx.ConnectError(f"cannot resolve {target_host(url)}: {exc}") from exc
        if refusal is not None:
            raise RefusedTarget(refusal)
        host = f"[{address}]" if address.version == 6 else str(address)
        request.url = request.url.copy_with(host=host)
        request.headers["Host"] = target.authority
        request.headers["Accept-Encoding"] = "identity"
        if target.scheme == "https":
            request.extensions = {**request.extensions, "sni_hostname": target.host}
        response = await self._inner.handle_async_request(request)
        await self._check_headers(response, url)
        inner = response.stream
        if isinstance(inner, httpx.AsyncByteStream):  # always, from the async transport
            response.stream = _Bounded(inner, self.max_bytes, url)
        return response

    async def _check_headers(self, response: httpx.Response, url: str) -> None:
        """Refuse, before its body is read, an answer that says it is too big or compressed."""
        encoding = response.headers.get("Content-Encoding", "identity").strip().lower()
        length = response.headers.get("Content-Length", "").strip()
        refusal: Refused | None = None
        if encoding not in ("", "identity"):
            refusal = Refused(f"the answer of {url} is compressed ({encoding[:40]}): not read")
        elif length.isdigit() and int(length) > self.max_bytes:
            refusal = TooLarge(self.max_bytes, url)
        if refusal is not None:
            await response.aclose()  # drops the connection: the body is never read
            raise refusal

    async def aclose(self) -> None:
        """Close the connections."""
        await self._inner.aclose()


def reason_of(exc: InvalidParameters) -> str:
    """The refusal of a target check, without the webhook field it was first written for."""
    return exc.message.removeprefix("callback_webhook ").removeprefix("refused: ")


def target_host(url: str) -> str:
    """The host a URL names (for messages)."""
    try:
        return parse_target(url).host
    except InvalidParameters:
        return url[:200]


def shown_url(url: str) -> str:
    """A URL as a message may show it: its user part (a credential, maybe) masked, cut."""
    return repr(_USERINFO.sub(r"\1***@", url[:200]))


def normal_url(url: str, field: str, policy: TargetPolicy | None = None) -> str:
    """``url`` in normal form: its host as the rules read it, its port always valid.

    Every spelling of a host (octal, hex or decimal IPv4, IPv6 forms, full-width digits)
    becomes the one the check runs on, so what is requested is what was checked. A URL that
    cannot be read, or that ``policy`` (when given) refuses, is InvalidParameters naming
    ``field``.
    """
    try:
        target = parse_target(url) if policy is None else policy.check_url(url)
    except InvalidParameters as exc:
        raise InvalidParameters(
            f"{field} {shown_url(url)} is refused: {reason_of(exc)}", details={"field": field}
        ) from None
    return f"{target.scheme}://{target.authority}{target.path}"


async def check_endpoint(
    policy: TargetPolicy, url: str, field: str, resolver: Resolver = system_resolver
) -> str:
    """``url`` in normal form when a delivery could reach it: the check deliveries make.

    A name is resolved and each of its addresses checked now; one that does not resolve now
    passes (a delivery retries it, and checks it again).
    """
    normal = normal_url(url, field, policy)
    target = parse_target(normal)
    try:
        _, refusal = await policy.pin(target, resolver)
    except (OSError, UnicodeError):
        return normal
    if refusal is not None:
        raise InvalidParameters(
            f"{field} {shown_url(url)} is refused: {refusal}", details={"field": field}
        )
    return normal


def guarded_client(
    policy: TargetPolicy,
    timeout: float,
    resolver: Resolver = system_resolver,
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> httpx.AsyncClient:
    """An httpx client for the bridge: guarded, bounded, no redirects."""
    return httpx.AsyncClient(
        transport=GuardedTransport(policy, resolver, max_bytes=max_bytes),
        timeout=timeout,
        follow_redirects=False,
    )
