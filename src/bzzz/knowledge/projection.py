"""The appliers of ``fact.*``: a project's facts, and which one is current, decided in log order.

- ``fact.stated`` records a fact (subject, relation, object, statement, confidence, source,
  author), ``agreed`` or ``proposed``. An agreed fact supersedes the current agreed fact of
  the same project, subject and relation (entities compared case-insensitively after trimming
  and folding whitespace): the old one gets ``valid_until`` (the new envelope's time) and
  ``superseded_by``, and stays readable.
- ``fact.agreed`` turns a proposed fact into an agreed one (by another agent than its author),
  which supersedes then, at the agreement's place in the log; agreeing again only adds the
  agent to its source.
- A fact sourced to a thread's consensus (``origin: consensus``) is recorded only if the
  thread's consensus is that very decision message, so no one can claim a consensus.

Every node applies the same log in the same order and decides only from its store as the log
left it, so every node agrees on what is current. Outcomes carry ids, never text (the record of
an applied envelope is kept in clear). Erasure and retention reach facts through the steps the
knowledge service registers with retention's appliers (:func:`forget_agent`,
:func:`expire_history`).
"""

from __future__ import annotations

import hashlib
import math
from datetime import datetime
from typing import Any

from sqlalchemy import and_, bindparam, delete, func, or_, select, update
from sqlalchemy.orm import Session

from bzzz.network import subjects
from bzzz.network.envelope import Envelope
from bzzz.store.models import FactRow, ThreadRow
from bzzz.store.projection import (
    ID_LENGTH,
    NAME_LENGTH,
    Applied,
    Applier,
    ProjectionLimits,
    _optional_text,
    _strict_json,
    _text,
)

KIND = "fact"
STATED = "fact.stated"
AGREED = "fact.agreed"
TYPES = (STATED, AGREED)

AGREED_STATUS = "agreed"
PROPOSED = "proposed"
STATUSES = (AGREED_STATUS, PROPOSED)
# Where a fact came from: an agent stated it, a thread's consensus, a hosted agent's summary.
ORIGINS = ("agent", "consensus", "summary")

# The bounds of a fact (the service refuses past them with INVALID_PARAMETERS, the applier
# refuses the envelope).
ENTITY_LENGTH = 200
RELATION_LENGTH = 100
STATEMENT_LENGTH = 2_000
MAX_AGENTS = 100
_IDS_PER_STATEMENT = 500


def normalize(name: str) -> str:
    """An entity or relation as facts compare it: trimmed, whitespace folded, case folded."""
    return " ".join(name.split()).casefold()


def _digest(project: str, *parts: str) -> str:
    joined = "\x1f".join([project, *(normalize(p) for p in parts)])
    return hashlib.sha256(joined.encode()).hexdigest()[:48]


def subject_key(author: str) -> str:
    """The subject token of a fact's envelopes: its author's (erasure purges them by it)."""
    cleaned = "".join(c if c.isalnum() or c in "-_" else "_" for c in author)
    return cleaned[:128] or "principal"


def entity_digest(project: str, name: str) -> str:
    """The clear digest that finds an entity's facts (subject or object) in a project."""
    return _digest(project, name)


def key_digest(project: str, subject: str, relation: str) -> str:
    """The clear digest of a fact's subject and relation: one agreed fact of it is current."""
    return _digest(project, subject, "\x1e" + relation)


_VERSION = "bzzz_fact_version"


def next_version(session: Session) -> int:
    """The number of the next change to the facts (growing in log order; read once a batch)."""
    known = session.info.get(_VERSION)
    if known is None:
        known = int(session.scalar(select(func.max(FactRow.v))) or 0)
    session.info[_VERSION] = known + 1
    return int(known) + 1


def check_confidence(value: Any) -> float:
    """A confidence from 0 to 1 (ValueError otherwise)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError("confidence must be a number from 0 to 1")
    number = float(value)
    if not math.isfinite(number) or not 0.0 <= number <= 1.0:
        raise ValueError("confidence must be a number from 0 to 1")
    return number


def _agents(value: Any) -> list[str]:
    if not isinstance(value, list) or len(value) > MAX_AGENTS:
        raise TypeError(f"source.agents must be a list of at most {MAX_AGENTS} ids")
    return list(dict.fromkeys(_text(v, NAME_LENGTH, "source.agents") for v in value))


def _source(value: Any) -> tuple[str | None, str | None, list[str]]:
    if not isinstance(value, dict):
        raise TypeError("source must be an object")
    thread = _optional_text(value.get("thread"), ID_LENGTH, "source.thread")
    message = _optional_text(value.get("message"), ID_LENGTH, "source.message")
    return thread, message, _agents(value.get("agents", []))


def _consensus_holds(session: Session, thread_id: str | None, message_id: str | None) -> bool:
    """Whether ``thread_id`` reached its consensus on decision ``message_id``."""
    if thread_id is None or message_id is None:
        return False
    thread = session.get(ThreadRow, thread_id)
    consensus = thread.consensus if thread is not None else None
    return isinstance(consensus, dict) and consensus.get("decision_message_id") == message_id


# What this batch added and made current, by id and by (project, key): the appliers query
# the database without flushing each fact (one flush of them all at the end is far cheaper),
# so a fact added earlier in the batch is found here.
_ADDED = "bzzz_facts_added"
_CURRENT = "bzzz_facts_current"


def _added(session: Session) -> dict[str, FactRow]:
    found: dict[str, FactRow] = session.info.setdefault(_ADDED, {})
    return found


def _known(session: Session, fact_id: str) -> FactRow | None:
    """The fact with this id: added in this batch, or stored (None: neither)."""
    row = _added(session).get(fact_id)
    if row is not None and row in session:
        return row
    with session.no_autoflush:
        return session.get(FactRow, fact_id)


def _on_its_subject(env: Envelope, project: str) -> bool:
    """Whether the envelope travels on its fact's project's subject: a node serving (or
    a partition holding) another project never states or agrees a fact of this one."""
    return subjects.on_project(env.network, env.subject, project)


def _key_clause(project: str, key: str) -> Any:
    return and_(
        FactRow.project == project,
        FactRow.key_digest == key,
        FactRow.valid_until.is_(None),
        FactRow.status == AGREED_STATUS,
    )


# Built once: SQLAlchemy spends more on building a statement than SQLite on running it.
_LOOKUP = select(FactRow).where(
    or_(
        FactRow.id == bindparam("fact_id"),
        and_(
            FactRow.project == bindparam("project"),
            FactRow.key_digest == bindparam("key"),
            FactRow.valid_until.is_(None),
            FactRow.status == AGREED_STATUS,
        ),
    )
)


def _current_of(session: Session, project: str, key: str, stored: list[FactRow]) -> list[FactRow]:
    """The current agreed facts of a subject and relation, oldest change first (``stored``:
    what the database answered; the objects in memory say what this batch changed since)."""
    rows = list(stored)
    pending = session.info.setdefault(_CURRENT, {}).get((project, key))
    if pending is not None and pending in session and pending not in rows:
        rows.append(pending)
    live = [r for r in rows if r.valid_until is None and r.status == AGREED_STATUS]
    return sorted(live, key=lambda r: (r.v, r.id))


def supersede(
    session: Session, row: FactRow, at: datetime, v: int, stored: list[FactRow] | None = None
) -> list[str]:
    """End the current agreed fact(s) of ``row``'s subject and relation; their ids."""
    if stored is None:
        with session.no_autoflush:
            query = select(FactRow).where(_key_clause(row.project, row.key_digest))
            stored = list(session.scalars(query))
    current = [
        old for old in _current_of(session, row.project, row.key_digest, stored) if old is not row
    ]
    for old in current:
        old.valid_until = at
        old.superseded_by = row.id
        old.v = v
    if current:
        row.supersedes = current[-1].id
    session.info.setdefault(_CURRENT, {})[(row.project, row.key_digest)] = row
    return [old.id for old in current]


def apply_stated(session: Session, env: Envelope, limits: ProjectionLimits) -> Applied:
    """Record a fact; an agreed one supersedes the current one of its subject and relation."""
    p = env.payload
    fact_id = _text(p["fact_id"], ID_LENGTH, "fact_id")
    project = _text(p["project"], NAME_LENGTH, "project")
    subject = _text(p["subject"], ENTITY_LENGTH, "subject")
    relation = _text(p["relation"], RELATION_LENGTH, "relation")
    object_ = _text(p["object"], ENTITY_LENGTH, "object")
    statement = _optional_text(p.get("statement"), STATEMENT_LENGTH, "statement")
    status = p["status"]
    origin = p["origin"]
    if status not in STATUSES or origin not in ORIGINS:
        raise ValueError(f"status must be one of {STATUSES}, origin one of {ORIGINS}")
    confidence = check_confidence(p.get("confidence", 1.0))
    author = _text(p["author"], NAME_LENGTH, "author")
    thread, message, agents = _source(p.get("source") or {})
    if not _on_its_subject(env, project):
        return Applied({"ok": False, "reason": "the fact's project is not its subject's"})
    key = key_digest(project, subject, relation)
    # One query: a stored fact of this id, and the current ones of its subject and relation.
    with session.no_autoflush:
        found = list(session.scalars(_LOOKUP, {"fact_id": fact_id, "project": project, "key": key}))
    added = _added(session).get(fact_id)
    if any(r.id == fact_id for r in found) or (added is not None and added in session):
        return Applied({"ok": True, "fact_id": fact_id, "project": project, "duplicate": True})
    if origin == "consensus" and not _consensus_holds(session, thread, message):
        return Applied({"ok": False, "reason": "no such consensus in that thread"})
    v = next_version(session)
    row = FactRow(
        id=fact_id,
        project=project,
        subject=subject,
        relation=relation,
        object=object_,
        statement=statement or "",
        subject_digest=entity_digest(project, subject),
        object_digest=entity_digest(project, object_),
        key_digest=key,
        status=status,
        confidence=confidence,
        author=author,
        origin=origin,
        source_thread=thread,
        source_message=message,
        agents=agents or [author],
        valid_from=env.timestamp if status == AGREED_STATUS else None,
        valid_until=None,
        superseded_by=None,
        supersedes=None,
        recorded_at=env.timestamp,
        v=v,
    )
    ended = supersede(session, row, env.timestamp, v, found) if status == AGREED_STATUS else []
    session.add(row)
    _added(session)[fact_id] = row
    outcome = {"ok": True, "fact_id": fact_id, "project": project, "status": status}
    return Applied(outcome | {"superseded": ended})


def apply_agreed(session: Session, env: Envelope, limits: ProjectionLimits) -> Applied:
    """An agent agrees with a fact: a proposed one becomes agreed (and supersedes now)."""
    p = env.payload
    fact_id = _text(p["fact_id"], ID_LENGTH, "fact_id")
    agent = _text(p["agent"], NAME_LENGTH, "agent")
    row = _known(session, fact_id)
    if row is None or not _on_its_subject(env, row.project):
        return Applied({"ok": False, "reason": "no such fact"})
    if agent == row.author:
        return Applied({"ok": False, "reason": "a fact's author cannot agree with it"})
    if row.superseded_by is not None:
        return Applied({"ok": False, "reason": "the fact was superseded"})
    v = next_version(session)
    agents = list(row.agents or [])
    if agent not in agents and len(agents) < MAX_AGENTS:
        row.agents = [*agents, agent]
    ended: list[str] = []
    if row.status == PROPOSED:
        row.status = AGREED_STATUS
        row.valid_from = env.timestamp
        ended = supersede(session, row, env.timestamp, v)
    row.v = v
    outcome = {"ok": True, "fact_id": fact_id, "project": row.project, "status": row.status}
    return Applied(outcome | {"superseded": ended})


# --- erasure and retention (steps of retention's appliers) -----------------------------------


def _erase(session: Session, row: FactRow, v: int) -> None:
    """Delete a fact, joining the facts before and after it as if it had never been stated
    (what a node that replays a log without it reaches)."""
    before = session.get(FactRow, row.supersedes) if row.supersedes else None
    after = session.get(FactRow, row.superseded_by) if row.superseded_by else None
    if before is not None:
        before.valid_until = row.valid_until
        before.superseded_by = row.superseded_by
        before.v = v
    if after is not None:
        after.supersedes = row.supersedes
        after.v = v
    session.delete(row)
    session.flush()


def forget_agent(session: Session, agent_id: str) -> int:
    """Erasure of an agent: the facts it authored (stated, or its decision agreed in a thread)
    are removed; it leaves the agreeing agents of the others. How many facts were removed."""
    v = next_version(session)
    authored = session.scalars(
        select(FactRow).where(FactRow.author == agent_id).order_by(FactRow.v, FactRow.id)
    ).all()
    for row in authored:
        _erase(session, row, v)
    for fact_id, agents in session.execute(select(FactRow.id, FactRow.agents)).all():
        if agent_id in (agents or []):
            session.execute(
                update(FactRow)
                .where(FactRow.id == fact_id)
                .values(agents=[a for a in agents if a != agent_id], v=v)
            )
    return len(authored)


def expire_history(session: Session, before: datetime) -> int:
    """Retention's memory cut-off: facts no longer valid since before it are removed (the
    current ones stay, however old). How many were removed."""
    ids = list(
        session.scalars(
            select(FactRow.id).where(FactRow.valid_until.is_not(None), FactRow.valid_until < before)
        )
    )
    v = next_version(session)
    for first in range(0, len(ids), _IDS_PER_STATEMENT):
        part = ids[first : first + _IDS_PER_STATEMENT]
        session.execute(
            update(FactRow).where(FactRow.supersedes.in_(part)).values(supersedes=None, v=v)
        )
        session.execute(delete(FactRow).where(FactRow.id.in_(part)))
    return len(ids)


FACT_APPLIERS: dict[str, Applier] = {
    STATED: _strict_json(apply_stated),
    AGREED: _strict_json(apply_agreed),
}
