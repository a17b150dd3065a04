"""The remote A2A agents a data directory hosts: one JSON file beside the store (mode 0600).

Written by `bzzz a2a add|remove`, read by the node on that directory when it starts and when
the log tells it of a change, so the agents come back after a restart.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bzzz.errors import ConfigError

FILE_NAME = "a2a-agents.json"


@dataclass(slots=True)
class RemoteAgent:
    """One A2A agent put on the network: its id here, and where its card and endpoint are."""

    agent_id: str
    role: str
    project: str | None
    card_url: str
    endpoint: str
    protocol_version: str
    name: str
    description: str = ""
    skills: list[str] = field(default_factory=list)
    signed: bool = False
    added_at: str = ""

    def to_json(self) -> dict[str, Any]:
        """As the file (and `bzzz a2a list --json`) shows it."""
        return asdict(self)

    def metadata(self) -> dict[str, Any]:
        """What the announcement carries: where the node delivers the agent's messages."""
        return {"a2a": {"endpoint": self.endpoint, "card_url": self.card_url, "name": self.name}}


def path_of(data_dir: Path) -> Path:
    """The registry file of a data directory."""
    return data_dir / FILE_NAME


def load(data_dir: Path) -> dict[str, RemoteAgent]:
    """The registry (empty when there is none)."""
    path = path_of(data_dir)
    if not path.is_file():
        return {}
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        return {a["agent_id"]: RemoteAgent(**a) for a in raw.get("agents", [])}
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
        raise ConfigError(f"{path} is not a registry of A2A agents: {exc}") from None


def save(data_dir: Path, agents: dict[str, RemoteAgent]) -> None:
    """Write the registry whole (a rename, so a reader never sees half of it)."""
    path = path_of(data_dir)
    tmp = path.with_suffix(".tmp")
    body = json.dumps({"agents": [a.to_json() for a in agents.values()]}, indent=2)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(body + "\n")
    tmp.replace(path)
