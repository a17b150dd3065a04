"""One batch of the log applied in one transaction: idempotency, appliers, events, directory.

The store's own appliers (threads, messages, agents, models' ledger, nodes, subscriptions,
tokens) are known here; a service whose envelopes the store applies (retention, the audit
trail's heads) registers its appliers with ``register_appliers`` when it is built, so the store
never imports a service.

Runs synchronously inside ``Database.write`` (a worker thread for SQLite, ``run_sync`` for
PostgreSQL), so a batch costs one hop to the database instead of one per statement.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, cast

from sqlalchemy import (
    Connection,
    Executable,
    Insert,
    Select,
    Table,
    bindparam,
    event,
    insert,
    inspect,
    select,
    update,
)
from sqlalchemy.engine.interfaces import Dialect
from sqlalchemy.exc import DBAPIError, SQLAlchemyError
from sqlalchemy.orm import Session
from sqlalchemy.orm.attributes import set_committed_value
from sqlalchemy.orm.util import identity_key

from bzzz import domain
from bzzz.network.envelope import Envelope
from bzzz.store.access_projection import ACCESS_APPLIERS
from bzzz.store.agent_projection import ADDED, CANONICAL, ONLINE, prefetch_agents
from bzzz.store.database import Database
from bzzz.store.llm_projection import LLM_APPLIERS
from bzzz.store.models import AgentRow, AppliedEnvelope, MessageRow
from bzzz.store.node_projection import ADMISSION_OUTCOMES, NODE_APPLIERS
from bzzz.store.projection import (
    SEEN,
    STAGED,
    STAGED_MESSAGE_IDS,
    STORED_MESSAGE_IDS,
    Applied,
    Applier,
    Outcome,
    ProjectionLimits,
    recorded,
    stage,
)
from bzzz.store.rows import agent_from_row
from bzzz.store.subscriptions import (
    SUBSCRIPTION_APPLIERS,
    SUBSCRIPTION_CHANGES,
    SubscriptionIndex,
    fan_out,
    load_index,
)
from bzzz.store.thread_projection import APPLIERS

logger = logging.getLogger(__name__)

_APPLIERS: dict[str, Applier] = (
    APPLIERS | LLM_APPLIERS | NODE_APPLIERS | SUBSCRIPTION_APPLIERS | ACCESS_APPLIERS
)
# Registered envelope types whose appliers query what the batch staged so far.
_READS_STAGED: set[str] = set()


def register_appliers(appliers: Mapping[str, Applier], *, reads_staged: bool = False) -> None:
    """Let every batch apply these envelope types (a service registers its own when built).

    ``reads_staged``: the appliers query rows the batch staged before them, so those rows are
    written first. Registering the same applier again changes nothing; a second applier for a
    type that has one is refused.
    """
    for kind, applier in appliers.items():
        known = _APPLIERS.get(kind)
        if known is not None and known is not applier:
            raise ValueError(f"envelope type {kind} already has an applier")
    _APPLIERS.update(appliers)
    if reads_staged:
        _READS_STAGED.update(appliers)


# Work some envelope types want done before their batch's transaction, away from it: a
# service registers it with its appliers (the reservation check is warmed off the loop).
Preparer = Callable[[Database, Sequence[Envelope]], Awaitable[None]]
_PREPARERS: dict[str, Preparer] = {}


def register_preparer(types: Sequence[str], preparer: Preparer) -> None:
    """Run ``preparer`` before applying a batch that holds one of ``types``."""
    for kind in types:
        _PREPARERS[kind] = preparer


async def prepare(db: Database, envelopes: Sequence[Envelope]) -> None:
    """Run the registered preparers of a batch's envelope types (once each).

    A preparer only gets work out of the way (its outcome never depends on it): one that
    fails is logged, and the batch is applied all the same.
    """
    if not _PREPARERS:
        return
    wanted = {id(p): p for env in envelopes if (p := _PREPARERS.get(env.type)) is not None}
    for preparer in wanted.values():
        try:
            await preparer(db, envelopes)
        except Exception:
            # Whatever went wrong, the applier decides without it: never stop the log here.
            logger.exception("preparing a batch failed; applying it as it is")


_TRACK = "bzzz_projection"
_TOUCHED = "bzzz_touched_agents"


@event.listens_for(Session, "before_flush")
def _track_agents(session: Session, _context: Any, _instances: Any) -> None:
    """Keep (strongly) every agent row a projection flush writes, for the directory."""
    if _TRACK not in session.info:
        return
    touched = session.info.setdefault(_TOUCHED, {})
    for obj in (*session.new, *session.dirty):
        if isinstance(obj, AgentRow):
            touched[obj.id] = obj


@dataclass(slots=True)
class BatchResult:
    """What a batch did: outcomes by envelope id, matched events, agents it changed."""

    outcomes: dict[str, Outcome] = field(default_factory=dict)
    matched: list[tuple[domain.Subscription, domain.Event]] = field(default_factory=list)
    agents: list[domain.Agent] = field(default_factory=list)
    seen: dict[str, datetime] = field(default_factory=dict)
    replayed: list[str] = field(default_factory=list)
    counters: Counter[str] = field(default_factory=Counter)
    subscriptions_changed: bool = False


@dataclass(slots=True)
class BatchContext:
    """What the batch needs from its node."""

    node_id: str
    limits: ProjectionLimits
    subscriptions: SubscriptionIndex | None
    online_agents: int | None = None
    # The projector's outcomes of the batch's admission envelopes (decided in log order).
    admission: dict[str, Outcome] = field(default_factory=dict)


def apply_batch(
    session: Session,
    envelopes: Sequence[tuple[Envelope, int]],
    ctx: BatchContext,
    *,
    isolate: bool = False,
) -> BatchResult:
    """Apply envelopes in log order, skipping those already applied.

    The fast path (``isolate=False``) lets an applier's error abort the whole transaction; the
    caller then runs the batch again with ``isolate=True``, where each envelope gets a savepoint
    and a malformed one is recorded as rejected instead of wedging the log.
    """
    session.info[_TRACK] = True
    session.info[STAGED] = {}
    session.info[SEEN] = {}
    session.info[ONLINE] = None if isolate else ctx.online_agents
    session.info[STAGED_MESSAGE_IDS] = set()
    session.info[ADMISSION_OUTCOMES] = ctx.admission
    session.info[CANONICAL] = {}
    session.info[ADDED] = {}
    result = BatchResult()
    ids = [env.id for env, _ in envelopes]
    for env_id, outcome in _rows_with_ids(session.connection(), _APPLIED_OF, ids):
        result.outcomes[env_id] = dict(json.loads(outcome) if isinstance(outcome, str) else outcome)
        result.replayed.append(env_id)
    session.info[STORED_MESSAGE_IDS] = _stored_message_ids(session, envelopes)
    announced = [
        env.payload.get("agent_id")
        for env, _ in envelopes
        if env.type == "agent.announced" and env.id not in result.outcomes
    ]
    for env, _ in envelopes:
        back = env.payload.get("agent_ids") if env.type == "agent.rejoined" else None
        if isinstance(back, list) and env.id not in result.outcomes:
            announced.extend(back)  # read with the announcements: up to 500 rows each
    prefetch_agents(session, announced)
    for env, seq in envelopes:
        if env.id in result.outcomes:
            continue
        if env.type in _READS_STAGED:
            # Retention and erasure query the messages this batch staged so far.
            _write_staged(session, result)
        if isolate:
            applied = _apply_isolated(session, env, ctx.limits, result)
        else:
            applied = _apply_one(env, session, ctx.limits, result.counters)
        result.outcomes[env.id] = applied.outcome
        stage(
            session,
            AppliedEnvelope,
            id=env.id,
            seq=seq,
            type=env.type,
            origin=env.origin,
            outcome=recorded(applied.outcome),
            applied_at=domain.utcnow(),
        )
        if env.type in SUBSCRIPTION_CHANGES:
            ctx.subscriptions = None
            result.subscriptions_changed = True
        result.matched.extend(_match(session, applied.events, ctx))
    _write_staged(session, result)
    result.agents = _touched_agents(session)
    return result


def _stored_message_ids(session: Session, envelopes: Sequence[tuple[Envelope, int]]) -> set[str]:
    """Which message ids the batch's posts carry that the store already holds (one query)."""
    wanted = [
        env.payload["message_id"]
        for env, _ in envelopes
        if env.type == "message.posted" and isinstance(env.payload.get("message_id"), str)
    ]
    if not wanted:
        return set()
    return {str(row[0]) for row in _rows_with_ids(session.connection(), _MESSAGES_OF, wanted)}


# The statements of every batch, built once: SQLAlchemy spends more on building a statement
# and its cache key than SQLite spends on running it.
_APPLIED = cast(Table, AppliedEnvelope.__table__)
_MESSAGES = cast(Table, MessageRow.__table__)
_MESSAGES_OF = select(_MESSAGES.c.id).where(_MESSAGES.c.id.in_(bindparam("ids", expanding=True)))
_APPLIED_OF = select(_APPLIED.c.id, _APPLIED.c.outcome).where(
    _APPLIED.c.id.in_(bindparam("ids", expanding=True))
)
# The same two queries for SQLite's driver (the parameter list is added per call).
_IDS_PER_QUERY = 500
_BY_IDS_SQLITE = {
    _MESSAGES_OF: f"SELECT id FROM {_MESSAGES.name} WHERE id IN ",
    _APPLIED_OF: f"SELECT id, outcome FROM {_APPLIED.name} WHERE id IN ",
}
_AGENTS = cast(Table, AgentRow.__table__)
_TOUCH_AGENT = (
    update(_AGENTS)
    .where(_AGENTS.c.id == bindparam("agent_id"))
    .values(last_activity=bindparam("at"))
)
_INSERTS: dict[Any, Insert] = {}


def _insert_of(model: Any) -> Insert:
    statement = _INSERTS.get(model)
    if statement is None:
        statement = _INSERTS[model] = insert(model.__table__)
    return statement


@dataclass(frozen=True, slots=True)
class _Compiled:
    """A statement compiled once for SQLite: its SQL and how to turn a row into parameters."""

    sql: str
    names: tuple[str, ...]
    processors: tuple[Callable[[Any], Any] | None, ...]

    def parameters(self, row: dict[str, Any]) -> tuple[Any, ...]:
        return tuple(
            row[name] if process is None else process(row[name])
            for name, process in zip(self.names, self.processors, strict=True)
        )


# (statement, parameter names) -> compiled form; None where the plain path must run (a column
# default computed in Python, a parameter the rows do not name).
# Keyed by dialect too: a sealed column's processor seals with its engine's keyring.
_COMPILED: dict[tuple[Executable, tuple[str, ...], Dialect], _Compiled | None] = {}


def _compile(statement: Executable, keys: tuple[str, ...], dialect: Dialect) -> _Compiled | None:
    cache_key = (statement, keys, dialect)
    if cache_key in _COMPILED:
        return _COMPILED[cache_key]
    compiled = statement.compile(dialect=dialect, column_keys=list(keys))  # type: ignore[attr-defined]
    names = tuple(compiled.positiontup or ())
    runnable: _Compiled | None = None
    if not compiled.insert_prefetch and not compiled.update_prefetch and set(names) <= set(keys):
        processors = compiled._bind_processors
        runnable = _Compiled(str(compiled), names, tuple(processors.get(n) for n in names))
    _COMPILED[cache_key] = runnable
    return runnable


def _on_driver(
    connection: Connection, sql: str, parameters: Any, *, many: bool = False
) -> list[Any]:
    """Run ``sql`` on the session's own sqlite3 connection (so inside its transaction).

    A driver error comes back as SQLAlchemy's, which ``Database.write`` turns into a
    StoreError and the projector answers by applying the batch envelope by envelope.
    """
    dialect = connection.dialect
    dbapi = connection.connection.dbapi_connection
    assert dbapi is not None
    cursor = dbapi.cursor()
    try:
        if many:
            cursor.executemany(sql, parameters)
            return []
        return list(cursor.execute(sql, parameters))
    except dialect.loaded_dbapi.Error as exc:
        error = dialect.loaded_dbapi.Error
        raise DBAPIError.instance(sql, parameters, exc, error, dialect=dialect) from exc
    finally:
        cursor.close()


def execute_many(connection: Connection, statement: Executable, rows: list[dict[str, Any]]) -> None:
    """Run a write for each row: on SQLite straight on the driver's cursor, else through Core.

    Core's per-execution bookkeeping costs SQLite several times what running the statement
    does; the parameters still go through the column types' own bind processors, so the
    stored values are exactly those Core would store.
    """
    dialect = connection.dialect
    compiled = _compile(statement, tuple(rows[0]), dialect) if dialect.name == "sqlite" else None
    if compiled is None:
        connection.execute(statement, rows)
        return
    parameters = [compiled.parameters(row) for row in rows]
    _on_driver(connection, compiled.sql, parameters, many=True)


def _rows_with_ids(connection: Connection, query: Select[Any], ids: list[str]) -> list[Any]:
    """Rows of ``_APPLIED_OF`` or ``_MESSAGES_OF`` for ``ids`` (on SQLite, JSON comes as text)."""
    if connection.dialect.name != "sqlite":
        return list(connection.execute(query, {"ids": ids}))
    rows: list[Any] = []
    # In slices, each far under SQLite's limit on parameters (32,766).
    for first in range(0, len(ids), _IDS_PER_QUERY):
        part = tuple(ids[first : first + _IDS_PER_QUERY])
        sql = f"{_BY_IDS_SQLITE[query]}({','.join('?' * len(part))})"
        rows.extend(_on_driver(connection, sql, part))
    return rows


def _write_staged(session: Session, result: BatchResult) -> None:
    """Write the staged rows and last-activity updates, then start staging afresh."""
    seen: dict[str, datetime] = session.info[SEEN]
    # Core on the connection: the ORM bulk and execute paths cost several times more per row.
    connection = session.connection()
    if seen:
        # The rows the batch changed go first: a touch noted since is later in the log. The
        # rows the session holds are told the new value, as a read after the update would.
        session.flush()
        touched = [{"agent_id": agent_id, "at": at} for agent_id, at in seen.items()]
        execute_many(connection, _TOUCH_AGENT, touched)
        for agent_id, at in seen.items():
            held = session.identity_map.get(identity_key(AgentRow, agent_id))
            if held is not None:
                set_committed_value(held, "last_activity", at)
    result.seen.update(seen)
    for model, rows in session.info[STAGED].items():
        if rows:
            execute_many(connection, _insert_of(model), rows)
    session.info[STAGED] = {}
    session.info[SEEN] = {}


def _apply_one(
    env: Envelope, session: Session, limits: ProjectionLimits, counters: Counter[str]
) -> Applied:
    applier = _APPLIERS.get(env.type)
    if applier is None:
        counters["unknown_type"] += 1
        return Applied({"ok": False, "reason": f"unknown envelope type {env.type}"})
    return applier(session, env, limits)


def _apply_isolated(
    session: Session, env: Envelope, limits: ProjectionLimits, result: BatchResult
) -> Applied:
    # Everything this envelope writes, staged rows included, happens inside its savepoint.
    _write_staged(session, result)
    counters = result.counters
    try:
        with session.begin_nested():
            applied = _apply_one(env, session, limits, counters)
            _write_staged(session, result)
            session.flush()
            return applied
    except (KeyError, TypeError, ValueError, AttributeError, SQLAlchemyError) as exc:
        # A malformed payload from a signed peer must not wedge the log: record and skip.
        session.info[STAGED] = {}
        session.info[SEEN] = {}
        session.info[ONLINE] = None
        counters["bad_payload"] += 1
        logger.warning("envelope %s (%s) has a bad payload: %r", env.id, env.type, exc)
        return Applied({"ok": False, "reason": "bad payload"})


def _touched_agents(session: Session) -> list[domain.Agent]:
    session.flush()
    # A new row whose savepoint rolled back is transient: it never reached the database.
    rows: list[AgentRow] = [
        row for row in session.info.pop(_TOUCHED, {}).values() if inspect(row).persistent
    ]
    for row in rows:
        # A rolled-back savepoint expires what it touched; reload before reading.
        if inspect(row).expired_attributes:
            session.refresh(row)
    return [agent_from_row(row) for row in rows]


def _match(
    session: Session, events: list[domain.Event], ctx: BatchContext
) -> list[tuple[domain.Subscription, domain.Event]]:
    if not events:
        return []
    if ctx.subscriptions is None:
        ctx.subscriptions = load_index(session, ctx.node_id)
    return fan_out(session, ctx.subscriptions, events)
