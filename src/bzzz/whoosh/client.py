"""The HTTP calls to WHOOSH: register, report health, deregister (httpx, bearer token).

Errors are translated here: no answer, a 5xx, 408 or 429 is ``WhooshUnavailable`` (retried by
the caller), any other 4xx is ``WhooshRefused`` with the status and an excerpt of WHOOSH's
answer. The token never appears in an error or a log line.
"""

from __future__ import annotations

import logging
from typing import Any

import httpx

from bzzz.config import WhooshSettings
from bzzz.errors import WhooshRefused, WhooshUnavailable
from bzzz.whoosh.models import AgentHealth, AgentRegistration

logger = logging.getLogger(__name__)

_RETRIED_STATUSES = frozenset({408, 425, 429})
_EXCERPT = 300


class WhooshClient:
    """One connection pool to WHOOSH; ``close`` when done."""

    def __init__(
        self, settings: WhooshSettings, *, client: httpx.AsyncClient | None = None
    ) -> None:
        if settings.url is None:
            raise ValueError("WhooshClient needs whoosh.url")
        self._token = settings.token.get_secret_value() if settings.token is not None else None
        headers = {"User-Agent": "bzzz-whoosh/1", "Accept": "application/json"}
        if self._token:
            headers["Authorization"] = f"Bearer {self._token}"
        self._http = client or httpx.AsyncClient(
            base_url=settings.url, headers=headers, timeout=settings.timeout
        )

    async def close(self) -> None:
        """Close the connections."""
        await self._http.aclose()

    async def register(self, registration: AgentRegistration) -> None:
        """``POST /agents`` with the registration."""
        await self._call("POST", "/agents", registration.model_dump(mode="json"))

    async def report_health(self, health: AgentHealth) -> None:
        """``PUT /agents/{id}/health``."""
        await self._call("PUT", f"/agents/{health.agent_id}/health", health.to_json())

    async def deregister(self, agent_id: str) -> None:
        """``DELETE /agents/{id}`` (a 404 counts as done: WHOOSH has forgotten it already)."""
        try:
            await self._call("DELETE", f"/agents/{agent_id}", None)
        except WhooshRefused as exc:
            if exc.details.get("status") != 404:
                raise

    async def _call(self, method: str, path: str, body: dict[str, Any] | None) -> None:
        try:
            response = await self._http.request(method, path, json=body)
        except httpx.HTTPError as exc:
            raise WhooshUnavailable(
                f"WHOOSH did not answer {method} {path} ({type(exc).__name__})",
                details={"method": method, "path": path},
            ) from exc
        status = response.status_code
        if 200 <= status < 300:
            return
        details = {
            "method": method,
            "path": path,
            "status": status,
            "answer": self._excerpt(response),
        }
        if status >= 500 or status in _RETRIED_STATUSES:
            raise WhooshUnavailable(
                f"WHOOSH answered {method} {path} with HTTP {status}", details=details
            )
        raise WhooshRefused(f"WHOOSH refused {method} {path} with HTTP {status}", details=details)

    def _excerpt(self, response: httpx.Response) -> str:
        text = response.text[:_EXCERPT]
        # WHOOSH might echo the request's headers back: never let the token into a log line.
        return text.replace(self._token, "***") if self._token else text
