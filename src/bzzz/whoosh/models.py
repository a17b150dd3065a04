"""The design's WHOOSH shapes (§4.2), as they cross the wire (snake_case JSON).

``AgentRegistration`` is the design's ``whoosh.AgentRegistration``: agent id, type
``gpt_agent``, role, capabilities, metadata (model, max_tokens, cost_per_token, bzzz_address),
endpoints (status_check, task_assign, collaborate) and health_check (interval, timeout,
retries). Durations are sent in seconds. ``cost_per_token`` is one figure where the price table
has two: the mean of the model's input and output price, USD per token.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict


class _Wire(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class AgentMetadata(_Wire):
    """What WHOOSH learns of the agent's model and where it lives on BZZZ."""

    model: str
    max_tokens: int
    cost_per_token: float
    bzzz_address: str


class AgentEndpoints(_Wire):
    """Where WHOOSH reaches the agent: this node's WHOOSH routes (``bzzz.api.whoosh``)."""

    status_check: str
    task_assign: str
    collaborate: str


class HealthCheckConfig(_Wire):
    """How WHOOSH checks the agent: every ``interval`` s, ``timeout`` s each, ``retries``."""

    interval: float
    timeout: float
    retries: int


class AgentRegistration(_Wire):
    """The body of ``POST {whoosh.url}/agents``."""

    agent_id: str
    type: Literal["gpt_agent"] = "gpt_agent"
    role: str
    capabilities: list[str]
    metadata: AgentMetadata
    endpoints: AgentEndpoints
    health_check: HealthCheckConfig


class AgentHealth(_Wire):
    """The body of ``PUT {whoosh.url}/agents/{id}/health``: the agent as of now."""

    agent_id: str
    status: str  # the directory's: idle, busy, offline
    available: bool
    state: str  # the hosted lifecycle's: idle, active, collaborating, ...
    current_tasks: int
    max_tasks: int
    completed_tasks: int
    failed_tasks: int
    timestamp: str

    def to_json(self) -> dict[str, Any]:
        """The body as JSON data."""
        return self.model_dump(mode="json")


def endpoints_for(public_url: str, agent_id: str) -> AgentEndpoints:
    """The three WHOOSH routes of one agent on the node at ``public_url``."""
    base = f"{public_url.rstrip('/')}/agents/{agent_id}"
    return AgentEndpoints(
        status_check=f"{base}/status",
        task_assign=f"{base}/tasks",
        collaborate=f"{base}/collaborate",
    )
