"""A hosted agent's lifecycle, as the design draws it; any other move is refused.

Initializing → Idle → Active ⇄ Collaborating
                      Active → Escalating → Active | Terminating
Idle | Initializing | Escalating → Terminating
"""

from __future__ import annotations

import logging
from enum import StrEnum

from bzzz.errors import IllegalTransition

logger = logging.getLogger(__name__)


class AgentState(StrEnum):
    """Where a hosted agent is in its life."""

    INITIALIZING = "initializing"
    IDLE = "idle"
    ACTIVE = "active"
    COLLABORATING = "collaborating"
    ESCALATING = "escalating"
    TERMINATING = "terminating"


TRANSITIONS: dict[AgentState, frozenset[AgentState]] = {
    AgentState.INITIALIZING: frozenset({AgentState.IDLE, AgentState.TERMINATING}),
    AgentState.IDLE: frozenset({AgentState.ACTIVE, AgentState.TERMINATING}),
    AgentState.ACTIVE: frozenset(
        {AgentState.IDLE, AgentState.COLLABORATING, AgentState.ESCALATING}
    ),
    AgentState.COLLABORATING: frozenset({AgentState.ACTIVE}),
    AgentState.ESCALATING: frozenset({AgentState.ACTIVE, AgentState.TERMINATING}),
    AgentState.TERMINATING: frozenset(),
}


class Lifecycle:
    """The state of one agent; ``move`` refuses what TRANSITIONS does not allow."""

    def __init__(self, agent_id: str) -> None:
        self.agent_id = agent_id
        self.state = AgentState.INITIALIZING
        self.history: list[AgentState] = [self.state]

    def can(self, target: AgentState) -> bool:
        """Whether ``target`` is one step away."""
        return target in TRANSITIONS[self.state]

    def move(self, target: AgentState) -> None:
        """Go to ``target`` or raise IllegalTransition."""
        if not self.can(target):
            raise IllegalTransition(
                f"agent '{self.agent_id}' cannot go from {self.state} to {target}",
                details={"from": str(self.state), "to": str(target)},
            )
        logger.debug("agent %s: %s -> %s", self.agent_id, self.state, target)
        self.state = target
        self.history.append(target)
