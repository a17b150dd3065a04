"""Domain shapes: plain dataclasses the services work with (rows stay in store/, wire in mcp/)."""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

PRIORITIES = ("low", "medium", "high", "urgent")
THREAD_MESSAGE_TYPES = ("text", "code", "file", "decision", "question")
TASK_UPDATE_TYPES = ("task_progress", "task_complete", "task_failed")
EVENT_TYPES = (
    "agent_announcement",
    "task_assignment",
    "thread_created",
    "thread_escalated",
    "network_status",
    "thread_status",
    "thread_consensus",
    "human_notification",
    "slurp_context",
    "cost_warning",
    "limit_exceeded",
    "reservation_conflict",
    "reservation_expiring",
    "reservation_refused",
)
THREAD_STATUSES = ("active", "paused", "completed", "escalated")
STANCES = ("agree", "disagree")
RESERVED_AGENT_IDS = frozenset({"subscriptions", "peers", "costs", "network", "node"})
# A person in a thread (the human console) is the agent ``human-<name>`` of role ``human``;
# ':' cannot be in an agent id (it separates agent and role in an address).
HUMAN_ROLE = "human"
HUMAN_AGENT_PREFIX = "human-"


def names_an_agent(sender: str) -> bool:
    """Whether a sender or assigner is an agent, not a principal acting itself (``token:…``)."""
    return ":" not in sender


# Agent keys of sessionless callers: a principal or a minted handle holds the agent on any
# node of the network; every other key (an MCP session, a stdio process) lives on one node.
NETWORK_WIDE_KEYS = ("principal-", "handle-")


def network_wide_key(session_id: str) -> bool:
    """Whether an agent key names a principal or handle (valid on every node)."""
    return session_id.startswith(NETWORK_WIDE_KEYS)


def canonical_agent_id(agent_id: str) -> str:
    """The form two agent ids are compared in: NFKC and case-folded (``ISO-A`` is ``iso-a``).

    Case folding can leave text that NFKC changes again, hence the second pass (Unicode's
    NFKC_Casefold closure). The displayed id stays as given.
    """
    folded = unicodedata.normalize("NFKC", agent_id).casefold()
    return unicodedata.normalize("NFKC", folded)


def utcnow() -> datetime:
    """Now, aware, in UTC."""
    return datetime.now(UTC)


def iso(value: datetime | None) -> str | None:
    """ISO-8601 with a Z, as the API reference writes times."""
    if value is None:
        return None
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


class AgentStatus(StrEnum):
    """The reference's agent statuses."""

    IDLE = "idle"
    BUSY = "busy"
    OFFLINE = "offline"
    ERROR = "error"


class TaskStatus(StrEnum):
    """The reference's task statuses."""

    PENDING = "pending"
    IN_PROGRESS = "in_progress"
    COMPLETED = "completed"
    FAILED = "failed"


ACTIVE_TASK_STATUSES = (TaskStatus.PENDING.value, TaskStatus.IN_PROGRESS.value)


def cancels(task: Any, sender: str, message_type: str, content: dict[str, Any]) -> bool:
    """Whether a post is the task's assigner canceling it: a ``task_failed`` with
    ``content.canceled`` true (the one update that is not the assignee's)."""
    return (
        message_type == "task_failed"
        and content.get("canceled") is True
        and getattr(task, "assigner", None) == sender
    )


@dataclass(slots=True)
class Agent:
    """An agent on the network."""

    id: str
    role: str
    capabilities: list[str]
    specialization: str | None
    max_tasks: int
    project: str | None
    task: str | None
    status: str
    active_tasks: int
    tasks_completed: int
    tasks_failed: int
    performance: float
    node_id: str
    session_id: str
    created_at: datetime
    last_activity: datetime
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def available(self) -> bool:
        """Online and below its task limit."""
        return self.status != AgentStatus.OFFLINE and self.active_tasks < self.max_tasks

    @property
    def online(self) -> bool:
        """Not offline."""
        return self.status != AgentStatus.OFFLINE

    @property
    def owner(self) -> str | None:
        """The principal that announced it (None: announced before principals existed)."""
        owner = self.metadata.get("owner")
        return owner if isinstance(owner, str) else None

    @property
    def handle_hash(self) -> str | None:
        """The SHA-256 of its agent_handle."""
        value = self.metadata.get("handle_hash")
        return value if isinstance(value, str) else None


@dataclass(slots=True)
class Task:
    """A task assigned to an agent."""

    id: str
    agent_id: str
    assigner: str
    type: str
    description: str
    status: str
    priority: str
    data: dict[str, Any]
    thread_id: str | None
    message_id: str
    progress: dict[str, Any] | None
    result: Any
    error: str | None
    start_time: datetime
    end_time: datetime | None


@dataclass(slots=True)
class Message:
    """A posted message."""

    id: str
    sender: str
    target_address: str
    message_type: str
    content: dict[str, Any]
    priority: str
    thread_id: str | None
    reply_to: str | None
    recipients: list[str]
    posted_at: datetime


@dataclass(slots=True)
class Participant:
    """An agent's membership of a thread."""

    agent_id: str
    active: bool
    joined_at: datetime
    left_at: datetime | None


@dataclass(slots=True)
class Thread:
    """A conversation thread."""

    id: str
    topic: str
    creator: str
    status: str
    created_at: datetime
    last_activity: datetime
    message_count: int
    summary: str | None
    metadata: dict[str, Any]
    escalation_history: list[Any]
    participants: list[Participant] = field(default_factory=list)
    shared_context: dict[str, Any] = field(default_factory=dict)
    decision_log: list[dict[str, Any]] = field(default_factory=list)
    consensus: dict[str, Any] | None = None

    @property
    def active_participants(self) -> list[str]:
        """Ids of the agents currently in the thread."""
        return [p.agent_id for p in self.participants if p.active]

    @property
    def asks_a_human(self) -> bool:
        """Whether one of its escalations was addressed to humans (a notify_human action)."""
        return any(
            isinstance(action, dict) and action.get("type") == "notify_human"
            for escalation in self.escalation_history
            if isinstance(escalation, dict)
            for action in escalation.get("actions") or []
        )


@dataclass(slots=True)
class Reaction:
    """A stance one thread message takes on an earlier one."""

    message_id: str
    target_id: str
    agent_id: str
    stance: str
    source: str
    at: datetime


def escalation_priority(rule_priority: int, actions: list[dict[str, Any]]) -> int | str:
    """The priority an escalation shows: the highest named one (low < medium < high < urgent)
    its rule's actions were configured with, else the rule's number.

    A rule's ``priority`` is the number that orders the rules (the reference's
    EscalationRule); the name a person reads ("high") is configured on its actions and kept
    with them on the escalation, so it is read from there, never lost to the rule's 0.
    """
    named = [
        a["priority"] for a in actions if isinstance(a, dict) and a.get("priority") in PRIORITIES
    ]
    return max(named, key=PRIORITIES.index) if named else rule_priority


@dataclass(slots=True)
class Escalation:
    """A fired escalation rule (the seed's EscalationEvent) and the state of its actions."""

    id: str
    thread_id: str
    rule: str
    priority: int
    reason: str
    triggered_at: datetime
    origin: str
    actions: list[dict[str, Any]]
    resolved: bool
    resolution: str | None
    resolved_at: datetime | None

    def to_json(self) -> dict[str, Any]:
        """The seed's EscalationEvent (camelCase) plus the action states."""
        return {
            "id": self.id,
            "threadId": self.thread_id,
            "rule": self.rule,
            "priority": escalation_priority(self.priority, self.actions),
            "rule_priority": self.priority,
            "reason": self.reason,
            "triggeredAt": iso(self.triggered_at),
            "actions": self.actions,
            "resolved": self.resolved,
            "resolution": self.resolution,
            "resolvedAt": iso(self.resolved_at),
            "origin": self.origin,
        }


@dataclass(slots=True)
class ThreadFacts:
    """What the escalation rules look at for one thread (windows start at ``epoch_at``)."""

    thread_id: str
    status: str
    created_at: datetime
    last_activity: datetime
    last_progress_at: datetime
    epoch_at: datetime
    disagreements: list[datetime] = field(default_factory=list)
    tasks: list[tuple[datetime, bool]] = field(default_factory=list)  # (ended, failed)
    open_rules: set[str] = field(default_factory=set)


@dataclass(slots=True)
class SlurpEvent:
    """A SLURP context event generated from a thread's consensus, and its submission state."""

    id: str
    thread_id: str
    origin: str
    event: dict[str, Any]
    status: str
    attempts: int
    next_attempt_at: datetime
    last_error: str | None
    created_at: datetime
    submitted_at: datetime | None


@dataclass(slots=True)
class Activity:
    """One entry of an agent's recent activity."""

    kind: str
    summary: str
    ref: str | None
    at: datetime


@dataclass(slots=True)
class Subscription:
    """A subscription to network events."""

    id: str
    subscriber_id: str
    event_types: list[str]
    filter_address: str | None
    callback_webhook: str | None
    node_id: str
    session_id: str
    status: str
    created_at: datetime
    projects: list[str] | None = None


@dataclass(slots=True)
class Event:
    """A network event as subscribers receive it."""

    id: str
    type: str
    address: str
    data: dict[str, Any]
    timestamp: datetime

    def to_json(self) -> dict[str, Any]:
        """The event's JSON body (webhooks, resources)."""
        return {
            "event_id": self.id,
            "event_type": self.type,
            "address": self.address,
            "data": self.data,
            "timestamp": iso(self.timestamp),
        }


@dataclass(slots=True)
class Delivery:
    """A webhook delivery in the durable queue."""

    id: int
    subscription_id: str
    event_id: str
    url: str
    body: str
    status: str
    attempts: int
    next_attempt_at: datetime
    last_error: str | None
    created_at: datetime
    finished_at: datetime | None


def expertise_fraction(agent: Agent, expertise: list[str]) -> float:
    """The share of wanted expertise an agent has (capabilities, or inside its specialization)."""
    if not expertise:
        return 1.0
    haystack = {c.lower() for c in agent.capabilities}
    special = (agent.specialization or "").lower()
    hits = sum(
        1 for want in expertise if want.lower() in haystack or (special and want.lower() in special)
    )
    return hits / len(expertise)


def score_agent(agent: Agent, expertise: list[str]) -> int:
    """0-100: performance 40, expertise 25, availability 25, free capacity 10."""
    load_free = 1 - min(agent.active_tasks, agent.max_tasks) / agent.max_tasks
    value = (
        40 * agent.performance
        + 25 * expertise_fraction(agent, expertise)
        + 25 * (1 if agent.available else 0)
        + 10 * load_free
    )
    return max(0, min(100, round(value)))
