"""Fixtures of the retention tests: nodes on a real nats-server, on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

from bzzz.config import Settings, load_settings

StoreFactory = Callable[[str], Awaitable[str]]


def node_settings(
    tmp_path: Path, name: str, nats_url: str, database_url: str, **retention: float
) -> Settings:
    """A node's settings: its own data directory and store, the shared NATS server."""
    return load_settings(
        environ={},
        overrides={
            "node": {"data_dir": str(tmp_path / name), "database_url": database_url},
            "bzzz": {"nats_url": [nats_url], "heartbeat_interval": 0.5},
            "retention": dict(retention),
            # Threads ten days old (a manual clock) must not close as idle, nor escalate (the
            # monitor's rules), while the nodes' states are compared.
            "conversation": {"default_timeout": 365 * 86_400, "escalation_rules": []},
        },
    )
