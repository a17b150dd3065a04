"""Where the node answers, with which token, and one JSON request to it (standard library only).

The node's URL: ``--url``, else ``BZZZ_URL``, else the REST URL a running `bzzz serve` wrote
in its data directory's serving file (``--data-dir``, else ``BZZZ_DATA_DIR``, else
``~/.bzzz``; see ``bzzz.cli.serving``), else ``http://127.0.0.1:7331``. With ``--config``
(or ``BZZZ_CONFIG``) the settings file decides the data directory and that last address.
The token: ``--token``, else ``BZZZ_TOKEN``, else none (a node that requires one answers 401).
"""

from __future__ import annotations

import json
import os

# Not `typing` (nor pathlib, urllib.parse, http.client): each costs a hook's start time.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

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


def served_url(data_dir: str) -> str | None:
    """The base URL of a node serving HTTP from ``data_dir`` now (its serving file)."""
    slots = os.path.join(os.path.expanduser(data_dir), "slots")
    try:
        names = sorted(n for n in os.listdir(slots) if n.endswith(SERVING_SUFFIX))
    except OSError:
        return None
    for name in names:
        path = os.path.join(slots, name)
        try:
            if os.stat(path).st_size > SERVING_MAX_BYTES:
                continue
            with open(path, encoding="utf-8") as file:
                facts = json.load(file)
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
        directory = data_dir or os.environ.get("BZZZ_DATA_DIR") or DEFAULT_DATA_DIR
        return served_url(directory) or DEFAULT_URL
    # A settings file may move the data directory or the port: read it (slower, but rare).
    from bzzz.config import load_settings

    overrides = {"node": {"data_dir": data_dir}} if data_dir else None
    settings = load_settings(config, overrides=overrides)
    found = served_url(str(settings.node.data_dir))
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
    scheme, host, port, prefix = split_url(base)
    target = prefix.rstrip("/") + path
    data = json.dumps(body).encode()
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    try:
        if scheme == "https":
            status, raw = _https(host, port, target, data, headers, timeout)
        else:
            status, raw = _plain(host, port, target, data, headers, timeout)
    except (OSError, ValueError) as exc:
        raise Unreachable(f"no node answered at {base} ({exc or type(exc).__name__})") from None
    try:
        answer = json.loads(raw)
    except ValueError:
        raise Unreachable(f"{base} did not answer as a BZZZ node (HTTP {status})") from None
    if not isinstance(answer, dict):
        raise Unreachable(f"{base} did not answer as a BZZZ node (HTTP {status})")
    if status >= 400:
        raise Refused(status, answer)
    return answer


def split_url(url: str) -> tuple[str, str, int, str]:
    """(scheme, host, port, path) of an http:// or https:// URL; Unreachable otherwise."""
    scheme, sep, rest = url.partition("://")
    location, slash, path = rest.partition("/")
    location = location.rpartition("@")[2]  # no credentials in a node's URL
    if location.startswith("["):
        host, _, after = location[1:].partition("]")
        port = after[1:] if after.startswith(":") else ""
    else:
        host, _, port = location.partition(":")
    scheme = scheme.lower()
    if not sep or scheme not in ("http", "https") or not host or not (port or "0").isdigit():
        raise Unreachable(f"'{url}' is not an http:// or https:// URL")
    default = 443 if scheme == "https" else 80
    return scheme, host, int(port) if port else default, slash + path


def _plain(
    host: str, port: int, target: str, data: bytes, headers: dict[str, str], timeout: float
) -> tuple[int, bytes]:
    """One HTTP/1.1 request over a plain socket (``http.client`` imports ``ssl`` and the
    ``email`` package: most of a hook's start); ``Connection: close``, so the answer ends
    with the connection. ValueError for an answer that is not HTTP."""
    import socket

    shown = f"[{host}]" if ":" in host else host
    lines = [f"POST {target} HTTP/1.1", f"Host: {shown}:{port}", "Connection: close"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    lines.append(f"Content-Length: {len(data)}")
    request = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + data
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(request)
        chunks, size = [], 0
        while size <= MAX_ANSWER_BYTES:
            chunk = sock.recv(65536)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    if size > MAX_ANSWER_BYTES:
        raise ValueError(f"the answer is larger than {MAX_ANSWER_BYTES} bytes")
    head, sep, rest = b"".join(chunks).partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    version, _, code = status_line.partition(" ")
    if not sep or not version.startswith("HTTP/") or not code[:3].isdigit():
        raise ValueError("the answer is not HTTP")
    fields = {k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in header_lines)}
    if fields.get("transfer-encoding", "").lower() == "chunked":
        rest = _unchunk(rest)
    elif "content-length" in fields:
        rest = rest[: int(fields["content-length"])]
    return int(code[:3]), rest


def _unchunk(raw: bytes) -> bytes:
    """The body of a chunked answer."""
    out: list[bytes] = []
    at = 0
    while True:
        end = raw.index(b"\r\n", at)
        size = int(raw[at:end].split(b";")[0], 16)
        if size == 0:
            return b"".join(out)
        out.append(raw[end + 2 : end + 2 + size])
        at = end + 2 + size + 2


def _https(
    host: str,
    port: int,
    target: str,
    data: bytes,
    headers: dict[str, str],
    timeout: float,
) -> tuple[int, bytes]:
    """One request over TLS (a node behind a proxy), with ``http.client``."""
    import http.client

    connection = http.client.HTTPSConnection(host, port, timeout=timeout)
    try:
        connection.request("POST", target, data, headers)
        response = connection.getresponse()
        raw = response.read(MAX_ANSWER_BYTES + 1)
    except http.client.HTTPException as exc:
        raise ValueError(str(exc) or type(exc).__name__) from None
    finally:
        connection.close()
    if len(raw) > MAX_ANSWER_BYTES:
        raise ValueError(f"the answer is larger than {MAX_ANSWER_BYTES} bytes")
    return response.status, raw
