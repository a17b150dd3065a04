"""Appliers of the nodes' own envelopes: a node came, went, was seen to stop beating, was
admitted to the network or removed from it."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import Session

from bzzz import domain
from bzzz.domain import AgentStatus
from bzzz.network import admission, sealing
from bzzz.network.envelope import Envelope
from bzzz.store import agent_projection, projection
from bzzz.store.models import AgentRow, AppliedEnvelope
from bzzz.store.projection import Applied, Applier, ProjectionLimits


def apply_node_status(session: Session, env: Envelope, limits: ProjectionLimits) -> Applied:
    """A node came up or went down: a network_status event."""
    data = {"node_id": env.origin, "status": env.payload.get("status", "online")}
    data.update({k: v for k, v in env.payload.items() if k != "status"})
    return Applied(
        {"ok": True}, [projection._event(env, "network_status", f"bzzz://{env.origin}", data)]
    )


def apply_node_lost(session: Session, env: Envelope, limits: ProjectionLimits) -> Applied:
    """A peer saw a node miss its heartbeats: its agents go offline, a network_status event.

    Only agents last active before the loss was noticed go: a node that came back and
    announced its agents again keeps them.
    """
    p = env.payload
    lost = projection._text(p["node_id"], projection.ID_LENGTH, "node_id")
    detected = datetime.fromisoformat(projection._text(p["detected_at"], 64, "detected_at"))
    reason = "its node stopped sending heartbeats"
    events = [
        projection._event(
            env,
            "network_status",
            f"bzzz://{lost}",
            {"node_id": lost, "status": "offline", "reason": "missed heartbeats",
             "last_seen": p.get("last_seen"), "reported_by": env.origin},
        )
    ]  # fmt: skip
    went = _take_offline(session, env, lost, reason, events, before=detected)
    return Applied({"ok": True, "offline": went}, events)


def _take_offline(
    session: Session,
    env: Envelope,
    node_id: str,
    reason: str,
    events: list[domain.Event],
    *,
    before: datetime | None = None,
) -> list[str]:
    """Take the node's online agents offline (only those last active ``before``, if given)."""
    rows = session.scalars(
        select(AgentRow)
        .where(AgentRow.node_id == node_id, AgentRow.status != AgentStatus.OFFLINE.value)
        .order_by(AgentRow.id)
    ).all()
    went = []
    # Activity this batch noted but has not written yet counts too: the outcome must not depend
    # on how the log was cut into batches.
    seen: dict[str, datetime] = session.info.get(projection.SEEN, {})
    for row in rows:
        last = max(row.last_activity, seen.get(row.id, row.last_activity))
        if before is not None and last > before:
            continue
        row.status = AgentStatus.OFFLINE.value
        agent_projection._count_online(session, -1)
        went.append(row.id)
        projection._activity(session, row.id, "offline", reason, env.id, env.timestamp)
        events.append(
            projection._event(
                env,
                "agent_announcement",
                projection._address_of(row),
                {"action": "offline", "agent": agent_projection._agent_json(row), "reason": reason},
                len(events),
            )
        )
    return went


# session.info key: the projector's decisions on the batch's admission envelopes, by id.
ADMISSION_OUTCOMES = "bzzz_admission_outcomes"


def apply_admission(session: Session, env: Envelope, limits: ProjectionLimits) -> Applied:
    """A node admitted or removed: the projector decided it in log order; record that outcome.

    The set itself lives in the projector (``network.admission``): it must be known before
    the batch's later envelopes are applied, and the recorded outcomes rebuild it at restart.
    """
    decided: dict[str, dict[str, Any]] = session.info.get(ADMISSION_OUTCOMES, {})
    outcome = decided.get(env.id, {"ok": False, "reason": "not decided by the projector"})
    if not outcome.get("ok"):
        return Applied(outcome)
    status = "admitted" if env.type == admission.ADMITTED else "removed"
    node_id = str(outcome["node_id"])
    data = {"node_id": node_id, "status": status, "by": env.origin}
    events = [projection._event(env, "network_status", f"bzzz://{node_id}", data)]
    if env.type == admission.REMOVED:
        # Its agents can no longer answer: the network sees them go, as when a node is lost.
        _take_offline(session, env, node_id, "its node was removed from the network", events)
        # Unlike a lost node (it may come back), a removed one's reservations end with it.
        agent_projection.end_reservations_of_node(session, node_id, env.timestamp)
    return Applied(outcome, events)


async def admission_outcomes(session: AsyncSession) -> list[tuple[str, dict[str, Any]]]:
    """(id, outcome) of every applied admission envelope, in log order (to rebuild the set)."""
    rows = await session.execute(
        select(AppliedEnvelope.id, AppliedEnvelope.outcome)
        .where(AppliedEnvelope.type.in_(sorted(admission.TYPES)))
        .order_by(AppliedEnvelope.seq)
    )
    return [(str(envelope_id), dict(outcome)) for envelope_id, outcome in rows]


def apply_key_added(session: Session, env: Envelope, limits: ProjectionLimits) -> Applied:
    """A rotated network key: the projector already added it to the keyring, in log order.

    Nothing of the key reaches the store; the outcome names its id only.
    """
    key = sealing.key_from_payload(env.payload)
    return Applied({"ok": True, "key_id": key.id})


NODE_APPLIERS: dict[str, Applier] = {
    kind: projection._strict_json(fn)
    for kind, fn in {
        "node.status": apply_node_status,
        "node.lost": apply_node_lost,
        admission.ADMITTED: apply_admission,
        admission.REMOVED: apply_admission,
        sealing.KEY_ADDED: apply_key_added,
    }.items()
}
