"""The appliers of ``agent.announced``, ``agent.offline`` and ``agent.rejoined``: who holds an
agent id, and the online count the agent limit is checked against. An agent that goes offline
keeps its path reservations (they end by their own clock); one announced in another project
lets go of the old project's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Table, bindparam, delete, func, or_, select
from sqlalchemy.orm import Session

from bzzz import domain
from bzzz.domain import AgentStatus, canonical_agent_id
from bzzz.network import subjects
from bzzz.network.envelope import Envelope
from bzzz.projects import subject_token
from bzzz.store import reservation_ends
from bzzz.store.models import AgentRow, ReservationRow
from bzzz.store.projection import (
    CANONICAL_LENGTH,
    NAME_LENGTH,
    Applied,
    Applier,
    ProjectionLimits,
    _activity,
    _address_of,
    _check_names,
    _event,
    _optional_text,
    _performance,
    _refresh_status,
    _strict_json,
    _text,
    set_last_activity,
)


def _agent_json(row: AgentRow) -> dict[str, Any]:
    return {
        "id": row.id,
        "role": row.role,
        "capabilities": list(row.capabilities),
        "specialization": row.specialization,
        "project": row.project,
        "task": row.task,
        "status": row.status,
        "node_id": row.node_id,
    }


def _check_announcement(p: dict[str, Any]) -> None:
    """Validate an agent.announced payload before any row is touched."""
    for name in ("agent_id", "role", "session_id"):
        _text(p[name], NAME_LENGTH, name)
    for name in ("project", "task"):
        _optional_text(p.get(name), NAME_LENGTH, name)
    _optional_text(p.get("specialization"), 256, "specialization")
    _check_names(p.get("capabilities") or [], "capabilities")
    max_tasks = p.get("max_tasks", 3)
    if not isinstance(max_tasks, int) or isinstance(max_tasks, bool) or max_tasks < 1:
        raise ValueError("max_tasks must be a positive integer")
    if not isinstance(p.get("metadata") or {}, dict):
        raise TypeError("metadata must be an object")


ONLINE = "bzzz_online_agents"
# The agent's read mark of its inbox (bzzz.agents.inbox_projection): the network's, not the
# announcer's, so announcing the agent again keeps it.
INBOX_READ = "inbox_read"
KEPT_METADATA = frozenset({INBOX_READ})


def online_agents(session: Session) -> int:
    """How many agents are online: the batch's running count, else counted in the database."""
    known = session.info.get(ONLINE)
    if known is None:
        counted = session.execute(
            select(func.count()).select_from(AgentRow).where(AgentRow.status != "offline")
        )
        known = session.info[ONLINE] = int(counted.scalar_one())
    return int(known)


def _count_online(session: Session, delta: int) -> None:
    if session.info.get(ONLINE) is not None:
        session.info[ONLINE] += delta


def _same_holder(row: AgentRow, origin: str, session_id: str) -> bool:
    """Whether ``session_id`` at ``origin`` holds the agent of ``row``.

    A principal's or handle's key holds its agents through any node; a session key only on
    the node whose session it is.
    """
    if row.session_id != session_id:
        return False
    return row.node_id == origin or domain.network_wide_key(session_id)


_AGENTS = cast(Table, AgentRow.__table__)

# Agents holding another spelling of an id (built once, like _MESSAGE_EXISTS).
_LOOK_ALIKES = select(_AGENTS.c.id).where(
    _AGENTS.c.canonical_id == bindparam("canonical"), _AGENTS.c.id != bindparam("agent_id")
)

# Canonical id -> ids announced in this batch (not flushed yet, so not in the query above).
CANONICAL = "bzzz_canonical_ids"
# Agent id -> the row this batch added (pending until the batch's one flush).
ADDED = "bzzz_added_agents"
# What the batch's announcements need of the store, read in one query (``prefetch_agents``).
PREFETCHED = "bzzz_prefetched_agents"
_IDS_PER_QUERY = 500


@dataclass(slots=True)
class _Prefetched:
    """Agent id -> its row when the batch began (None: no row); canonical id -> the ids
    holding it then. For the ids the batch's announcements name and their look-alikes."""

    rows: dict[str, AgentRow | None]
    canonical: dict[str, set[str]]


def prefetch_agents(session: Session, agent_ids: Sequence[object]) -> None:
    """Read the rows an announcement looks up, for all of a batch's announcements at once.

    One announcement asked the store twice (its row, the look-alikes of its id): two queries
    an envelope where a batch of them now makes one a few hundred ids. Ids an applier would
    refuse are left out; it finds them as before.
    """
    ids: list[str] = []
    canonicals: set[str] = set()
    for agent_id in dict.fromkeys(agent_ids):
        # A NUL would abort a PostgreSQL transaction outside any envelope's savepoint.
        if (
            isinstance(agent_id, str)
            and 0 < len(agent_id) <= NAME_LENGTH
            and "\x00" not in agent_id
        ):
            ids.append(agent_id)
            canonicals.add(canonical_agent_id(agent_id))
    fetched = _Prefetched(dict.fromkeys(ids), {c: set() for c in canonicals})
    wanted = sorted(canonicals)
    for first in range(0, max(len(ids), len(wanted)), _IDS_PER_QUERY):
        these, alike = ids[first : first + _IDS_PER_QUERY], wanted[first : first + _IDS_PER_QUERY]
        query = select(AgentRow).where(
            or_(AgentRow.id.in_(these), AgentRow.canonical_id.in_(alike))
        )
        for row in session.scalars(query):
            fetched.rows[row.id] = row
            if row.canonical_id in fetched.canonical:
                fetched.canonical[row.canonical_id].add(row.id)
    session.info[PREFETCHED] = fetched


def _agent_row(session: Session, agent_id: str) -> AgentRow | None:
    """The agent's row as the batch left it, without flushing the batch's pending rows first.

    ``session.get`` flushes everything pending before it looks in the database: an announcement
    then cost a flush of its own (two thirds of its apply, measured), and a batch of them many
    single-row inserts instead of one insert of many rows. A row this batch added is found in
    ``ADDED`` (while it is in the session: a rolled-back savepoint drops it); a row read when
    the batch began in ``PREFETCHED``; any other in the identity map or, unchanged by the
    batch, in the database.
    """
    row = cast(dict[str, AgentRow], session.info.get(ADDED, {})).get(agent_id)
    if row is not None and row in session:
        return row
    fetched = cast(_Prefetched | None, session.info.get(PREFETCHED))
    if fetched is not None and agent_id in fetched.rows:
        return fetched.rows[agent_id]
    with session.no_autoflush:
        return session.get(AgentRow, agent_id)


def _canonical_id(session: Session, agent_id: str) -> str | None:
    """The id's canonical form, or None when a live agent holds a look-alike of it."""
    canonical = canonical_agent_id(agent_id)
    if len(canonical) > CANONICAL_LENGTH:
        raise ValueError(f"agent_id must stay under {CANONICAL_LENGTH} characters in NFKC form")
    batch: dict[str, set[str]] = session.info.setdefault(CANONICAL, {})
    fetched = cast(_Prefetched | None, session.info.get(PREFETCHED))
    if fetched is not None and canonical in fetched.canonical:
        stored = fetched.canonical[canonical]
    else:
        # Core, so no flush: the common case (no other spelling) costs one indexed query.
        found = session.connection().execute(
            _LOOK_ALIKES, {"canonical": canonical, "agent_id": agent_id}
        )
        stored = {str(row[0]) for row in found}
    others = stored | batch.get(canonical, set())
    others.discard(agent_id)
    for other in sorted(others):
        # The row as this batch left it (it may have gone offline in an unflushed change).
        row = _agent_row(session, other)
        if row is not None and row.status != AgentStatus.OFFLINE.value:
            return None
    batch.setdefault(canonical, set()).add(agent_id)
    return canonical


def apply_agent_announced(session: Session, env: Envelope, limits: ProjectionLimits) -> Applied:
    """Create or update an agent unless a live agent of another session holds the id.

    Ids are compared in canonical form (NFKC, case-folded): while ``ISO-A`` is online, no one
    announces ``iso-a``, its own session included.
    """
    p = env.payload
    _check_announcement(p)
    canonical = _canonical_id(session, p["agent_id"])
    if canonical is None:
        return Applied({"ok": False, "reason": "exists", "look_alike": True})
    row = _agent_row(session, p["agent_id"])
    at = env.timestamp
    held = row is not None and row.status != AgentStatus.OFFLINE.value
    if held and row is not None and not _same_holder(row, env.origin, p["session_id"]):
        return Applied({"ok": False, "reason": "exists", "holder_node": row.node_id})
    if not held:
        # The limit counts online agents: one coming back from offline needs room like a new one.
        if online_agents(session) >= limits.max_agents:
            return Applied({"ok": False, "reason": "max_agents"})
        _count_online(session, 1)
    if row is not None and row.project != p.get("project"):
        # Reservations are held in a project: an agent that moves lets go of the old one's.
        end_reservations(session, [row.id], reason=reservation_ends.MOVED, at=env.timestamp)
    if row is None:
        row = AgentRow(
            id=p["agent_id"],
            created_at=at,
            active_tasks=0,
            tasks_completed=0,
            tasks_failed=0,
            performance=_performance(0, 0),
        )
        session.add(row)
        session.info.setdefault(ADDED, {})[row.id] = row
    row.canonical_id = canonical
    row.role = p["role"]
    row.capabilities = list(p.get("capabilities") or [])
    row.specialization = p.get("specialization")
    row.max_tasks = int(p.get("max_tasks", 3))
    row.project = p.get("project")
    row.task = p.get("task")
    row.node_id = env.origin
    row.session_id = p["session_id"]
    kept = {k: v for k, v in (row.metadata_ or {}).items() if k in KEPT_METADATA}
    row.metadata_ = dict(p.get("metadata") or {}) | kept
    set_last_activity(session, row, at)
    row.status = AgentStatus.IDLE.value
    _refresh_status(row)
    _activity(session, row.id, "announced", f"announced as {row.role}", env.id, at)
    event = _event(
        env,
        "agent_announcement",
        _address_of(row),
        {"action": "announced", "agent": _agent_json(row)},
    )
    return Applied({"ok": True, "status": row.status}, [event])


def apply_agent_offline(session: Session, env: Envelope, limits: ProjectionLimits) -> Applied:
    """Mark agents offline, but only those still held by the origin's named session."""
    p = env.payload
    _check_names(p["agent_ids"], "agent_ids")
    _text(p["session_id"], NAME_LENGTH, "session_id")
    _text(p.get("reason", "session ended"), 500, "reason")
    events = []
    went: list[str] = []
    for n, agent_id in enumerate(p["agent_ids"]):
        row = session.get(AgentRow, agent_id)
        if row is None or row.status == AgentStatus.OFFLINE.value:
            continue
        if row.node_id != env.origin or row.session_id != p["session_id"]:
            continue
        row.status = AgentStatus.OFFLINE.value
        _count_online(session, -1)
        set_last_activity(session, row, env.timestamp)
        went.append(agent_id)
        _activity(
            session, agent_id, "offline", p.get("reason", "session ended"), env.id, env.timestamp
        )
        events.append(
            _event(
                env,
                "agent_announcement",
                _address_of(row),
                {
                    "action": "offline",
                    "agent": _agent_json(row),
                    "reason": p.get("reason", "session ended"),
                },
                n,
            )
        )
    return Applied({"ok": True, "offline": went}, events)


def apply_agent_rejoined(session: Session, env: Envelope, limits: ProjectionLimits) -> Applied:
    """The origin's agents a false ``node.lost`` took offline, online again as they were.

    One envelope for many agents of one project (its subject's), where announcing each again
    made a storm of envelopes on a saturated network. Only agents still offline, held by the
    origin, of the subject's project come back (every node serving that project decides the
    same), each if the agent limit has room.
    """
    p = env.payload
    ids = _check_names(p["agent_ids"], "agent_ids")
    project = subjects.project_token(env.network, env.subject)
    events = []
    back: list[str] = []
    full: list[str] = []
    for agent_id in dict.fromkeys(ids):
        row = _agent_row(session, agent_id)
        if row is None or row.status != AgentStatus.OFFLINE.value or row.node_id != env.origin:
            continue
        if project is None or subject_token(row.project) != project:
            continue
        if _canonical_id(session, agent_id) is None:
            continue  # a look-alike of it came online meanwhile: it holds the name now
        if online_agents(session) >= limits.max_agents:
            full.append(agent_id)
            continue
        _count_online(session, 1)
        set_last_activity(session, row, env.timestamp)
        row.status = AgentStatus.IDLE.value
        _refresh_status(row)
        _activity(session, row.id, "announced", "online again: its node was taken for lost",
                  env.id, env.timestamp)  # fmt: skip
        events.append(
            _event(
                env,
                "agent_announcement",
                _address_of(row),
                {"action": "announced", "agent": _agent_json(row)},
                len(back),
            )
        )
        back.append(agent_id)
    return Applied({"ok": True, "online": back, "max_agents": full}, events)


def end_reservations(
    session: Session, agent_ids: list[str], *, reason: str, at: datetime | None = None
) -> int:
    """Delete the path reservations of agents that were erased or moved to another project
    (remembered as ended for ``reason``: reservation_ends)."""
    if not agent_ids:
        return 0
    rows = list(
        session.scalars(select(ReservationRow).where(ReservationRow.agent_id.in_(agent_ids)))
    )
    return _end(session, rows, reason, at)


def end_reservations_of_node(session: Session, node_id: str, at: datetime | None = None) -> int:
    """Delete the path reservations a removed node made or whose agents it held."""
    held = select(AgentRow.id).where(AgentRow.node_id == node_id)
    rows = list(
        session.scalars(
            select(ReservationRow).where(
                or_(ReservationRow.origin == node_id, ReservationRow.agent_id.in_(held))
            )
        )
    )
    return _end(session, rows, reservation_ends.NODE_REMOVED, at)


def _end(session: Session, rows: list[ReservationRow], reason: str, at: datetime | None) -> int:
    if not rows:
        return 0
    reservation_ends.record_ends(session, rows, reason, at)
    session.execute(delete(ReservationRow).where(ReservationRow.id.in_([r.id for r in rows])))
    return len(rows)


AGENT_APPLIERS: dict[str, Applier] = {
    kind: _strict_json(fn)
    for kind, fn in {
        "agent.announced": apply_agent_announced,
        "agent.offline": apply_agent_offline,
        "agent.rejoined": apply_agent_rejoined,
    }.items()
}
