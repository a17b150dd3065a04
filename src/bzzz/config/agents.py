"""Agents on the network and the hosted agents' way of working (``[agents]``)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from bzzz.config.base import _Section


class AgentsSettings(_Section):
    """Agents on this network."""

    max_agents: int = Field(100_000, gt=0)
    lease_seconds: float = Field(
        120.0,
        gt=0,
        description="a sessionless agent goes offline this long after its owner's last call",
    )
    default_roles: list[dict[str, Any]] = Field(default_factory=list)
    max_replies_per_thread: int = Field(
        10, ge=1, le=1000, description="messages a hosted agent posts in one thread, at most"
    )
    collaboration_threshold: float = Field(
        0.8, ge=0, le=1, description="a task more complex than this opens a collaborative review"
    )
    collaboration_timeout: float = Field(
        600.0, gt=0, description="seconds a hosted agent waits for its reviewers' answers"
    )
    progress_interval: float = Field(
        1.0, ge=0, description="seconds between task_progress messages of a streaming task"
    )
    stream_progress: bool = Field(True, description="stream tasks and post their partial text")
    knowledge_limit: int = Field(5, ge=0, le=50, description="project knowledge per prompt")
