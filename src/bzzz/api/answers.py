"""What the HTTP routes answer: one pydantic model per success body, named by its Operation.

The OpenAPI document takes every response schema from these models (as it takes the query and
body schemas from the routes' input models), so a generated client gets typed answers, and
tests/api/test_openapi_answers.py validates every answer of a run of the routes against the
document. The fields the clients rely on are typed; the services may add more (``extra``
allowed), so an answer never breaks on a new field. The tools' own answers (bzzz_announce,
bzzz_lookup, bzzz_get, bzzz_post) are the MCP output models.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from bzzz.mcp.models import AnnounceOutput, GetOutput, LookupOutput, PostOutput

__all__ = ["AnnounceOutput", "GetOutput", "LookupOutput", "PostOutput"]


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class Answer(_Open):
    """Every success answer of the API."""

    success: Literal[True]


class Agent(_Open):
    """An agent as the services show it."""

    id: str
    role: str
    capabilities: list[str]
    specialization: str | None = None
    status: str
    available: bool
    performance: float
    max_tasks: int
    active_tasks: int
    project: str | None = None
    task: str | None = None
    address: str
    node_id: str | None = None
    created_at: str | None = None
    last_activity: str | None = None


class Task(_Open):
    """A task (the seed's Task: camelCase times)."""

    id: str
    type: str
    description: str | None = None
    status: str
    priority: str
    assigner: str | None = None
    data: dict[str, Any] | None = None
    thread_id: str | None = None
    progress: Any = None
    result: Any = None
    error: Any = None
    startTime: str | None = None  # the seed's name
    endTime: str | None = None  # the seed's name


class OverviewTask(Task):
    """A task with the agent that holds it."""

    agent_id: str
    project: str | None = None


class ThreadSummary(_Open):
    """A thread as a list shows it."""

    id: str
    topic: str
    participants: list[str]
    status: str
    last_activity: str | None = None
    message_count: int


class Thread(ThreadSummary):
    """A thread with its history of escalations, decisions and consensus."""

    former_participants: list[str] = Field(default_factory=list)
    creator: str | None = None
    created_at: str | None = None
    summary: Any = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    escalation_history: list[dict[str, Any]] = Field(default_factory=list)
    shared_context: dict[str, Any] = Field(default_factory=dict)
    decision_log: list[dict[str, Any]] = Field(default_factory=list)
    consensus: dict[str, Any] | None = None


class OverviewThread(Thread):
    """A thread with what the dashboard shows of it."""

    open_escalations: int
    asks_a_human: bool
    slurp_events: list[dict[str, Any]]


class Escalation(_Open):
    """The seed's EscalationEvent and the state of its actions."""

    id: str
    threadId: str  # the seed's name
    rule: str
    priority: int | str
    reason: str
    triggeredAt: str | None = None  # the seed's name
    actions: list[dict[str, Any]]
    resolved: bool
    resolution: str | None = None
    resolvedAt: str | None = None  # the seed's name
    paging: dict[str, Any] | None = Field(
        None, description="pages by rota step (who, when, delivery) and the acknowledgement"
    )


class Delivery(_Open):
    """A webhook delivery of this node's queue."""

    id: int
    subscription_id: str
    event_id: str
    url: str
    status: Literal["pending", "delivered", "dead"]
    attempts: int
    next_attempt_at: str | None = None
    last_error: str | None = None
    created_at: str | None = None
    finished_at: str | None = None


class WebhookSubscription(_Open):
    """A webhook subscription of this node; ``dead``: its URL failed for webhooks.max_age."""

    subscription_id: str
    callback_webhook: str
    event_types: list[str]
    status: Literal["active", "dead"]
    created_at: str | None = None


class Peer(_Open):
    """A node this node hears."""

    id: str
    address: str | None = None
    capabilities: list[str] = Field(default_factory=list)
    lastSeen: str | None = None  # the seed's name
    status: str
    latency_ms: float | None = None


class Usage(_Open):
    """Model usage of one day or month."""

    date: str
    totalCost: float  # the seed's name
    costNanos: int  # the seed's name
    apiCalls: int  # the seed's name
    tokens: dict[str, int]
    models: dict[str, dict[str, Any]]


class DaySpend(_Open):
    """One day of the spend history."""

    date: str
    apiCalls: int  # the seed's name
    totalCost: float  # the seed's name


class Principal(_Open):
    """Who calls, and what it may."""

    id: str
    name: str
    kind: str
    projects: list[str]
    roles: list[str]
    scope: str


# --- the answers ------------------------------------------------------------------------------


class AgentStatusAnswer(Answer):
    """GET /agents/{id}/status."""

    agent_id: str
    status: str
    available: bool
    agent: Agent
    current_tasks: list[dict[str, Any]] | None = None
    checked_at: str | None = None


class CollaborateAnswer(Answer):
    """POST /agents/{id}/collaborate: a thread opened, or an invitation sent."""

    mode: Literal["thread_created", "invited"]
    thread: Thread | None = None
    thread_id: str | None = None
    post: PostOutput | None = None


class ThreadsAnswer(Answer):
    """GET /api/v1/threads."""

    threads: list[ThreadSummary]
    count: int


class TasksAnswer(Answer):
    """GET /api/v1/tasks: one agent's (``agent_id``), or every one the caller reads (None;
    each task then names its agent)."""

    agent_id: str | None
    tasks: list[Task]
    count: int


class EscalationsAnswer(Answer):
    """GET /api/v1/escalations."""

    escalations: list[Escalation]
    count: int


class ResolveAnswer(Answer):
    """POST /api/v1/escalations/{id}/resolve."""

    escalation_id: str | None = None
    thread: dict[str, Any] | None = None


class CostsAnswer(Answer):
    """GET /api/v1/costs."""

    daily: Usage
    monthly: Usage
    limits: dict[str, float]
    model_access: dict[str, Any]
    history: list[DaySpend]


class PeersAnswer(Answer):
    """GET /api/v1/peers."""

    peers: list[Peer]


class MetricsAnswer(Answer):
    """GET /api/v1/metrics: the seed's metrics, each an object of its figures."""

    up: bool
    node_id: str
    at: str


class WebhooksAnswer(Answer):
    """GET /api/v1/webhooks."""

    deliveries: list[Delivery]
    count: int
    subscriptions: list[WebhookSubscription]


class RedriveAnswer(Answer):
    """POST /api/v1/webhooks/redrive."""

    redriven: list[int]
    at: str


class WhoamiAnswer(Answer):
    """GET /api/v1/whoami."""

    principal: Principal
    authenticated: bool
    human: dict[str, str] | None = None
    admin: bool


class OverviewThreadsAnswer(Answer):
    """GET /api/v1/overview/threads."""

    threads: list[OverviewThread]
    count: int


class OverviewTasksAnswer(Answer):
    """GET /api/v1/overview/tasks."""

    tasks: list[OverviewTask]
    count: int


# --- the node's own routes --------------------------------------------------------------------


class NodeStatus(_Open):
    """GET /healthz: the node's state (503 while it is not healthy)."""

    node_id: str | None
    network: str
    state: str
    healthy: bool
    # The projects the node serves (bzzz.projects; ["*"] for every project).
    projects: list[str] = Field(default_factory=list)
    # Per served project where the node started: {"start": "snapshot", "sequence": N,
    # "replayed": K} or {"start": "replay", "replayed": K}; the snapshots it wrote.
    snapshots: dict[str, Any] | None = None


class DeliveriesAnswer(Answer):
    """GET /webhooks (node admins)."""

    deliveries: list[Delivery]


class UiAccess(BaseModel):
    """GET /ui/access.json: whether the dashboard must ask for a token."""

    credential_required: bool


class ResourceMetadata(_Open):
    """RFC 9728 protected-resource metadata."""

    resource: str
    scopes_supported: list[str] = Field(default_factory=list)
    bearer_methods_supported: list[str] = Field(default_factory=list)
    authorization_servers: list[str] | None = None


class JsonRpcMessage(_Open):
    """One JSON-RPC 2.0 message of MCP (request, notification or answer)."""

    jsonrpc: Literal["2.0"]
    id: int | str | None = None
    method: str | None = None
    params: dict[str, Any] | None = None
    result: Any = None
    error: dict[str, Any] | None = None


class A2ACard(_Open):
    """An agent's A2A card (the A2A specification's AgentCard, as JSON)."""

    name: str
    description: str
    supportedInterfaces: list[dict[str, Any]]  # the card's own (camelCase) field names
    capabilities: dict[str, Any]
    skills: list[dict[str, Any]]
    securitySchemes: dict[str, Any] | None = None


class A2AListing(_Open):
    """The A2A cards of the agents the caller sees."""

    agents: list[A2ACard]
    count: int


class OpenApiDocument(_Open):
    """This document."""

    openapi: str
    info: dict[str, Any]
    paths: dict[str, Any]
