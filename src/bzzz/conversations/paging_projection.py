"""Appliers of an escalation's paging: a step paged, its delivery's state, the acknowledgement.

They decide in log order, so that several nodes (or one restarted) agree on who was paged:

- ``escalation.paged`` records step N of an escalation once (a second page of the same step is
  refused), only after step N-1, only while the escalation is open and unacknowledged;
- ``escalation.page_state`` records an attempt at delivering a page (before it is made, and its
  result), from the node that paged;
- ``escalation.acked`` records the first acknowledgement; any later one is refused.

Each gives a ``human_notification`` event (``data.kind``: ``paged`` or ``acked``), so the
console and subscribers hear of it. Registered by the pager when it is built.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from bzzz import domain
from bzzz.network import subjects
from bzzz.network.envelope import Envelope
from bzzz.store.models import (
    AgentRow,
    EscalationAckRow,
    EscalationPageRow,
    EscalationRow,
    ThreadRow,
)
from bzzz.store.projection import (
    ID_LENGTH,
    NAME_LENGTH,
    Applied,
    Applier,
    ProjectionLimits,
    _address_of,
    _event,
    _optional_text,
    _strict_json,
    _text,
)

CHANNELS = ("webhook", "console", "admins")
VIAS = ("console", "cli", "link", "api")
# pending: to send; sending: an attempt is under way (a node that died then never repeats it:
# the receiver may have it, so it becomes unconfirmed); failed: to send again; dead: given up.
PAGE_STATES = ("pending", "sending", "delivered", "failed", "dead", "unconfirmed")
MAX_STEP = 64


def page_json(row: EscalationPageRow) -> dict[str, Any]:
    """A page as the API and the dashboard show it (never a URL or a secret)."""
    return {
        "step": row.step,
        "name": row.name,
        "channel": row.channel,
        "paged_at": domain.iso(row.paged_at),
        "origin": row.origin,
        "status": row.status,
        "attempts": row.attempts,
        "last_error": row.last_error,
        "delivered_at": domain.iso(row.delivered_at),
    }


def ack_json(row: EscalationAckRow) -> dict[str, Any]:
    """An acknowledgement as the API and the dashboard show it."""
    return {
        "by": row.by,
        "via": row.via,
        "principal": row.principal,
        "step": row.step,
        "at": domain.iso(row.at),
    }


def _address(session: Session, thread_id: str, origin: str) -> str:
    thread = session.get(ThreadRow, thread_id)
    creator = session.get(AgentRow, thread.creator) if thread is not None else None
    return _address_of(creator) if creator is not None else f"bzzz://{origin}"


def _open(session: Session, escalation_id: str, env: Envelope) -> EscalationRow | str:
    """The escalation, or why nothing may be recorded on it (one of another project than
    the envelope's subject is not found: a node serving another project pages none)."""
    row = session.get(EscalationRow, escalation_id)
    thread = session.get(ThreadRow, row.thread_id) if row is not None else None
    project = (thread.metadata_ or {}).get("project") if thread is not None else None
    on_subject = subjects.on_project(
        env.network, env.subject, project if isinstance(project, str) else None
    )
    if row is None or not on_subject:
        return "escalation not found"
    if row.resolved:
        return "escalation is resolved"
    if session.get(EscalationAckRow, escalation_id) is not None:
        return "escalation is acknowledged"
    return row


def _step(value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < MAX_STEP:
        raise ValueError(f"step must be an integer from 0 to {MAX_STEP - 1}")
    return value


def _time(value: Any, name: str) -> datetime | None:
    raw = _optional_text(value, 64, name)
    if raw is None:
        return None
    at = datetime.fromisoformat(raw)
    if at.tzinfo is None:
        raise ValueError(f"{name} needs a time zone")
    return at


def apply_paged(session: Session, env: Envelope, limits: ProjectionLimits) -> Applied:
    """Record that step ``step`` of an escalation was paged, once and in order."""
    p = env.payload
    escalation_id = _text(p["escalation_id"], ID_LENGTH, "escalation_id")
    step = _step(p["step"])
    name = _text(p["name"], NAME_LENGTH, "name")
    channel = p["channel"]
    if channel not in CHANNELS:
        raise ValueError(f"channel must be one of {', '.join(CHANNELS)}")
    status = p.get("status", "pending")
    if status not in ("pending", "delivered"):
        raise ValueError("status must be pending or delivered")
    found = _open(session, escalation_id, env)
    if isinstance(found, str):
        return Applied({"ok": False, "reason": found})
    if session.get(EscalationPageRow, (escalation_id, step)) is not None:
        return Applied({"ok": False, "reason": "step already paged"})
    if step and session.get(EscalationPageRow, (escalation_id, step - 1)) is None:
        return Applied({"ok": False, "reason": "the step before is not paged"})
    row = EscalationPageRow(
        escalation_id=escalation_id,
        step=step,
        thread_id=found.thread_id,
        name=name,
        channel=channel,
        paged_at=env.timestamp,
        origin=env.origin,
        status=status,
        attempts=0,
        last_error=None,
        next_attempt_at=env.timestamp if status == "pending" else None,
        delivered_at=env.timestamp if status == "delivered" else None,
    )
    session.add(row)
    data = {"kind": "paged", "escalation_id": escalation_id, "thread_id": found.thread_id}
    event = _event(env, "human_notification", _address(session, found.thread_id, env.origin),
                   data | {"page": page_json(row)})  # fmt: skip
    return Applied({"ok": True, "page": page_json(row)}, [event])


def apply_page_state(session: Session, env: Envelope, limits: ProjectionLimits) -> Applied:
    """Record an attempt at delivering a page (only the node that paged it delivers it)."""
    p = env.payload
    escalation_id = _text(p["escalation_id"], ID_LENGTH, "escalation_id")
    row = session.get(EscalationPageRow, (escalation_id, _step(p["step"])))
    if row is None:
        return Applied({"ok": False, "reason": "page not found"})
    if row.origin != env.origin:
        return Applied({"ok": False, "reason": "only the node that paged delivers"})
    status = p["status"]
    if status not in PAGE_STATES[1:]:
        raise ValueError(f"status must be one of {', '.join(PAGE_STATES[1:])}")
    attempts = p["attempts"]
    if not isinstance(attempts, int) or isinstance(attempts, bool) or attempts < row.attempts:
        return Applied({"ok": False, "reason": "an older attempt"})
    row.status, row.attempts = status, attempts
    row.last_error = _optional_text(p.get("error"), 500, "error")
    row.next_attempt_at = _time(p.get("next_attempt_at"), "next_attempt_at")
    row.delivered_at = env.timestamp if status == "delivered" else None
    return Applied({"ok": True, "page": page_json(row)})


def apply_acked(session: Session, env: Envelope, limits: ProjectionLimits) -> Applied:
    """Record the first acknowledgement of an open escalation (later ones are refused)."""
    p = env.payload
    escalation_id = _text(p["escalation_id"], ID_LENGTH, "escalation_id")
    by = _text(p["by"], NAME_LENGTH, "by")
    via = p["via"]
    if via not in VIAS:
        raise ValueError(f"via must be one of {', '.join(VIAS)}")
    principal = _text(p["principal"], 256, "principal")
    step = None if p.get("step") is None else _step(p["step"])
    found = _open(session, escalation_id, env)
    if isinstance(found, str):
        return Applied({"ok": False, "reason": found})
    row = EscalationAckRow(
        escalation_id=escalation_id,
        by=by,
        via=via,
        principal=principal,
        step=step,
        at=env.timestamp,
        origin=env.origin,
    )
    session.add(row)
    data = {"kind": "acked", "escalation_id": escalation_id, "thread_id": found.thread_id}
    event = _event(env, "human_notification", _address(session, found.thread_id, env.origin),
                   data | {"ack": ack_json(row)})  # fmt: skip
    return Applied({"ok": True, "ack": ack_json(row)}, [event])


PAGING_APPLIERS: dict[str, Applier] = {
    kind: _strict_json(fn)
    for kind, fn in {
        "escalation.paged": apply_paged,
        "escalation.page_state": apply_page_state,
        "escalation.acked": apply_acked,
    }.items()
}
