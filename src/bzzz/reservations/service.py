"""ReservationService: agents reserve the paths they edit, and see who holds what.

A reservation is made, released and renewed through the log (``reservation.*``, applied in
``projection.py``), so whether two requests conflict is decided in log order on every node.
The service checks the caller's grants first (the ``write`` scope and the agent's project to
change, ``read`` and project grants to list), acts as the caller's announced agent (as
bzzz_post does), and turns a refused outcome into RESERVATION_CONFLICT naming the holder.

A request's answer is the truth of the log: when the network's acknowledgement comes late
(a publish times out although the stream stored it), the same envelope is published again —
the log keeps it once, by its id — and the answer is the outcome of whichever copy the node
applies, granted or refused; only when none is applied in time is it NETWORK_ERROR, naming
the reservation id it would have (``list`` shows it if it was recorded after all).

``check`` answers whether an agent may write paths now (``reservations.check``): read from this
node's store, for the agent's own token or an owner or admin; an enforced refusal goes on the
log as ``reservation.refused``.

Its upkeep (``run_sweeps``) publishes a sweep when expired reservations linger and a
``reservation.expiring`` notice for those ending within ``reservations.expiring_notice``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import defaultdict
from datetime import timedelta
from typing import Any

from sqlalchemy import exists, select
from ulid import ULID

from bzzz import domain
from bzzz.access.keys import STATELESS, holder_of
from bzzz.agents.service import AgentService, raise_store_failure, visible_projects
from bzzz.clock import Clock, SystemClock
from bzzz.config import ReservationSettings
from bzzz.errors import (
    AgentNotFound,
    BzzzError,
    InvalidParameters,
    NetworkError,
    PermissionDenied,
    RateLimited,
    ReservationConflict,
)
from bzzz.eventlog import Caller, EventLog
from bzzz.principal import Principal, Scope
from bzzz.projects import NO_PROJECT
from bzzz.reservations import check as check_rules
from bzzz.reservations import projection
from bzzz.reservations.check import CheckInput, Held
from bzzz.reservations.globs import overlap
from bzzz.reservations.projection import RESERVATION_APPLIERS, reservation_json
from bzzz.reservations.schemas import ReserveInput
from bzzz.schemas import validate_input
from bzzz.store.batch import register_appliers, register_preparer
from bzzz.store.database import Database
from bzzz.store.models import ReservationEndRow, ReservationRow
from bzzz.store.projection import Outcome

logger = logging.getLogger(__name__)

LIST_LIMIT = 500
# Path x pattern pairs a check compares on the event loop; more go to a worker thread.
CHECK_INLINE = 4096
# How long a request whose acknowledgement failed waits for a copy of it to be applied.
CONFIRM_SECONDS = 15.0


class ReservationService:
    """bzzz_reserve: reserve, release, renew and list path reservations."""

    def __init__(
        self,
        db: Database,
        log: EventLog,
        agents: AgentService,
        settings: ReservationSettings | None = None,
        *,
        clock: Clock | None = None,
    ) -> None:
        # Every node decides conflicts the same way: in log order, in its own store.
        register_appliers(RESERVATION_APPLIERS)
        register_preparer([projection.REQUESTED], projection.prepare)
        self._db = db
        self._log = log
        self._agents = agents
        self.clock: Clock = clock or SystemClock()
        settings = settings or ReservationSettings()
        self.sweep_seconds = settings.sweep_seconds
        self.notice_seconds = settings.expiring_notice
        # Requests whose acknowledgement failed, by envelope id: resolved when one is applied.
        self._unconfirmed: dict[str, asyncio.Future[Outcome]] = {}
        log.projector.add_outcome_listener(self._on_outcomes)

    async def reserve(self, caller: Caller, params: ReserveInput) -> dict[str, Any]:
        """Run one bzzz_reserve action."""
        if params.action == "list":
            return await self.listing(caller.principal, params)
        caller.principal.require(Scope.WRITE, f"'{params.action}' of a path reservation")
        agent = await self._acting(caller, params.agent_id)
        caller.principal.require_project(agent.project, "reserving paths")
        if params.action == "reserve":
            return await self._reserve(caller.principal, agent, params)
        return await self._change(agent, params)

    async def _reserve(
        self, who: Principal, agent: domain.Agent, params: ReserveInput
    ) -> dict[str, Any]:
        if not params.paths:
            raise InvalidParameters(
                "reserve needs paths: glob patterns under the project (src/api/**, README.md)",
                details={"field": "paths"},
            )
        payload = {
            "agent_id": agent.id,
            "project": agent.project,
            "owner": who.id,
            "mode": params.mode,
            "paths": list(params.paths),
            "ttl": params.ttl,
            "reason": params.reason or None,
        }
        outcome = await self._emit_confirmed(
            projection.REQUESTED, agent.id, payload, agent.project or NO_PROJECT
        )
        raise_store_failure(outcome)
        if not outcome["ok"]:
            raise _refusal(outcome, agent)
        return {"success": True, "action": "reserve", "reservation": outcome["reservation"]}

    async def _change(self, agent: domain.Agent, params: ReserveInput) -> dict[str, Any]:
        """Release or renew the agent's reservations (the one named, or all of them)."""
        ids = None
        if params.reservation_id is not None:
            await self._require_held(agent, params.reservation_id)
            ids = [params.reservation_id]
        payload: dict[str, Any] = {"agent_id": agent.id, "reservation_ids": ids}
        if params.action == "renew":
            payload["ttl"] = params.ttl
            type_ = projection.RENEWED
        else:
            type_ = projection.RELEASED
        outcome = await self._emit_confirmed(type_, agent.id, payload, agent.project or NO_PROJECT)
        raise_store_failure(outcome)
        if params.action == "renew":
            renewed = outcome.get("renewed", [])
            return {"success": True, "action": "renew", "reservations": renewed}
        released = outcome.get("released", [])
        return {"success": True, "action": "release", "released": released}

    async def _emit_confirmed(
        self, type_: str, key: str, payload: dict[str, Any], project: str
    ) -> Outcome:
        """Publish a change and return its outcome, even when its acknowledgement fails.

        A failed publish is not taken at its word: the network may have stored the envelope
        and only answered late. The same envelope (same id and time) goes out again — the log
        keeps it once — and the outcome of whichever copy this node applies is the answer.
        """
        envelope_id, now = str(ULID()), self.clock.now()
        applied: asyncio.Future[Outcome] = asyncio.get_running_loop().create_future()
        self._unconfirmed[envelope_id] = applied

        async def publish() -> Outcome:
            return await self._log.emit(
                type_,
                projection.KIND,
                key,
                payload,
                envelope_id=envelope_id,
                now=now,
                project=project,
            )

        try:
            try:
                return await publish()
            except NetworkError as exc:
                logger.warning("reservation %s not acknowledged (%s); asking again", envelope_id,
                               exc.message)  # fmt: skip
                failure = exc
            again = asyncio.ensure_future(publish())
            try:
                async with asyncio.timeout(CONFIRM_SECONDS):
                    await asyncio.wait({again, applied}, return_when=asyncio.FIRST_COMPLETED)
                    if not applied.done() and again.exception() is None:
                        return again.result()
                    return await applied
            except TimeoutError:
                raise NetworkError(
                    f"the network did not confirm the change in time ({failure.message}); "
                    "whether it was recorded is unknown: 'list' shows what is held (a "
                    f"reservation it made has the id '{envelope_id}')",
                    details={"envelope_id": envelope_id},
                ) from failure
            finally:
                if not again.done():
                    again.cancel()
                with contextlib.suppress(asyncio.CancelledError, BzzzError):
                    await again
        finally:
            self._unconfirmed.pop(envelope_id, None)

    def _on_outcomes(self, outcomes: dict[str, Outcome]) -> None:
        """The projector applied a batch: answer the requests waiting for their confirmation."""
        if not self._unconfirmed:
            return
        for envelope_id, waiting in self._unconfirmed.items():
            outcome = outcomes.get(envelope_id)
            if outcome is not None and not waiting.done():
                waiting.set_result(outcome)

    async def _require_held(self, agent: domain.Agent, reservation_id: str) -> None:
        """INVALID_PARAMETERS unless ``reservation_id`` is a live reservation of ``agent``."""
        async with self._db.session() as session:
            row = await session.get(ReservationRow, reservation_id)
        if row is None or row.agent_id != agent.id or row.expires_at <= self.clock.now():
            raise InvalidParameters(
                f"agent '{agent.id}' holds no live reservation '{reservation_id}' (released, "
                "expired, or another agent's)",
                details={"reservation_id": reservation_id, "agent_id": agent.id},
            )

    async def _acting(self, caller: Caller, agent_id: str | None) -> domain.Agent:
        """The caller's announced agent (``agent_id`` picks one of several)."""
        mine = await self._agents.agents_of(caller)
        holder = holder_of(caller)
        if not mine:
            hint = "agent_handle" if caller.session_id == STATELESS else "bzzz_announce"
            raise InvalidParameters(
                f"this {holder} acts as no agent: reservations are an agent's; announce one with "
                "bzzz_announce (a client without a session passes its agent_handle)",
                details={"hint": hint},
            )
        if agent_id is None and len(mine) == 1:
            return mine[0]
        for agent in mine:
            if agent.id == agent_id:
                return agent
        if agent_id is None:
            message = f"this {holder} announced several agents; pass agent_id to choose one"
        else:
            message = f"agent '{agent_id}' was not announced by this {holder}"
        raise InvalidParameters(message, details={"session_agents": [a.id for a in mine]})

    # --- reading ------------------------------------------------------------------------------

    async def listing(self, who: Principal, params: ReserveInput) -> dict[str, Any]:
        """Live reservations in the principal's projects (filters: project, agent, paths)."""
        who.require(Scope.READ, "listing path reservations")
        if params.project is not None:
            who.require_project(params.project, "listing path reservations")
        rows = await self._rows(who, params.project, params.agent_id)
        if params.paths:
            wanted = list(params.paths)
            rows = [r for r in rows if any(overlap(a, b) for a in wanted for b in r.paths)]
        shown = [reservation_json(r) for r in rows[:LIST_LIMIT]]
        return {
            "success": True,
            "action": "list",
            "reservations": shown,
            "count": len(shown),
            "total": len(rows),
        }

    async def of_agent(self, agent_id: str) -> list[dict[str, Any]]:
        """An agent's live reservations (bzzz_get of bzzz://agent/reservations)."""
        async with self._db.session() as session:
            rows = await session.scalars(
                select(ReservationRow)
                .where(
                    ReservationRow.agent_id == agent_id,
                    ReservationRow.expires_at > self.clock.now(),
                )
                .order_by(ReservationRow.created_at, ReservationRow.id)
            )
            return [reservation_json(r) for r in rows]

    async def _rows(
        self, who: Principal, project: str | None, agent_id: str | None
    ) -> list[ReservationRow]:
        query = select(ReservationRow).where(ReservationRow.expires_at > self.clock.now())
        if project is not None:
            query = query.where(ReservationRow.project == project)
        if agent_id is not None:
            query = query.where(ReservationRow.agent_id == agent_id)
        visible = visible_projects(who)
        if visible is not None:
            query = query.where(ReservationRow.project.in_(sorted(visible)))
        query = query.order_by(ReservationRow.project, ReservationRow.created_at, ReservationRow.id)
        async with self._db.session() as session:
            return list(await session.scalars(query))

    # --- the check ---------------------------------------------------------------------------

    async def check(
        self,
        caller: Caller,
        agent_id: str,
        paths: list[str],
        *,
        enforce: bool = False,
        source: str | None = None,
    ) -> dict[str, Any]:
        """May ``agent_id`` write ``paths`` now (see ``reservations.check``)?

        An agent token checks as its own agent only; any other caller as an agent it owns or
        acts as, or one of a project it is admin of. ``enforce`` (``write`` scope) records a
        ``reservation_refused`` event when a path is refused.
        """
        params = validate_input(
            CheckInput, {"agent": agent_id, "paths": paths, "enforce": enforce, "source": source}
        )
        who = caller.principal
        who.require(Scope.READ, "checking path reservations")
        if params.enforce:
            who.require(Scope.WRITE, "an enforced reservation check (it records refusals)")
        who.require_agent(params.agent)
        project = await self._checked_project(caller, params.agent)
        self._log.require_served(project)
        live, ended = await self._held(project, params.agent)
        if len(params.paths) * sum(len(h.paths) for h in live) > CHECK_INLINE:
            answers = await asyncio.to_thread(_decide_all, params.agent, params.paths, live, ended)
        else:
            answers = _decide_all(params.agent, params.paths, live, ended)
        refused = [a for a in answers if not a["allowed"]]
        if refused and params.enforce:
            await self._record_refusal(params.agent, project, params.source, refused)
        return {
            "agent": params.agent,
            "project": project,
            "allowed": not refused,
            "paths": answers,
        }

    async def _checked_project(self, caller: Caller, agent_id: str) -> str | None:
        """The agent's project, once the caller may check as it (AGENT_NOT_FOUND, or
        PERMISSION_DENIED)."""
        who = caller.principal
        agent = self._agents.directory.get(agent_id)
        announced = agent is not None
        if agent is not None and not who.may_see_project(agent.project):
            agent = None  # an agent of another project is not shown to exist
        if agent is not None:
            project = agent.project
            allowed = (
                who.agent == agent_id
                or who.is_admin_of(project)
                or self._agents.holds(caller, agent)
                or (who.authenticated and agent.owner == who.id)
            )
        else:
            # Not an agent of the caller's projects (now): what it held in one of them, and
            # lost by moving away, is remembered a while.
            async with self._db.session() as session:
                held_in = (
                    await session.scalars(
                        select(ReservationEndRow.project)
                        .where(ReservationEndRow.agent_id == agent_id)
                        .order_by(ReservationEndRow.ended_at.desc())
                    )
                ).all()
            seen = [p for p in held_in if who.may_see_project(p)]
            only = _single_project(who)
            # An agent that never announced holds nothing, but others' reservations hold it
            # all the same: its own token (or its project's admin) checks it there.
            if (
                not seen
                and not announced
                and only is not None
                and (who.agent == agent_id or who.is_admin_of(only))
            ):
                seen = [only]
            project = seen[0] if seen else None
            if not seen:
                raise AgentNotFound(
                    f"agent '{agent_id}' is not known in this credential's projects",
                    details={"agent_id": agent_id},
                )
            allowed = who.agent == agent_id or who.is_admin_of(project)
        who.require_project(project, "checking path reservations")
        if not allowed:
            raise PermissionDenied(
                f"only agent '{agent_id}' itself (its token or owner) and admins of its project "
                "check its writes",
                details={"missing": "owner_or_admin", "agent_id": agent_id},
            )
        return project

    async def _held(self, project: str | None, agent_id: str) -> tuple[list[Held], list[Held]]:
        """The project's live reservations, and the agent's ended ones (newest first); a
        reservation past its end but not yet swept counts as ended (expired)."""
        now = self.clock.now()
        where = (
            ReservationRow.project.is_(None)
            if project is None
            else ReservationRow.project == project
        )
        ended_where = (
            ReservationEndRow.project.is_(None)
            if project is None
            else ReservationEndRow.project == project
        )
        async with self._db.session() as session:
            rows = list(
                await session.scalars(
                    select(ReservationRow)
                    .where(where)
                    .order_by(ReservationRow.created_at, ReservationRow.id)
                )
            )
            ends = list(
                await session.scalars(
                    select(ReservationEndRow)
                    .where(ReservationEndRow.agent_id == agent_id, ended_where)
                    .order_by(ReservationEndRow.ended_at.desc(), ReservationEndRow.id.desc())
                )
            )
        live = [Held.live(r) for r in rows if r.expires_at > now]
        expired = [Held.expired(r) for r in rows if r.expires_at <= now and r.agent_id == agent_id]
        return live, expired + [Held.ended(e) for e in ends]

    async def _record_refusal(
        self, agent_id: str, project: str | None, source: str | None, refused: list[Any]
    ) -> None:
        """Put the refusal on the log (a reservation_refused event); the check's answer does
        not wait on the network's health: a failure is logged."""
        payload = check_rules.refusal_payload(agent_id, project, source, refused)
        try:
            await self._log.emit(
                check_rules.REFUSED,
                projection.KIND,
                agent_id,
                payload,
                project=project or NO_PROJECT,
            )
        except BzzzError as exc:
            logger.warning("could not record the refusal of %s: %s", agent_id, exc.message)

    # --- upkeep -------------------------------------------------------------------------------

    async def sweep(self) -> bool:
        """Publish a sweep when this node holds expired reservations, and a notice for those
        about to end; whether it published anything."""
        now = self.clock.now()
        async with self._db.session() as session:
            expired = await session.scalar(select(exists().where(ReservationRow.expires_at <= now)))
        if expired:
            # Network-wide: each node sweeps the reservations of the projects it holds.
            await self._log.emit(projection.SWEPT, projection.SWEEP_KIND, "sweep", {})
        return await self.notice() or bool(expired)

    async def notice(self) -> bool:
        """Publish ``reservation.expiring`` for live reservations ending within the notice
        (not yet noticed), one envelope a project; whether it published any."""
        if self.notice_seconds <= 0:
            return False
        now = self.clock.now()
        query = (
            select(ReservationRow.id, ReservationRow.project, ReservationRow.expires_at)
            .where(
                ReservationRow.noticed_at.is_(None),
                ReservationRow.expires_at > now,
                ReservationRow.expires_at <= now + timedelta(seconds=self.notice_seconds),
            )
            .order_by(ReservationRow.expires_at, ReservationRow.id)
        )
        async with self._db.session() as session:
            rows = (await session.execute(query)).all()
        by_project: dict[str | None, list[dict[str, str]]] = defaultdict(list)
        for reservation_id, project, expires_at in rows:
            by_project[project].append(
                {"id": reservation_id, "expires_at": str(domain.iso(expires_at))}
            )
        for project, named in by_project.items():
            for start in range(0, len(named), projection.NOTICE_BATCH):
                batch = named[start : start + projection.NOTICE_BATCH]
                await self._log.emit(
                    projection.EXPIRING,
                    projection.KIND,
                    "expiring",
                    {"reservations": batch},
                    project=project or NO_PROJECT,
                )
        return bool(by_project)

    async def run_sweeps(self) -> None:
        """Sweep expired reservations and notice ending ones until cancelled (a node's task)."""
        every = self.sweep_seconds
        if self.notice_seconds > 0:
            every = min(every, max(1.0, self.notice_seconds / 2))  # noticed in its window
        while True:
            await asyncio.sleep(every)
            try:
                await self.sweep()
            except BzzzError as exc:
                logger.warning("could not sweep expired reservations: %s", exc.message)


def _single_project(who: Principal) -> str | None:
    """The one project a credential is granted (None: several, or every one)."""
    if who.all_projects or len(who.projects) != 1:
        return None
    return next(iter(who.projects))


def _decide_all(
    agent_id: str, paths: list[str], live: list[Held], ended: list[Held]
) -> list[dict[str, Any]]:
    return [check_rules.decide(agent_id, path, live, ended) for path in paths]


def _refusal(outcome: dict[str, Any], agent: domain.Agent) -> BzzzError:
    """The error a refused ``reservation.requested`` outcome stands for."""
    reason = outcome.get("reason")
    if reason == "conflict":
        holder = outcome["holder"]
        return ReservationConflict(
            f"'{outcome['requested']}' overlaps '{outcome['overlaps']}', reserved "
            f"{holder['mode']} by agent '{holder['agent_id']}' until {holder['expires_at']} "
            f"(its paths: {', '.join(holder['paths'])})",
            details={
                "holder": holder,
                "requested": outcome["requested"],
                "overlaps": outcome["overlaps"],
            },
        )
    if reason in ("per_agent", "per_project"):
        held = (
            f"agent '{agent.id}' already holds {outcome['limit']} live reservations"
            if reason == "per_agent"
            else f"this project's live reservations would pass {outcome['limit']} patterns"
        )
        return RateLimited(
            f"{held}; release some first",
            details={"limit": outcome["limit"], "retry_after": 60},
        )
    return InvalidParameters(
        f"agent '{agent.id}' went offline before its reservation was recorded; announce it again",
        details={"agent_id": agent.id, "reason": str(reason)},
    )
