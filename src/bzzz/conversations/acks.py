"""Answering a page: acknowledge (paging stops) or resolve an escalation, as a person.

From the console and the CLI the caller's credential decides: it must be a person (the role
``human``, or an admin of the project), hold the ``write`` scope and read the escalation's
thread (``AgentService.may_read_thread``: the project's people once it asks a human, its team,
its admins); an escalation of a thread it cannot read does not exist for it. The name recorded
is the caller's, or ``as_name`` for an admin of the project (who answers for someone on the
phone). From a signed link, the link decides: its signature names
the escalation, the action, the step and the person it was sent to.

A resolution acknowledges first (so who answered is recorded once), then resolves the thread's
open escalations as ``human-<name>``. Every answer is an envelope on the thread's subject and an
action on the audit trail; a refusal changes nothing.
"""

from __future__ import annotations

import re
import time
from typing import Any

from bzzz import domain
from bzzz.agents.service import (
    AgentService,
    raise_store_failure,
    thread_project,
    thread_project_in,
)
from bzzz.audit.records import Action, digest, stamp
from bzzz.clock import Clock
from bzzz.conversations.pagelinks import LinkSigner
from bzzz.conversations.paging import Recorder, asks_humans
from bzzz.conversations.paging_projection import VIAS, ack_json
from bzzz.errors import InvalidParameters, PermissionDenied, ThreadNotFound
from bzzz.eventlog import Caller, EventLog
from bzzz.principal import Scope
from bzzz.store.database import Database
from bzzz.store.paging_repository import PagingRepository
from bzzz.store.repository import Repository

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 ._@-]{0,127}$")
_NOT_ID = re.compile(r"[^a-z0-9_-]+")
REASON_LIMIT = 2000


def person_agent(name: str) -> str:
    """The agent id a resolution is recorded under: ``human-<name>``."""
    slug = _NOT_ID.sub("-", name.lower()).strip("-_")
    return f"{domain.HUMAN_AGENT_PREFIX}{slug[:100] or 'person'}"


class EscalationAnswers:
    """Acknowledge and resolve escalations, for callers and for signed links."""

    def __init__(
        self,
        db: Database,
        log: EventLog,
        agents: AgentService,
        links: LinkSigner,
        clock: Clock,
        audit: Recorder | None = None,
    ) -> None:
        self._db = db
        self._log = log
        self._agents = agents
        self._links = links
        self._clock = clock
        self._audit = audit

    # --- callers (console, CLI, API) ---------------------------------------------------------

    async def ack(
        self, caller: Caller, escalation_id: str, *, as_name: str | None = None, via: str = "api"
    ) -> dict[str, Any]:
        """Acknowledge an escalation as the caller (or ``as_name``): its paging stops."""
        caller.principal.require(Scope.WRITE, "acknowledging an escalation")
        escalation, project = await self._readable(caller, escalation_id)
        _require_person(caller, project, "acknowledging")
        by = self._name(caller, project, as_name)
        ack = await self._ack(escalation, by, _via(via), caller.principal.id, None)
        return {"success": True, "escalation_id": escalation.id, "ack": ack}

    async def resolve(
        self,
        caller: Caller,
        escalation_id: str,
        reason: str,
        *,
        as_name: str | None = None,
        via: str = "api",
    ) -> dict[str, Any]:
        """Resolve an escalation as the caller (or ``as_name``), acknowledging it first."""
        caller.principal.require(Scope.WRITE, "resolving an escalation")
        escalation, project = await self._readable(caller, escalation_id)
        _require_person(caller, project, "resolving")
        by = self._name(caller, project, as_name)
        return await self._resolve(escalation, by, _reason(reason), _via(via),
                                   caller.principal.id, None)  # fmt: skip

    async def _readable(
        self, caller: Caller, escalation_id: str
    ) -> tuple[domain.Escalation, str | None]:
        async with self._db.session() as session:
            repo = Repository(session)
            escalation = await repo.escalation(escalation_id[:64])
            thread = await repo.thread(escalation.thread_id) if escalation else None
        if (
            escalation is None
            or thread is None
            or not caller.principal.may_see_project(thread_project(thread))
            or not self._agents.may_read_thread(caller, thread)
        ):
            # An escalation belongs to a thread: one the caller cannot read does not exist.
            raise ThreadNotFound(
                f"no escalation '{escalation_id[:64]}'",
                details={"escalation_id": escalation_id[:64]},
            )
        return escalation, thread_project(thread)

    @staticmethod
    def _name(caller: Caller, project: str | None, as_name: str | None) -> str:
        who = caller.principal
        own = (who.name or who.id)[:128]
        if as_name is None or as_name == own:
            return own
        if not NAME.match(as_name):
            raise InvalidParameters(
                "--as must be a name: letters, digits, space . _ @ - (at most 128)",
                details={"field": "as"},
            )
        if not who.is_admin_of(project):
            raise PermissionDenied(
                "answering for someone else (--as) is for admins of the escalation's project",
                details={"missing": "scope:admin", "principal": own},
            )
        return as_name

    # --- signed links --------------------------------------------------------------------------

    async def by_link(
        self, escalation_id: str, action: str, query: dict[str, str], reason: str | None = None
    ) -> dict[str, Any]:
        """Acknowledge or resolve from a signed link (refused, changing nothing, when bad)."""
        claims = self._links.verify(escalation_id[:64], action, query, time.time())
        async with self._db.session() as session:
            escalation = await Repository(session).escalation(claims.escalation_id)
        if escalation is None:
            raise ThreadNotFound(
                f"no escalation '{claims.escalation_id}'",
                details={"escalation_id": claims.escalation_id},
            )
        principal = f"link:{claims.by}"
        if action == "ack":
            ack = await self._ack(escalation, claims.by, "link", principal, claims.step)
            return {"success": True, "escalation_id": escalation.id, "ack": ack}
        text = _reason(reason or f"resolved by {claims.by} from a signed link")
        return await self._resolve(escalation, claims.by, text, "link", principal, claims.step)

    # --- both ----------------------------------------------------------------------------------

    async def _ack(
        self,
        escalation: domain.Escalation,
        by: str,
        via: str,
        principal: str,
        step: int | None,
    ) -> dict[str, Any]:
        await self._refuse_answered(escalation)
        payload = {
            "escalation_id": escalation.id,
            "by": by,
            "via": via,
            "principal": principal[:256],
            "step": step,
        }
        outcome = await self._emit("escalation.acked", escalation.thread_id, payload)
        self._record("escalation.ack", principal, escalation.thread_id, payload)
        ack: dict[str, Any] = outcome["ack"]
        return ack

    async def _resolve(
        self,
        escalation: domain.Escalation,
        by: str,
        reason: str,
        via: str,
        principal: str,
        step: int | None,
    ) -> dict[str, Any]:
        if escalation.resolved:
            raise InvalidParameters(
                f"escalation '{escalation.id}' is resolved already",
                details={"escalation_id": escalation.id, "field": "escalation_id"},
            )
        async with self._db.session() as session:
            acked = await PagingRepository(session).acks([escalation.id])
        if escalation.id not in acked:
            await self._ack(escalation, by, via, principal, step)
        payload = {
            "thread_id": escalation.thread_id,
            "agent_id": person_agent(by),
            "action": "resolve",
            "reason": reason,
        }
        outcome = await self._emit("thread.status", escalation.thread_id, payload)
        self._record("escalation.resolve", principal, escalation.thread_id, payload)
        return {
            "success": True,
            "escalation_id": escalation.id,
            "resolved_by": by,
            "thread": {"thread_id": escalation.thread_id, "status": outcome.get("status")},
        }

    async def _refuse_answered(self, escalation: domain.Escalation) -> None:
        async with self._db.session() as session:
            acked = await PagingRepository(session).acks([escalation.id])
        if escalation.id in acked:
            shown = ack_json(acked[escalation.id])
            raise InvalidParameters(
                f"escalation '{escalation.id}' was acknowledged by {shown['by']} at {shown['at']}",
                details={"escalation_id": escalation.id, "field": "escalation_id", "ack": shown},
            )
        if escalation.resolved:
            raise InvalidParameters(
                f"escalation '{escalation.id}' is resolved already",
                details={"escalation_id": escalation.id, "field": "escalation_id"},
            )
        if not asks_humans(escalation):
            raise InvalidParameters(
                f"escalation '{escalation.id}' is not addressed to humans",
                details={"escalation_id": escalation.id, "field": "escalation_id"},
            )

    async def _emit(self, type_: str, thread_id: str, payload: dict[str, Any]) -> dict[str, Any]:
        outcome = await self._log.emit(
            type_,
            "thread",
            thread_id,
            payload,
            project=await thread_project_in(self._db, thread_id),
        )
        raise_store_failure(outcome)
        if not outcome.get("ok"):
            raise InvalidParameters(
                f"refused: {outcome.get('reason')}", details={"reason": outcome.get("reason")}
            )
        return outcome

    def _record(self, action: str, principal: str, target: str, params: dict[str, Any]) -> None:
        if self._audit is None:
            return
        self._audit.record(
            Action(
                at=stamp(self._clock.now()),
                principal=principal[:256],
                session="escalations",
                action=action,
                outcome="ok",
                digest=digest(params),
                target=target[:512],
            )
        )


def _require_person(caller: Caller, project: str | None, doing: str) -> None:
    """A page is answered by a person: a principal of the role ``human``, or an admin of the
    escalation's project. An agent's credential, even with ``write``, would stop the paging of
    the very people the escalation asks for."""
    who = caller.principal
    if who.is_human or who.is_admin_of(project):
        return
    raise PermissionDenied(
        f"{doing} a page is for people: a token of the role 'human' or an admin of the "
        "project (bzzz token create NAME --role human --project P)",
        details={"missing": "role:human", "principal": (who.name or who.id)[:128]},
    )


def _via(via: str) -> str:
    if via not in VIAS:
        raise InvalidParameters(f"via must be one of {', '.join(VIAS)}", details={"field": "via"})
    return via


def _reason(reason: str) -> str:
    text = reason.strip()
    if not text or len(text) > REASON_LIMIT:
        raise InvalidParameters(
            f"reason must be 1 to {REASON_LIMIT} characters", details={"field": "reason"}
        )
    return text
