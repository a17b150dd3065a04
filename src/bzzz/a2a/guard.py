"""Every request of the A2A bridge follows the webhook SSRF rules (``bzzz.events.targets``).

An httpx transport that checks each request's URL with the node's ``TargetPolicy``, resolves
its host, checks every address, and connects to the address it checked (DNS rebinding reaches
nothing it was not allowed to); redirects are not followed.
"""

from __future__ import annotations

import httpx

from bzzz.errors import InvalidParameters
from bzzz.events.targets import Resolver, TargetPolicy, parse_target, system_resolver


class RefusedTarget(httpx.TransportError):
    """A URL the SSRF rules refuse (its reason in the message)."""


class GuardedTransport(httpx.AsyncBaseTransport):
    """An httpx transport that reaches only what the target policy allows."""

    def __init__(self, policy: TargetPolicy, resolver: Resolver = system_resolver) -> None:
        self.policy = policy
        self.resolver = resolver
        self._inner = httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Check the target, pin its address, send."""
        url = str(request.url)
        try:
            target = self.policy.check_url(url)
            address, refusal = await self.policy.pin(target, self.resolver)
        except InvalidParameters as exc:
            why = exc.message.removeprefix("callback_webhook ").removeprefix("refused: ")
            raise RefusedTarget(why, request=request) from None
        except (OSError, UnicodeError) as exc:
            raise httpx.ConnectError(f"cannot resolve {target_host(url)}: {exc}") from exc
        if refusal is not None:
            raise RefusedTarget(refusal, request=request)
        host = f"[{address}]" if address.version == 6 else str(address)
        request.url = request.url.copy_with(host=host)
        request.headers["Host"] = target.authority
        if target.scheme == "https":
            request.extensions = {**request.extensions, "sni_hostname": target.host}
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        """Close the connections."""
        await self._inner.aclose()


def target_host(url: str) -> str:
    """The host a URL names (for messages)."""
    try:
        return parse_target(url).host
    except InvalidParameters:
        return url[:200]


def guarded_client(
    policy: TargetPolicy, timeout: float, resolver: Resolver = system_resolver
) -> httpx.AsyncClient:
    """An httpx client for the bridge: guarded, no redirects."""
    return httpx.AsyncClient(
        transport=GuardedTransport(policy, resolver), timeout=timeout, follow_redirects=False
    )
