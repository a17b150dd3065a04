"""Applies envelopes to the store, deterministically: every node reaches the same state.

Rules that decide between competing writers (an agent id already held, a full task queue, the
thread limit) are decided here, in log order, so every node decides the same way; the origin
reads the outcome to answer its caller.

This module holds what every applier shares: ``Applied``, ``Applier``, ``ProjectionLimits``,
the payload checks, the rows staged for one write per batch, and ``_strict_json``. The
appliers live by the envelope kinds they apply: ``agent_projection.py`` (``agent.*``),
``conversation_projection.py`` (``message.posted`` and the threads' ``created``, ``joined``,
``left``, ``summarized``), ``thread_projection.py`` (decisions, status, escalations, SLURP),
``llm_projection.py``, ``node_projection.py``, ``access_projection.py``, ``subscriptions.py``;
``batch.py`` applies a batch with all of them (and those the services register).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from bzzz import domain
from bzzz.address import agent_address
from bzzz.domain import AgentStatus
from bzzz.network.envelope import Envelope
from bzzz.store.models import ActivityRow, AgentRow

Outcome = dict[str, Any]

# What an outcome may carry of the content it was about, by key: the record of an applied
# envelope (``applied_envelopes.outcome``, beside the sealed rows) keeps the key, not the text.
_CONTENT_OF = {
    "consensus": ("decisions",),  # the decision's text
    "reservation": ("paths", "reason"),
    "holder": ("paths",),
}
_CONTENT_LISTS = {"renewed": ("paths", "reason")}
_CONTENT_VALUES = ("requested", "overlaps")  # a reservation conflict's patterns


def recorded(outcome: Outcome) -> Outcome:
    """What the applied-envelope record keeps of an outcome: ids, codes and counts, never
    content (a consensus's decision, a reservation's paths and reason). The origin's caller
    is answered from the whole outcome, in memory; only a replay reads the record."""
    kept = dict(outcome)
    for key, fields in _CONTENT_OF.items():
        value = kept.get(key)
        if isinstance(value, dict):
            kept[key] = {k: v for k, v in value.items() if k not in fields}
    for key, fields in _CONTENT_LISTS.items():
        items = kept.get(key)
        if isinstance(items, list):
            kept[key] = [
                {k: v for k, v in item.items() if k not in fields}
                if isinstance(item, dict)
                else item
                for item in items
            ]
    for key in _CONTENT_VALUES:
        if key in kept:
            kept[key] = ""
    return kept


@dataclass(slots=True)
class Applied:
    """What applying one envelope did: the outcome for the origin, events for subscribers."""

    outcome: Outcome
    events: list[domain.Event] = field(default_factory=list)


Applier = Callable[[Session, Envelope, "ProjectionLimits"], Applied]


@dataclass(frozen=True, slots=True)
class ProjectionLimits:
    """Limits every node enforces identically (they come from the network's settings)."""

    max_active_threads: int = 100
    max_agents: int = 100_000


def _event(
    envelope: Envelope, type_: str, address: str, data: dict[str, Any], n: int = 0
) -> domain.Event:
    suffix = f"-{n}" if n else ""
    return domain.Event(
        id=f"evt-{envelope.id}{suffix}",
        type=type_,
        address=address,
        data=data,
        timestamp=envelope.timestamp,
    )


def _address_of(row: AgentRow) -> str:
    return agent_address(row.id, row.role, row.project, row.task)


def _refresh_status(row: AgentRow) -> None:
    if row.status in (AgentStatus.OFFLINE.value, AgentStatus.ERROR.value):
        return
    row.status = AgentStatus.BUSY.value if row.active_tasks > 0 else AgentStatus.IDLE.value


def _performance(completed: int, failed: int) -> float:
    # A prior of 0.9 over 5 pseudo-tasks: new agents start credible, evidence moves them.
    return round((completed + 4.5) / (completed + failed + 5), 4)


# Column sizes of the values a peer's payload puts into rows (see store/models.py).
ID_LENGTH = 64

NAME_LENGTH = 128

ADDRESS_LENGTH = 1024

CANONICAL_LENGTH = 512


def _text(value: Any, limit: int, name: str) -> str:
    """A payload string that fits its column; anything else rejects the envelope.

    Staged rows are written after the appliers ran, outside any savepoint: a value the database
    refuses there would fail the whole batch, so it is refused here (as a bad payload) instead.
    """
    if not isinstance(value, str) or not value or len(value) > limit:
        raise ValueError(f"{name} must be a non-empty string of at most {limit} characters")
    return value


def _optional_text(value: Any, limit: int, name: str) -> str | None:
    return None if value is None else _text(value, limit, name)


def _check_names(value: Any, name: str) -> list[str]:
    if not isinstance(value, list):
        raise TypeError(f"{name} must be a list")
    return [_text(item, NAME_LENGTH, name) for item in value]


STAGED = "bzzz_staged_rows"

STAGED_MESSAGE_IDS = "bzzz_staged_message_ids"

# Message ids of a batch that the store already holds, looked up once per batch.
STORED_MESSAGE_IDS = "bzzz_stored_message_ids"


def stage(session: Session, model: type[Any], **values: Any) -> None:
    """Queue an insert-only row; the batch writes each table's rows in one executemany."""
    session.info.setdefault(STAGED, {}).setdefault(model, []).append(values)


SEEN = "bzzz_agents_seen"


def touch_agent(session: Session, agent_id: str, at: datetime) -> None:
    """Record an agent's last activity (one UPDATE per agent and batch, no ORM load)."""
    session.info.setdefault(SEEN, {})[agent_id] = at


def set_last_activity(session: Session, row: Any, at: datetime) -> None:
    """Set an agent row's last activity: what the batch noted of it before is older in the
    log and must not be written over it at the batch's end."""
    row.last_activity = at
    session.info.get(SEEN, {}).pop(row.id, None)


def _activity(
    session: Session, agent_id: str, kind: str, summary: str, ref: str | None, at: datetime
) -> None:
    stage(session, ActivityRow, agent_id=agent_id, kind=kind, summary=summary[:500], ref=ref, at=at)


def _strict_json(applier: Applier) -> Applier:
    """Refuse payloads that are not strict JSON (NaN, Infinity) before ``applier`` sees them.

    Python's json reads and writes them, PostgreSQL's JSON columns refuse them: applied as they
    are, they would stop a PostgreSQL node's log and let SQLite nodes diverge from it.
    """

    @functools.wraps(applier)
    def apply(session: Session, env: Envelope, limits: ProjectionLimits) -> Applied:
        json.dumps(env.payload, allow_nan=False)  # ValueError: recorded as a bad payload
        return applier(session, env, limits)

    return apply
