"""How CLI faces call a running node over HTTP: its URL, the token, one request.

The node: ``--url``, else ``BZZZ_URL``, else the node serving from the data directory (its
serving file, ``cli/serving.py``), else the settings' HTTP host and port. The token:
``--token``, else ``BZZZ_TOKEN`` (none: a loopback node without tokens lets the call in).
A node that cannot be reached raises :class:`Unreachable`, which each command turns into one
line (the git guard and the agent hooks apply their offline setting); an error answer
becomes the node's own error (code, message, details).
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from bzzz.errors import BzzzError, ErrorCode

if TYPE_CHECKING:
    from bzzz.config import Settings

# A hook waits at most this long for the node (seconds) before it says the node is away.
TIMEOUT = 5.0
# An answer is a few kilobytes; anything past this is not one of ours.
MAX_ANSWER_BYTES = 4_000_000


class Unreachable(BzzzError):
    """The node could not be reached (no answer, refused connection, timeout)."""

    def __init__(self, url: str, reason: str) -> None:
        super().__init__(
            f"cannot reach the node at {url} ({reason})",
            code=ErrorCode.NETWORK_ERROR,
            details={"url": url},
        )
        self.url = url


def add_flags(parser: argparse.ArgumentParser) -> None:
    """``--url`` and ``--token``."""
    parser.add_argument("--url", help="the node's base URL (or BZZZ_URL; default: the local node)")
    parser.add_argument("--token", help="the bearer token to call it with (or BZZZ_TOKEN)")


def chosen(args: argparse.Namespace) -> bool:
    """Whether a command that can read the store beside a node was asked to call the node
    instead: a node or token given, or a change asked for (``--mark-read``)."""
    return bool(
        getattr(args, "mark_read", False)
        or getattr(args, "url", None)
        or getattr(args, "token", None)
        or os.environ.get("BZZZ_URL")
        or os.environ.get("BZZZ_TOKEN")
    )


def node_url(args: argparse.Namespace, settings: Settings) -> str:
    """The node's base URL (``http://host:port``), as the module docstring says."""
    given = getattr(args, "url", None) or os.environ.get("BZZZ_URL")
    if given:
        return str(given).rstrip("/")
    from bzzz.cli.serving import running

    for facts in running(settings.node.data_dir.expanduser()):
        api = facts.get("api_url")
        if isinstance(api, str) and api.endswith("/api/v1"):
            return api.removesuffix("/api/v1")
    from bzzz.cli.init import mcp_url

    return mcp_url(settings).removesuffix("/mcp")


def token_of(args: argparse.Namespace) -> str | None:
    """The bearer token, or None."""
    token = getattr(args, "token", None) or os.environ.get("BZZZ_TOKEN")
    return str(token).strip() if token else None


@dataclass(frozen=True, slots=True)
class Remote:
    """One node, called with one token."""

    url: str
    token: str | None
    timeout: float = TIMEOUT

    @classmethod
    def of(cls, args: argparse.Namespace, settings: Settings) -> Remote:
        """The node and token a command was given."""
        return cls(node_url(args, settings), token_of(args))

    def call(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, Any] | None = None,
        body: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """One request under /api/v1; the JSON answer, or the node's error raised."""
        import httpx

        headers = {"Accept": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        try:
            with httpx.Client(timeout=self.timeout) as http:
                answer = http.request(
                    method, f"{self.url}/api/v1{path}", params=params, json=body, headers=headers
                )
        except httpx.HTTPError as exc:
            raise Unreachable(self.url, type(exc).__name__) from None
        if len(answer.content) > MAX_ANSWER_BYTES:
            raise Unreachable(self.url, "an answer past its bound")
        try:
            data = answer.json()
        except ValueError:
            data = None
        if not isinstance(data, dict):
            raise Unreachable(self.url, f"HTTP {answer.status_code}, not a BZZZ answer")
        if answer.status_code >= 400 or data.get("success") is False:
            raise _error(data, answer.status_code)
        return data


def _error(data: dict[str, Any], status: int) -> BzzzError:
    details = data.get("details") if isinstance(data.get("details"), dict) else {}
    message = str(data.get("error") or data.get("message") or f"HTTP {status}")
    try:
        code = ErrorCode(str(data.get("code")))
    except ValueError:
        code = ErrorCode.PERMISSION_DENIED if status in (401, 403) else ErrorCode.NETWORK_ERROR
    return BzzzError(message, code=code, details=details)
