"""How a node proves itself to NATS: a user and password, or a NATS creds file.

The embedded server's user and password live in the data directory (mode 0600); an external
server's come from ``BZZZ_NATS_CREDS`` (a creds file) or from the URL (``nats://user:pass@…``),
which nats-py reads itself. URLs are shown only through ``redact_url``.
"""

from __future__ import annotations

import json
import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

USER = "bzzz"


@dataclass(frozen=True, slots=True)
class NatsAuth:
    """Credentials for nats.connect; every field optional (a URL may carry its own)."""

    user: str | None = None
    password: str | None = field(default=None, repr=False)
    creds_file: Path | None = None

    def connect_options(self) -> dict[str, Any]:
        """The keyword arguments of ``nats.connect`` these credentials set."""
        options: dict[str, Any] = {}
        if self.user is not None:
            options["user"] = self.user
            options["password"] = self.password
        if self.creds_file is not None:
            options["user_credentials"] = str(self.creds_file)
        return options


def redact_url(url: str) -> str:
    """The URL without its user info: what may be logged or shown."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, f"***@{host}", parts.path, parts.query, parts.fragment))


def with_credentials(url: str, auth: NatsAuth) -> str:
    """``nats://user:password@host:port`` for a raw client (a secret: never log it)."""
    parts = urlsplit(url)
    netloc = f"{auth.user}:{auth.password}@{parts.netloc}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def load_or_create(path: Path) -> NatsAuth:
    """The user and password kept at ``path``, generated (mode 0600) the first time.

    Created under another name and linked into place, so two processes starting at once both
    end up with the one file that won, and a reader never sees half of it.
    """
    existing = read(path)
    if existing is not None:
        return existing
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump({"user": USER, "password": secrets.token_urlsafe(32)}, fh)
    try:
        os.link(tmp, path)
    except FileExistsError:
        pass  # another process was first: use its credentials
    finally:
        tmp.unlink(missing_ok=True)
    created = read(path)
    if created is None:
        raise OSError(f"{path} vanished while it was created")
    return created


def read(path: Path) -> NatsAuth | None:
    """The user and password kept at ``path``, or None while there is no such file."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except ValueError as exc:
        raise OSError(f"{path} does not hold NATS credentials") from exc
    return NatsAuth(user=str(data["user"]), password=str(data["password"]))
