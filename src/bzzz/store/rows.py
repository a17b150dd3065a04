"""Domain dataclasses from the store's rows: one ``*_from_row`` per kind of row the reads
return (the repositories, the pages, the batch's directory updates).
"""

from __future__ import annotations

from collections.abc import Sequence

from bzzz import domain
from bzzz.store.models import (
    AgentRow,
    DeliveryRow,
    EscalationRow,
    MessageRow,
    ParticipantRow,
    SlurpEventRow,
    SlurpSubmissionRow,
    SubscriptionRow,
    TaskRow,
    ThreadRow,
)


def agent_from_row(row: AgentRow) -> domain.Agent:
    """Row → domain agent."""
    return domain.Agent(
        id=row.id,
        role=row.role,
        capabilities=list(row.capabilities),
        specialization=row.specialization,
        max_tasks=row.max_tasks,
        project=row.project,
        task=row.task,
        status=row.status,
        active_tasks=row.active_tasks,
        tasks_completed=row.tasks_completed,
        tasks_failed=row.tasks_failed,
        performance=row.performance,
        node_id=row.node_id,
        session_id=row.session_id,
        created_at=row.created_at,
        last_activity=row.last_activity,
        metadata=dict(row.metadata_),
    )


def task_from_row(row: TaskRow) -> domain.Task:
    """Row → domain task."""
    return domain.Task(
        id=row.id,
        agent_id=row.agent_id,
        assigner=row.assigner,
        type=row.type,
        description=row.description,
        status=row.status,
        priority=row.priority,
        data=dict(row.data),
        thread_id=row.thread_id,
        message_id=row.message_id,
        progress=row.progress,
        result=row.result,
        error=row.error,
        start_time=row.start_time,
        end_time=row.end_time,
    )


def message_from_row(row: MessageRow) -> domain.Message:
    """Row → domain message."""
    return domain.Message(
        id=row.id,
        sender=row.sender,
        target_address=row.target_address,
        message_type=row.message_type,
        content=dict(row.content),
        priority=row.priority,
        thread_id=row.thread_id,
        reply_to=row.reply_to,
        recipients=list(row.recipients),
        posted_at=row.posted_at,
    )


def thread_from_row(
    row: ThreadRow,
    participants: Sequence[ParticipantRow],
    escalations: Sequence[EscalationRow] = (),
) -> domain.Thread:
    """Row, its participants and escalations → domain thread."""
    history = list(row.escalation_history) + [escalation_from_row(e).to_json() for e in escalations]
    return domain.Thread(
        id=row.id,
        topic=row.topic,
        creator=row.creator,
        status=row.status,
        created_at=row.created_at,
        last_activity=row.last_activity,
        message_count=row.message_count,
        summary=row.summary,
        metadata=dict(row.metadata_),
        escalation_history=history,
        participants=[
            domain.Participant(p.agent_id, p.active, p.joined_at, p.left_at) for p in participants
        ],
        shared_context=dict(row.shared_context or {}),
        decision_log=list(row.decision_log or []),
        consensus=dict(row.consensus) if row.consensus else None,
    )


def escalation_from_row(row: EscalationRow) -> domain.Escalation:
    """Row → domain escalation."""
    return domain.Escalation(
        id=row.id,
        thread_id=row.thread_id,
        rule=row.rule,
        priority=row.priority,
        reason=row.reason,
        triggered_at=row.triggered_at,
        origin=row.origin,
        actions=[dict(a) for a in row.actions],
        resolved=row.resolved,
        resolution=row.resolution,
        resolved_at=row.resolved_at,
    )


def slurp_from_row(
    row: SlurpEventRow, submission: SlurpSubmissionRow | None, node_id: str
) -> domain.SlurpEvent:
    """Row and this node's submission of it → domain SLURP event.

    Status ``remote``: another node owes the submission; ``untracked``: this node's event, but
    this store holds no submission of it (it was rebuilt from the log: nothing is resubmitted).
    """
    if row.origin != node_id or submission is None:
        status = "remote" if row.origin != node_id else "untracked"
        return domain.SlurpEvent(
            id=row.id,
            thread_id=row.thread_id,
            origin=row.origin,
            event=dict(row.event),
            status=status,
            attempts=0,
            next_attempt_at=row.created_at,
            last_error=None,
            created_at=row.created_at,
            submitted_at=None,
        )
    return domain.SlurpEvent(
        id=row.id,
        thread_id=row.thread_id,
        origin=row.origin,
        event=dict(row.event),
        status=submission.status,
        attempts=submission.attempts,
        next_attempt_at=submission.next_attempt_at,
        last_error=submission.last_error,
        created_at=row.created_at,
        submitted_at=submission.submitted_at,
    )


def subscription_from_row(row: SubscriptionRow) -> domain.Subscription:
    """Row → domain subscription."""
    return domain.Subscription(
        id=row.id,
        subscriber_id=row.subscriber_id,
        event_types=list(row.event_types),
        filter_address=row.filter_address,
        callback_webhook=row.callback_webhook,
        node_id=row.node_id,
        session_id=row.session_id,
        status=row.status,
        created_at=row.created_at,
        projects=list(row.projects) if row.projects is not None else None,
    )


def delivery_from_row(row: DeliveryRow) -> domain.Delivery:
    """Row → domain delivery."""
    return domain.Delivery(
        id=row.id,
        subscription_id=row.subscription_id,
        event_id=row.event_id,
        url=row.url,
        body=row.body,
        status=row.status,
        attempts=row.attempts,
        next_attempt_at=row.next_attempt_at,
        last_error=row.last_error,
        created_at=row.created_at,
        finished_at=row.finished_at,
    )
