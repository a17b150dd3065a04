"""ORM rows: the node's projection of the event log (plus its own webhook and SLURP queues).

Content columns are ``SealedJSON`` / ``SealedText``: what is written is an AEAD box under the
node's network key (``network/sealing.py``), bound to its table and column; what is read is
opened again. The keyring hangs on the engine's dialect (``attach_keyring``), not on the
process, so nodes with different keys share a test process. Ids, addresses, roles,
capabilities, statuses and times stay clear: every index and lookup works on them as before.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import JSON, BigInteger, DateTime, Dialect, Float, Index, Integer, String, Text
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.types import TypeDecorator

from bzzz.network.sealing import PREFIX, Keyring, SealError, is_sealed

KEYRING_ATTR = "bzzz_keyring"


def attach_keyring(dialect: Dialect, keyring: Keyring | None) -> None:
    """Seal this engine's content columns with ``keyring`` (None: written in clear)."""
    setattr(dialect, KEYRING_ATTR, keyring)


def _keyring(dialect: Dialect) -> Keyring | None:
    ring: Keyring | None = getattr(dialect, KEYRING_ATTR, None)
    return ring


def _open_ring(dialect: Dialect) -> Keyring:
    ring = _keyring(dialect)
    if ring is None:
        raise SealError("unknown_key")
    return ring


class SealedJSON(TypeDecorator[Any]):
    """A JSON content column, stored as a sealed box (a JSON string) when the engine has keys.

    Rows written in clear (before encryption, or with it off) read back as they are.
    """

    impl = JSON
    cache_ok = True

    def __init__(self, column: str) -> None:
        super().__init__()
        self.column = column
        self._aad = column.encode()

    def process_bind_param(self, value: Any, dialect: Dialect) -> Any:
        """Seal on the way in."""
        ring = _keyring(dialect)
        if value is None or ring is None:
            return value
        return ring.seal_json(value, self._aad)

    def process_result_value(self, value: Any, dialect: Dialect) -> Any:
        """Open on the way out."""
        if not is_sealed(value):
            return value
        return _open_ring(dialect).open_json(value, self._aad)

    def opened_text(self, stored: Any, keyring: Keyring | None) -> str:
        """The JSON text of a value read past this type (``type_coerce``): SQLite gives the
        stored JSON text, asyncpg the decoded value; a sealed box opens to the JSON text."""
        if isinstance(stored, str) and stored.startswith('"' + PREFIX):
            stored = json.loads(stored)
        if not is_sealed(stored):
            return stored if isinstance(stored, str) else json.dumps(stored)
        if keyring is None:
            raise SealError("unknown_key")
        return keyring.open(stored, self._aad).decode()


class SealedText(TypeDecorator[str]):
    """A text content column, stored as a sealed box when the engine has keys."""

    impl = Text
    cache_ok = True

    def __init__(self, column: str) -> None:
        super().__init__()
        self.column = column
        self._aad = column.encode()

    def process_bind_param(self, value: str | None, dialect: Dialect) -> str | None:
        """Seal on the way in."""
        ring = _keyring(dialect)
        if value is None or ring is None:
            return value
        return ring.seal(value.encode(), self._aad)

    def process_result_value(self, value: str | None, dialect: Dialect) -> str | None:
        """Open on the way out."""
        if value is None or not is_sealed(value):
            return value
        return _open_ring(dialect).open(value, self._aad).decode()


class Base(DeclarativeBase):
    """Declarative base of every table."""

    type_annotation_map = {dict[str, Any]: JSON, list[str]: JSON, Any: JSON}


class UTCDateTime(TypeDecorator[datetime]):
    """Aware UTC datetimes on every database (SQLite forgets the zone; this restores it)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        """Store in UTC."""
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime")
        return value.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        """Read back as aware UTC."""
        if value is None or value.tzinfo is not None:
            return value
        return value.replace(tzinfo=UTC)


TZ = UTCDateTime()


class AppliedEnvelope(Base):
    """Every envelope the projector has applied: the idempotency record."""

    __tablename__ = "applied_envelopes"
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    seq: Mapped[int] = mapped_column(Integer)
    type: Mapped[str] = mapped_column(String(64))
    origin: Mapped[str] = mapped_column(String(64))
    outcome: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    applied_at: Mapped[datetime] = mapped_column(TZ)


class AgentRow(Base):
    """An announced agent."""

    __tablename__ = "agents"
    id: Mapped[str] = mapped_column(String(128), primary_key=True)
    role: Mapped[str] = mapped_column(String(128), index=True)
    capabilities: Mapped[list[str]] = mapped_column(JSON, default=list)
    specialization: Mapped[str | None] = mapped_column(String(256))
    max_tasks: Mapped[int] = mapped_column(Integer, default=3)
    project: Mapped[str | None] = mapped_column(String(128), index=True)
    task: Mapped[str | None] = mapped_column(String(128))
    status: Mapped[str] = mapped_column(String(16), index=True)
    active_tasks: Mapped[int] = mapped_column(Integer, default=0)
    tasks_completed: Mapped[int] = mapped_column(Integer, default=0)
    tasks_failed: Mapped[int] = mapped_column(Integer, default=0)
    performance: Mapped[float] = mapped_column(Float, default=0.9)
    node_id: Mapped[str] = mapped_column(String(64), index=True)
    session_id: Mapped[str] = mapped_column(String(128), index=True)
    created_at: Mapped[datetime] = mapped_column(TZ)
    last_activity: Mapped[datetime] = mapped_column(TZ)
    metadata_: Mapped[dict[str, Any]] = mapped_column("metadata", JSON, default=dict)
    # Added by revision 0005: the id as compared (NFKC, case-folded); one online agent per value.
    canonical_id: Mapped[str | None] = mapped_column(String(512), index=True, nullable=True)


class TaskRow(Base):
    """A task assigned to an agent by a task_assignment message."""

    __tablename__ = "tasks"
    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    agent_id: Mapped[str] = mapped_column(String(128), index=True)
    assigner: Mapped[str] = mapped_column(String(128), index=True)
    type: Mapped[str] = mapped_column(String(64))
    description: Mapped[str] = mapped_column(SealedText("tasks.description"), default="")
    status: Mapped[str] = mapped_column(String(16))
    priority: Mapped[str] = mapped_column(String(8))
    data: Mapped[dict[str, Any]] = mapped_column(SealedJSON("tasks.data"), default=dict)
    thread_id: Mapped[str | None] = mapped_column(String(64))
    message_id: Mapped[str] = mapped_column(String(64))
    progress: Mapped[dict[str, Any] | None] = mapped_column(SealedJSON("tasks.progress"))
    result: Mapped[Any] = mapped_column(SealedJSON("tasks.result"), nullable=True)
    error: Mapped[str | None] = mapped_column(SealedText("tasks.error"))
    start_time: Mapped[datetime] = mapped_column(TZ)
    end_time: Mapped[datetime | None] = mapped_column(TZ)


class MessageRow(Base):
    """A posted message (direct, wildcard or to a thread)."""

    __tablename__ = "messages"
    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    sender: Mapped[str] = mapped_column(String(128), index=True)
    target_address: Mapped[str] = mapped_column(String(1024))
    message_type: Mapped[str] = mapped_column(String(64))
    content: Mapped[dict[str, Any]] = mapped_column(SealedJSON("messages.content"))
    priority: Mapped[str] = mapped_column(String(8))
    thread_id: Mapped[str | None] = mapped_column(String(64), index=True)
    reply_to: Mapped[str | None] = mapped_column(String(64))
    recipients: Mapped[list[str]] = mapped_column(JSON, default=list)
    posted_at: Mapped[datetime] = mapped_column(TZ)


class InboxRow(Base):
    """One delivery of a message to one agent."""

    __tablename__ = "inbox"
    agent_id: Mapped[str] = mapped_column(String(128), primary_key=True)
    message_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    posted_at: Mapped[datetime] = mapped_column(TZ)
    __table_args__ = (Index("ix_inbox_agent_time", "agent_id", "posted_at"),)


class ActivityRow(Base):
    """An agent's recent activity, newest first when read."""

    __tablename__ = "activity"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    agent_id: Mapped[str] = mapped_column(String(128))
    kind: Mapped[str] = mapped_column(String(64))
    summary: Mapped[str] = mapped_column(SealedText("activity.summary"))
    ref: Mapped[str | None] = mapped_column(String(64))
    at: Mapped[datetime] = mapped_column(TZ)
    __table_args__ = (Index("ix_activity_agent_id", "agent_id", "id"),)


class ThreadRow(Base):
    """A conversation thread."""

    __tablename__ = "threads"
    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    # Text since revision 0010: a sealed topic is longer than the 512 characters it holds.
    topic: Mapped[str] = mapped_column(SealedText("threads.topic"))
    creator: Mapped[str] = mapped_column(String(128))
    status: Mapped[str] = mapped_column(String(16), index=True)
    created_at: Mapped[datetime] = mapped_column(TZ)
    last_activity: Mapped[datetime] = mapped_column(TZ)
    message_count: Mapped[int] = mapped_column(Integer, default=0)
    summary: Mapped[str | None] = mapped_column(SealedText("threads.summary"))
    metadata_: Mapped[dict[str, Any]] = mapped_column(
        "metadata", SealedJSON("threads.metadata"), default=dict
    )
    escalation_history: Mapped[list[Any]] = mapped_column(
        SealedJSON("threads.escalation_history"), default=list
    )
    # Added by revision 0003 (nullable: rows of older revisions have none).
    shared_context: Mapped[dict[str, Any] | None] = mapped_column(
        SealedJSON("threads.shared_context"), nullable=True
    )
    decision_log: Mapped[list[Any] | None] = mapped_column(
        SealedJSON("threads.decision_log"), nullable=True
    )
    consensus: Mapped[dict[str, Any] | None] = mapped_column(
        SealedJSON("threads.consensus"), nullable=True
    )
    last_progress_at: Mapped[datetime | None] = mapped_column(TZ, nullable=True)
    # When the thread's escalations were last resolved: rule windows start again from here.
    epoch_at: Mapped[datetime | None] = mapped_column(TZ, nullable=True)
    # Added by revision 0004: the node whose envelope completed the consensus. It alone
    # generates and submits the thread's SLURP event, decided by the log, not by who sweeps first.
    consensus_origin: Mapped[str | None] = mapped_column(String(64), nullable=True)


class ParticipantRow(Base):
    """An agent's membership of a thread."""

    __tablename__ = "thread_participants"
    thread_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    agent_id: Mapped[str] = mapped_column(String(128), primary_key=True, index=True)
    active: Mapped[bool] = mapped_column(default=True)
    joined_at: Mapped[datetime] = mapped_column(TZ)
    left_at: Mapped[datetime | None] = mapped_column(TZ)


class SubscriptionRow(Base):
    """A subscription to network events."""

    __tablename__ = "subscriptions"
    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    subscriber_id: Mapped[str] = mapped_column(String(128))
    event_types: Mapped[list[str]] = mapped_column(JSON)
    filter_address: Mapped[str | None] = mapped_column(String(1024))
    callback_webhook: Mapped[str | None] = mapped_column(String(2048))
    node_id: Mapped[str] = mapped_column(String(64), index=True)
    session_id: Mapped[str] = mapped_column(String(128))
    status: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[datetime] = mapped_column(TZ)
    # The subscriber's projects: only their events match (None: every project).
    projects: Mapped[list[str] | None] = mapped_column(JSON, nullable=True)


class EventRow(Base):
    """An event matched to a subscription of this node (what its resource shows)."""

    __tablename__ = "subscription_events"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    subscription_id: Mapped[str] = mapped_column(String(64))
    event_id: Mapped[str] = mapped_column(String(64))
    event_type: Mapped[str] = mapped_column(String(64))
    payload: Mapped[dict[str, Any]] = mapped_column(SealedJSON("subscription_events.payload"))
    created_at: Mapped[datetime] = mapped_column(TZ)
    __table_args__ = (Index("ix_subscription_events_sub", "subscription_id", "id"),)


class DeliveryRow(Base):
    """A webhook delivery owed by this node: the durable retry queue and its dead letters."""

    __tablename__ = "webhook_deliveries"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    subscription_id: Mapped[str] = mapped_column(String(64))
    event_id: Mapped[str] = mapped_column(String(64))
    url: Mapped[str] = mapped_column(String(2048))
    body: Mapped[str] = mapped_column(SealedText("webhook_deliveries.body"))
    status: Mapped[str] = mapped_column(String(16))
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    next_attempt_at: Mapped[datetime] = mapped_column(TZ)
    last_error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(TZ)
    finished_at: Mapped[datetime | None] = mapped_column(TZ)
    __table_args__ = (Index("ix_webhook_deliveries_due", "status", "next_attempt_at"),)


class ReactionRow(Base):
    """A stance (agree / disagree) that one thread message takes on an earlier one."""

    __tablename__ = "thread_reactions"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    thread_id: Mapped[str] = mapped_column(String(64))
    message_id: Mapped[str] = mapped_column(String(64))
    target_id: Mapped[str] = mapped_column(String(64))
    agent_id: Mapped[str] = mapped_column(String(128))
    stance: Mapped[str] = mapped_column(String(16))
    source: Mapped[str] = mapped_column(String(16))
    at: Mapped[datetime] = mapped_column(TZ)
    __table_args__ = (Index("ix_thread_reactions_thread", "thread_id", "at"),)


class EscalationRow(Base):
    """A fired escalation rule: the seed's EscalationEvent and the state of its actions."""

    __tablename__ = "escalations"
    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    thread_id: Mapped[str] = mapped_column(String(64))
    rule: Mapped[str] = mapped_column(String(128))
    priority: Mapped[int] = mapped_column(Integer, default=0)
    reason: Mapped[str] = mapped_column(SealedText("escalations.reason"))
    triggered_at: Mapped[datetime] = mapped_column(TZ)
    origin: Mapped[str] = mapped_column(String(64))
    actions: Mapped[list[Any]] = mapped_column(SealedJSON("escalations.actions"), default=list)
    resolved: Mapped[bool] = mapped_column(default=False)
    resolution: Mapped[str | None] = mapped_column(SealedText("escalations.resolution"))
    resolved_at: Mapped[datetime | None] = mapped_column(TZ)
    __table_args__ = (
        Index("ix_escalations_thread", "thread_id", "resolved"),
        Index("ix_escalations_open", "resolved", "origin"),
    )


class SlurpEventRow(Base):
    """A SLURP context event from a consensus, as the log has it (the same on every node)."""

    __tablename__ = "slurp_events"
    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    thread_id: Mapped[str] = mapped_column(String(64), unique=True)
    origin: Mapped[str] = mapped_column(String(64))
    event: Mapped[dict[str, Any]] = mapped_column(SealedJSON("slurp_events.event"))
    created_at: Mapped[datetime] = mapped_column(TZ)


class SlurpSubmissionRow(Base):
    """This node's submission of one of its SLURP events to the endpoint (node-local, never
    projected: like webhook deliveries, only the node that owes the submission keeps it)."""

    __tablename__ = "slurp_submissions"
    event_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    status: Mapped[str] = mapped_column(String(16))
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    next_attempt_at: Mapped[datetime] = mapped_column(TZ)
    last_error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(TZ)
    submitted_at: Mapped[datetime | None] = mapped_column(TZ)
    __table_args__ = (Index("ix_slurp_submissions_due", "status", "next_attempt_at"),)


class CostRow(Base):
    """One model call in the cost ledger (the seed's CostUsage is summed from these)."""

    __tablename__ = "llm_costs"
    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    node_id: Mapped[str] = mapped_column(String(64))
    agent_id: Mapped[str | None] = mapped_column(String(128))
    purpose: Mapped[str] = mapped_column(String(64))
    model: Mapped[str] = mapped_column(String(128))
    prompt_tokens: Mapped[int] = mapped_column(Integer)
    completion_tokens: Mapped[int] = mapped_column(Integer)
    # Billionths of a USD: integer sums are exact, so the ledger adds up to the usage it saw.
    cost_nanos: Mapped[int] = mapped_column(BigInteger)
    day: Mapped[str] = mapped_column(String(10))
    month: Mapped[str] = mapped_column(String(7))
    at: Mapped[datetime] = mapped_column(TZ)
    __table_args__ = (
        Index("ix_llm_costs_node_day", "node_id", "day"),
        Index("ix_llm_costs_node_month", "node_id", "month"),
        Index("ix_llm_costs_month", "month"),
    )


class MemoryRow(Base):
    """What a hosted agent remembers: an episode of its work or a thread's memory."""

    __tablename__ = "llm_memories"
    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    agent_id: Mapped[str] = mapped_column(String(128))
    # "" is the memory of work outside any project; it never mixes with a named project.
    project: Mapped[str] = mapped_column(String(128))
    kind: Mapped[str] = mapped_column(String(16))
    thread_id: Mapped[str | None] = mapped_column(String(64))
    # Text since revision 0010 (sealed, like the summary).
    topic: Mapped[str] = mapped_column(SealedText("llm_memories.topic"))
    participants: Mapped[list[str]] = mapped_column(JSON, default=list)
    summary: Mapped[str] = mapped_column(SealedText("llm_memories.summary"))
    outcome: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(TZ)
    __table_args__ = (
        Index("ix_llm_memories_agent_project", "agent_id", "project", "created_at"),
        Index("ix_llm_memories_thread", "project", "thread_id"),
    )


class AccessTokenRow(Base):
    """A network token: its grants and the SHA-256 of its secret (never the secret)."""

    __tablename__ = "access_tokens"
    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    name: Mapped[str] = mapped_column(String(128))
    secret_hash: Mapped[str] = mapped_column(String(64), unique=True)
    projects: Mapped[list[str]] = mapped_column(JSON, default=list)
    roles: Mapped[list[str]] = mapped_column(JSON, default=list)
    scope: Mapped[str] = mapped_column(String(16))
    created_by: Mapped[str] = mapped_column(String(256))
    created_at: Mapped[datetime] = mapped_column(TZ)
    expires_at: Mapped[datetime | None] = mapped_column(TZ)
    revoked_at: Mapped[datetime | None] = mapped_column(TZ)
    revoked_by: Mapped[str | None] = mapped_column(String(256))
    # An agent token is one agent: every call with it acts as this agent id (None: any).
    agent_id: Mapped[str | None] = mapped_column(String(128))


class KnowledgeRow(Base):
    """A project's knowledge: decisions and insights of consensus, summaries of episodes.

    Read back only for the same project, ranked by full-text relevance in the node's memory
    (see llm/knowledge.py): the text is sealed, so no database index can hold its words.
    """

    __tablename__ = "llm_knowledge"
    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    # "" is the knowledge of work outside any project; it never mixes with a named project.
    project: Mapped[str] = mapped_column(String(128))
    kind: Mapped[str] = mapped_column(String(16))
    source: Mapped[str] = mapped_column(String(64))
    text: Mapped[str] = mapped_column(SealedText("llm_knowledge.text"))
    created_at: Mapped[datetime] = mapped_column(TZ)
    __table_args__ = (Index("ix_llm_knowledge_project", "project", "created_at"),)


class AuditRecordRow(Base):
    """One agent action on this node's audit trail, hash-chained to the one before it.

    Append-only: ``hash`` is the SHA-256 of the record's canonical form (``prev_hash``
    included), so an edited, removed or reordered record breaks the chain (bzzz.audit).
    """

    __tablename__ = "audit_records"
    node_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    seq: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    prev_hash: Mapped[str] = mapped_column(String(64))
    hash: Mapped[str] = mapped_column(String(64))
    # The record's time as its canonical form holds it (ISO 8601, UTC, microseconds).
    at: Mapped[str] = mapped_column(String(32))
    principal: Mapped[str] = mapped_column(String(256))
    agent: Mapped[str | None] = mapped_column(String(128))
    session: Mapped[str] = mapped_column(String(128))
    action: Mapped[str] = mapped_column(String(128))
    target: Mapped[str | None] = mapped_column(String(512))
    outcome: Mapped[str] = mapped_column(String(64))
    digest: Mapped[str] = mapped_column(String(64))
    __table_args__ = (
        Index("ix_audit_records_principal", "principal", "at"),
        Index("ix_audit_records_agent", "agent", "at"),
    )


class AuditHeadRow(Base):
    """A node's signed audit chain head, as the network's log delivered it."""

    __tablename__ = "audit_heads"
    node_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    seq: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    hash: Mapped[str] = mapped_column(String(64))
    public_key: Mapped[str] = mapped_column(String(64))
    signature: Mapped[str] = mapped_column(String(128))
    envelope_id: Mapped[str] = mapped_column(String(26))
    signed_at: Mapped[datetime] = mapped_column(TZ)


class MessageTombstoneRow(Base):
    """What is left of a message whose content retention or erasure removed: its id and time.

    The message row stays (sender, recipients, thread, time: counts and pages stay honest) with
    its content replaced by a ``bzzz_tombstone`` marker; this row says when and why.
    """

    __tablename__ = "message_tombstones"
    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    posted_at: Mapped[datetime] = mapped_column(TZ)
    purged_at: Mapped[datetime] = mapped_column(TZ)
    reason: Mapped[str] = mapped_column(String(16))
    __table_args__ = (Index("ix_message_tombstones_posted", "posted_at"),)


class RetentionRunRow(Base):
    """A ``retention.applied`` or ``retention.forget`` envelope, as every node applied it."""

    __tablename__ = "retention_runs"
    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    kind: Mapped[str] = mapped_column(String(16))
    origin: Mapped[str] = mapped_column(String(64))
    principal: Mapped[str] = mapped_column(String(256))
    at: Mapped[datetime] = mapped_column(TZ, index=True)
    cutoffs: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    counts: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)


class AuditAnchorRow(Base):
    """Where a node's audit chain starts after retention pruned its older records.

    ``seq`` and ``hash`` are the last pruned record's: the first kept record must link to
    ``hash``, and a signed head of the node at ``seq`` (kept on every node) must hold it.
    """

    __tablename__ = "audit_anchors"
    node_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    seq: Mapped[int] = mapped_column(BigInteger)
    hash: Mapped[str] = mapped_column(String(64))
    pruned: Mapped[int] = mapped_column(BigInteger)
    pruned_at: Mapped[datetime] = mapped_column(TZ)


class ReservationRow(Base):
    """A live path reservation (bzzz/reservations): ended ones are deleted, not kept.

    ``id`` is the id of the ``reservation.requested`` envelope that made it; ``project`` is
    its agent's (None: the agent has none); ``paths`` are normalized glob patterns.
    """

    __tablename__ = "reservations"
    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    project: Mapped[str | None] = mapped_column(String(128), nullable=True)
    agent_id: Mapped[str] = mapped_column(String(128), index=True)
    owner: Mapped[str] = mapped_column(String(256))
    mode: Mapped[str] = mapped_column(String(16))
    paths: Mapped[list[str]] = mapped_column(SealedJSON("reservations.paths"))
    reason: Mapped[str | None] = mapped_column(SealedText("reservations.reason"), nullable=True)
    origin: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(TZ)
    expires_at: Mapped[datetime] = mapped_column(TZ, index=True)
    # When its holder was told it is about to end (reservation_expiring); a renewal clears it.
    noticed_at: Mapped[datetime | None] = mapped_column(TZ, nullable=True)
    # Added by revision 0016: the grant's place in its project's count (only grows; a renewal
    # keeps it). Rows granted before it hold 0.
    fencing_token: Mapped[int] = mapped_column(BigInteger, default=0, server_default="0")
    __table_args__ = (Index("ix_reservations_project_expires", "project", "expires_at"),)


class EscalationPageRow(Base):
    """One step of an escalation's paging: who was paged (a rota step, or the project's admins),
    when, by which node, and how its delivery went. At most one row per escalation and step:
    the projector refuses a second page of a step, so no step is paged twice."""

    __tablename__ = "escalation_pages"
    escalation_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    step: Mapped[int] = mapped_column(Integer, primary_key=True)
    thread_id: Mapped[str] = mapped_column(String(64))
    name: Mapped[str] = mapped_column(String(128))
    # webhook | console | admins
    channel: Mapped[str] = mapped_column(String(16))
    paged_at: Mapped[datetime] = mapped_column(TZ)
    origin: Mapped[str] = mapped_column(String(64))
    # pending | delivered | failed | dead
    status: Mapped[str] = mapped_column(String(16))
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    last_error: Mapped[str | None] = mapped_column(Text, nullable=True)
    next_attempt_at: Mapped[datetime | None] = mapped_column(TZ, nullable=True)
    delivered_at: Mapped[datetime | None] = mapped_column(TZ, nullable=True)
    __table_args__ = (Index("ix_escalation_pages_status", "status", "origin"),)


class EscalationAckRow(Base):
    """Who acknowledged an escalation (which stops its paging), how and when: once."""

    __tablename__ = "escalation_acks"
    escalation_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    by: Mapped[str] = mapped_column(String(128))
    # console | cli | link | api
    via: Mapped[str] = mapped_column(String(16))
    principal: Mapped[str] = mapped_column(String(256))
    step: Mapped[int | None] = mapped_column(Integer, nullable=True)
    at: Mapped[datetime] = mapped_column(TZ)
    origin: Mapped[str] = mapped_column(String(64))


class ReservationFenceRow(Base):
    """The last fencing token granted in a project (``""``: agents without a project)."""

    __tablename__ = "reservation_fences"
    project: Mapped[str] = mapped_column(String(128), primary_key=True)
    last_token: Mapped[int] = mapped_column(BigInteger, default=0)


class ReservationEndRow(Base):
    """A reservation that ended, kept a while so its holder's check is told why (revision 0016).

    ``reason``: released, expired, forgotten (its agent erased), moved (announced in another
    project), node_removed. At most a few per agent, for a bounded time (reservations.ends).
    """

    __tablename__ = "reservation_ends"
    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    project: Mapped[str | None] = mapped_column(String(128), nullable=True)
    agent_id: Mapped[str] = mapped_column(String(128), index=True)
    mode: Mapped[str] = mapped_column(String(16))
    paths: Mapped[list[str]] = mapped_column(SealedJSON("reservation_ends.paths"))
    fencing_token: Mapped[int] = mapped_column(BigInteger, default=0)
    reason: Mapped[str] = mapped_column(String(16))
    ended_at: Mapped[datetime] = mapped_column(TZ, index=True)


class FactRow(Base):
    """A fact of a project's knowledge graph (bzzz/knowledge), as the log's ``fact.*`` made it.

    ``subject``, ``relation``, ``object`` and ``statement`` are sealed; the digests of the
    subject and object entities (``entity_digest``) and of subject+relation (``key_digest``)
    stay clear so superseding and an entity's facts are index lookups. ``v`` is the number of
    the change that last touched the row (growing in log order), so a node's in-memory index
    reloads only what changed.
    """

    __tablename__ = "knowledge_facts"
    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    project: Mapped[str] = mapped_column(String(128))
    subject: Mapped[str] = mapped_column(SealedText("knowledge_facts.subject"))
    relation: Mapped[str] = mapped_column(SealedText("knowledge_facts.relation"))
    object: Mapped[str] = mapped_column(SealedText("knowledge_facts.object"))
    statement: Mapped[str] = mapped_column(SealedText("knowledge_facts.statement"))
    subject_digest: Mapped[str] = mapped_column(String(64))
    object_digest: Mapped[str] = mapped_column(String(64))
    key_digest: Mapped[str] = mapped_column(String(64))
    status: Mapped[str] = mapped_column(String(16))
    confidence: Mapped[float] = mapped_column(Float)
    author: Mapped[str] = mapped_column(String(128))
    origin: Mapped[str] = mapped_column(String(16))
    source_thread: Mapped[str | None] = mapped_column(String(64), nullable=True)
    source_message: Mapped[str | None] = mapped_column(String(64), nullable=True)
    agents: Mapped[list[str]] = mapped_column(JSON, default=list)
    valid_from: Mapped[datetime | None] = mapped_column(TZ, nullable=True)
    valid_until: Mapped[datetime | None] = mapped_column(TZ, nullable=True)
    superseded_by: Mapped[str | None] = mapped_column(String(64), nullable=True)
    supersedes: Mapped[str | None] = mapped_column(String(64), nullable=True)
    recorded_at: Mapped[datetime] = mapped_column(TZ)
    v: Mapped[int] = mapped_column(BigInteger)
    __table_args__ = (
        Index("ix_knowledge_facts_key", "project", "key_digest", "valid_until"),
        Index("ix_knowledge_facts_subject", "project", "subject_digest"),
        Index("ix_knowledge_facts_object", "project", "object_digest"),
        Index("ix_knowledge_facts_thread", "source_thread"),
        Index("ix_knowledge_facts_author", "author"),
        Index("ix_knowledge_facts_v", "project", "v", "id"),
        Index("ix_knowledge_facts_change", "v"),
    )
