"""One hosted agent as the runtime holds it: its spec, lifecycle, caller and task slots.

Apart from the runtime (``runtime.py``) so the pieces of an agent's work (``agency.py``,
``collaboration.py``, ``participation.py``, ``worker.py``) can name it without importing the
runtime that builds them.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from bzzz.eventlog import Caller
from bzzz.llm.lifecycle import AgentState, Lifecycle
from bzzz.llm.roles import HostedAgentSpec

# Legal detours between the states a task's start and end ask for (see lifecycle.py).
_PATHS: dict[tuple[AgentState, AgentState], tuple[AgentState, ...]] = {
    (AgentState.IDLE, AgentState.COLLABORATING): (AgentState.ACTIVE, AgentState.COLLABORATING),
    (AgentState.COLLABORATING, AgentState.IDLE): (AgentState.ACTIVE, AgentState.IDLE),
    (AgentState.COLLABORATING, AgentState.ESCALATING): (
        AgentState.ACTIVE,
        AgentState.ESCALATING,
    ),
    (AgentState.ESCALATING, AgentState.COLLABORATING): (
        AgentState.ACTIVE,
        AgentState.COLLABORATING,
    ),
    (AgentState.ESCALATING, AgentState.IDLE): (AgentState.ACTIVE, AgentState.IDLE),
}


@dataclass(slots=True)
class HostedAgent:
    """One hosted agent: its spec, lifecycle, session and task slots."""

    spec: HostedAgentSpec
    caller: Caller
    lifecycle: Lifecycle
    slots: asyncio.Semaphore
    running: int = 0
    collaborating: int = 0
    completed: int = 0
    failed: int = 0
    response_ms: list[float] = field(default_factory=list)

    @property
    def id(self) -> str:
        """The agent id."""
        return self.spec.agent_id

    def go(self, target: AgentState) -> None:
        """Move to ``target`` along the design's transitions."""
        if self.lifecycle.state is target:
            return
        for step in _PATHS.get((self.lifecycle.state, target), (target,)):
            self.lifecycle.move(step)

    def settle(self) -> None:
        """The state the running tasks call for."""
        if self.collaborating:
            self.go(AgentState.COLLABORATING)
        elif self.running:
            self.go(AgentState.ACTIVE)
        else:
            self.go(AgentState.IDLE)

    def status(self) -> dict[str, Any]:
        """For the node's status and the costs resource."""
        times = sorted(self.response_ms)
        return {
            "agent_id": self.id,
            "role": self.spec.template.role,
            "project": self.spec.project,
            "state": str(self.lifecycle.state),
            "running": self.running,
            "completed": self.completed,
            "failed": self.failed,
            "p50_response_ms": times[len(times) // 2] if times else None,
        }
