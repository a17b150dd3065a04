"""The network this node belongs to (``[bzzz]``): its id, NATS, trust, admission, heartbeats;
its snapshots (``[snapshots]``)."""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import Field, ValidationInfo, field_validator

from bzzz.config.base import _Section


class BzzzSettings(_Section):
    """The network this node belongs to."""

    network_id: str = Field("main", pattern=r"^[A-Za-z0-9_-]{1,64}$")
    nats_url: list[str] = Field(default_factory=list)
    nats_creds: Path | None = Field(
        None, description="a NATS creds file (user JWT and seed) for the servers of nats_url"
    )
    node_url: str | None = None
    pubsub_topics: list[str] = Field(
        default_factory=lambda: ["bzzz/coordination/v1", "antennae/meta-discussion/v1"]
    )
    stream_replicas: int = Field(1, ge=1, le=5)
    partitions: int = Field(
        1,
        ge=1,
        le=64,
        description="the embedded nats-server spreads projects over this many streams (its "
        "subject mapping; external servers say it in their own configuration)",
    )
    publish_timeout: float = Field(10.0, gt=0)
    max_file_store: int = Field(1 << 30, gt=0)
    max_memory_store: int = Field(64 << 20, gt=0)
    heartbeat_interval: float = Field(5.0, gt=0, le=3600, description="seconds between heartbeats")
    heartbeat_misses: int = Field(
        3, ge=1, le=100, description="missed heartbeats before a peer is offline"
    )
    trusted_nodes: list[str] = Field(
        default_factory=list,
        description="public keys (or node ids) allowed on the network; empty = any signed node",
    )
    federated_networks: list[str] = Field(
        default_factory=list, description="other network ids whose agents lookups also search"
    )
    projects: list[str] = Field(
        default_factory=lambda: ["*"],
        description="the projects this node serves (stores, consumes, answers for); "
        "'*' = every project",
    )
    admission: bool = Field(
        True,
        description="apply envelopes only from nodes admitted to the network (bzzz node admit); "
        "off, tokens, nodes, keys and retention still come from admitted nodes only",
    )

    @field_validator("nats_url", "trusted_nodes", "federated_networks", "projects", mode="before")
    @classmethod
    def _split_lists(cls, value: object) -> object:
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @field_validator("federated_networks")
    @classmethod
    def _check_networks(cls, value: list[str], info: ValidationInfo) -> list[str]:
        for network in value:
            if not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", network):
                raise ValueError(f"{network!r} is not a network id")
            if network == info.data.get("network_id"):
                raise ValueError(f"{network!r} is this node's own network")
        return value

    @field_validator("projects")
    @classmethod
    def _check_projects(cls, value: list[str]) -> list[str]:
        if not value:
            raise ValueError("name at least one project, or '*' for every project")
        for project in value:
            if project != "*" and not re.fullmatch(r"[A-Za-z0-9._-]{1,128}", project):
                raise ValueError(f"{project!r} is not a project id (letters, digits, . _ -)")
        return value

    @field_validator("nats_creds")
    @classmethod
    def _check_creds(cls, value: Path | None) -> Path | None:
        if value is not None and not value.expanduser().is_file():
            raise ValueError(f"{value} is not a file")
        return value.expanduser() if value is not None else None

    @field_validator("nats_url")
    @classmethod
    def _check_urls(cls, value: list[str]) -> list[str]:
        for url in value:
            if not url.startswith(("nats://", "tls://", "ws://", "wss://")):
                raise ValueError(f"{url!r} is not a nats:// URL")
        return value


class SnapshotSettings(_Section):
    """Snapshots of a node's projected state in the network's object store (``[snapshots]``)."""

    every: int = Field(
        10_000,
        ge=0,
        description="write a snapshot after this many envelopes applied (0 = never on its own; "
        "`bzzz snapshot` still writes one)",
    )
    min_seconds: float = Field(
        300.0,
        ge=0,
        description="at least this long between two snapshots this node writes on its own "
        "(a snapshot costs as much as the state it holds, whatever the envelopes' rate)",
    )
    load: bool = Field(
        True,
        description="a node starting on an empty store loads the newest snapshot of its "
        "projects, then replays only the envelopes after it",
    )
    max_bytes: int = Field(
        256 << 20,
        ge=1 << 20,
        description="bytes a snapshot object may have: a bigger one is refused from the object "
        "store's metadata before any of it is read (the node replays the log instead), and "
        "this node writes none bigger",
    )
