"""Where the node answers, with which token, and one JSON request to it (standard library only).

The node's URL: ``--url``, else ``BZZZ_URL``, else the REST URL a running `bzzz serve` wrote
in its data directory's serving file (``--data-dir``, else ``BZZZ_DATA_DIR``, else
``~/.bzzz``; see ``bzzz.cli.serving``), else ``http://127.0.0.1:7331``. With ``--config``
(or ``BZZZ_CONFIG``) the settings file decides the data directory and that last address.
The token: ``--token``, else ``BZZZ_TOKEN``, else none (a node that requires one answers 401).
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

DEFAULT_DATA_DIR = "~/.bzzz"
DEFAULT_URL = "http://127.0.0.1:7331"
SERVING_SUFFIX = ".serving.json"
SERVING_MAX_BYTES = 16_384
# An answer larger than this is not read whole (a check's answer is a few hundred KB at most).
MAX_ANSWER_BYTES = 4_000_000
TIMEOUT = 5.0


class Unreachable(Exception):
    """The node could not be reached, or did not answer as a node does; the text says why."""


class Refused(Exception):
    """The node answered with an error (bad input, a refused credential); its ErrorResponse."""

    def __init__(self, status: int, answer: dict[str, Any]) -> None:
        self.status = status
        self.answer = answer
        super().__init__(str(answer.get("error") or f"HTTP {status}"))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def served_url(data_dir: Path) -> str | None:
    """The base URL of a node serving HTTP from ``data_dir`` now (its serving file)."""
    slots = data_dir.expanduser() / "slots"
    with contextlib.suppress(OSError):
        for path in sorted(slots.glob(f"*{SERVING_SUFFIX}")):
            try:
                if path.stat().st_size > SERVING_MAX_BYTES:
                    continue
                facts = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            if not isinstance(facts, dict) or not isinstance(facts.get("pid"), int):
                continue
            api = facts.get("api_url")
            if isinstance(api, str) and _alive(facts["pid"]):
                return base_of(api)
    return None


def base_of(url: str) -> str:
    """A node's base URL as given (``…/api/v1`` and a trailing ``/`` dropped)."""
    url = url.strip().rstrip("/")
    if url.endswith("/api/v1"):
        url = url[: -len("/api/v1")]
    return url


def node_url(url: str | None, data_dir: str | None, config: str | None) -> str:
    """The base URL of the node to ask (see the module docstring)."""
    given = url or os.environ.get("BZZZ_URL")
    if given:
        return base_of(given)
    config = config or os.environ.get("BZZZ_CONFIG")
    if config is None:
        directory = Path(data_dir or os.environ.get("BZZZ_DATA_DIR") or DEFAULT_DATA_DIR)
        return served_url(directory) or DEFAULT_URL
    # A settings file may move the data directory or the port: read it (slower, but rare).
    from bzzz.config import load_settings

    overrides = {"node": {"data_dir": data_dir}} if data_dir else None
    settings = load_settings(config, overrides=overrides)
    found = served_url(settings.node.data_dir)
    if found is not None:
        return found
    host = settings.node.http_host.strip()
    if host in ("0.0.0.0", "::", ""):
        host = "127.0.0.1"
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{settings.node.http_port}"


def node_token(token: str | None) -> str | None:
    """The bearer token to send (None: none)."""
    return token or os.environ.get("BZZZ_TOKEN") or None


def post_json(
    base: str, path: str, body: dict[str, Any], token: str | None, timeout: float = TIMEOUT
) -> dict[str, Any]:
    """POST ``body`` to ``base + path``; the answer's JSON object (Refused for an error status,
    Unreachable when no node answered)."""
    import http.client

    parts = urlsplit(base)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise Unreachable(f"'{base}' is not an http:// or https:// URL")
    connection_class = (
        http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    )
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    connection = connection_class(parts.hostname, parts.port, timeout=timeout)
    try:
        connection.request("POST", parts.path.rstrip("/") + path, json.dumps(body), headers)
        response = connection.getresponse()
        raw = response.read(MAX_ANSWER_BYTES + 1)
        status = response.status
    except (OSError, http.client.HTTPException) as exc:
        raise Unreachable(f"no node answered at {base} ({exc or type(exc).__name__})") from None
    finally:
        connection.close()
    if len(raw) > MAX_ANSWER_BYTES:
        raise Unreachable(f"the answer from {base} is larger than {MAX_ANSWER_BYTES} bytes")
    try:
        answer = json.loads(raw)
    except ValueError:
        raise Unreachable(f"{base} did not answer as a BZZZ node (HTTP {status})") from None
    if not isinstance(answer, dict):
        raise Unreachable(f"{base} did not answer as a BZZZ node (HTTP {status})")
    if status >= 400:
        raise Refused(status, answer)
    return answer
