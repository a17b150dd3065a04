"""Paging people until one answers: an escalation addressed to humans walks its project's rota.

``escalation.rota.<project>`` lists steps: a person's signed webhook or the console. An open,
unacknowledged escalation of that project with a ``notify_human`` action is paged to step 0;
unacknowledged ``escalation.ack_timeout`` seconds after a step was paged, to the next; after
the last step, to the project's admins (the console, and ``escalation.human_channel_url`` when
one is set). Then paging stops; an acknowledgement or a resolution stops it at once.

Each step is an ``escalation.paged`` envelope on the thread's subject: on the thread's history,
applied by every node, and decided in log order — the projector refuses a second page of a
step, so no step is paged twice, whichever nodes race or restart. The schedule is read from the
store each round, so a restarted node resumes where the log says it stands. The escalation's
origin node pages on time; any other node pages a step only once it is overdue by one more
``ack_timeout`` (the origin is gone). Only the node that paged a step delivers it: a signed POST
(``X-Bzzz-Signature``, as subscriptions' webhooks), retried with backoff
(``escalation.initial_backoff`` .. ``max_backoff``) up to ``MAX_ATTEMPTS``; each attempt's
result is an ``escalation.page_state`` envelope, so a restart resumes the retries.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

import httpx

from bzzz import domain
from bzzz.agents.service import thread_project, thread_project_in
from bzzz.audit.records import Action, digest, stamp
from bzzz.backoff import backoff
from bzzz.clock import Clock
from bzzz.config import EscalationSettings
from bzzz.config.conversations import RotaConfig
from bzzz.conversations.pagelinks import LinkClaims, LinkSigner
from bzzz.conversations.paging_projection import PAGING_APPLIERS, ack_json, page_json
from bzzz.domain import iso
from bzzz.eventlog import EventLog
from bzzz.events.webhooks import SIGNATURE_HEADER, sign_body
from bzzz.store.batch import register_appliers
from bzzz.store.database import Database
from bzzz.store.models import EscalationPageRow
from bzzz.store.paging_repository import PagingRepository
from bzzz.store.repository import Repository

logger = logging.getLogger(__name__)

MAX_ATTEMPTS = 10
DUE_BATCH = 64


class Recorder(Protocol):
    """Where actions go on the audit trail (``AuditTrail``)."""

    def record(self, action: Action) -> None:
        """Append one action."""
        ...


def asks_humans(escalation: domain.Escalation) -> bool:
    """Whether an escalation is addressed to humans (a notify_human action)."""
    return any(a.get("type") == "notify_human" for a in escalation.actions)


@dataclass(frozen=True, slots=True)
class Target:
    """Where one page goes: a step's name, its channel, and its webhook (None: the console)."""

    name: str
    channel: str
    url: str | None = None
    secret: str | None = None


def target_of(rota: RotaConfig, step: int, project: str, settings: EscalationSettings) -> Target:
    """Step ``step`` of a rota; one past its last is the project's admins."""
    if step < len(rota.steps):
        s = rota.steps[step]
        if s.console:
            return Target(s.name, "console")
        secret = s.secret.get_secret_value() if s.secret is not None else None
        return Target(s.name, "webhook", s.webhook_url, secret)
    url, key = settings.human_channel_url, settings.human_channel_secret
    if url and key is not None:
        return Target(f"admins of {project}", "admins", url, key.get_secret_value())
    return Target(f"admins of {project}", "admins")


class Pager:
    """Pages the steps of open escalations when due, and delivers this node's pages."""

    def __init__(
        self,
        db: Database,
        log: EventLog,
        clock: Clock,
        settings: EscalationSettings,
        links: LinkSigner,
        base_url: Callable[[], str],
        audit: Recorder | None = None,
    ) -> None:
        register_appliers(PAGING_APPLIERS)
        self._db = db
        self._log = log
        self._clock = clock
        self._settings = settings
        self._links = links
        self._base_url = base_url
        self._audit = audit
        self._started = False
        self.paged = 0
        self.delivered = 0
        self.failed_attempts = 0

    @property
    def enabled(self) -> bool:
        """Whether any project has a rota."""
        return bool(self._settings.rota)

    async def run_due(self) -> datetime | None:
        """Page every step that is due, deliver due pages; return when the next is due."""
        if not self.enabled:
            return None
        if not self._started:
            await self._unconfirmed()
            self._started = True
        upcoming = await self._page_due()
        retry = await self._deliver_due()
        times = [t for t in (upcoming, retry) if t is not None]
        return min(times) if times else None

    # --- the schedule ----------------------------------------------------------------------------

    async def _page_due(self) -> datetime | None:
        now = self._clock.now()
        async with self._db.session() as session:
            repo = Repository(session)
            open_ = [
                e for e in await repo.escalations(open_only=True, limit=10_000) if asks_humans(e)
            ]
            ids = [e.id for e in open_]
            paging = PagingRepository(session)
            pages, acks = await paging.pages(ids), await paging.acks(ids)
            projects = await paging.thread_projects(list({e.thread_id for e in open_}))
        upcoming: datetime | None = None
        for escalation in open_:
            project = projects.get(escalation.thread_id)
            rota = self._settings.rota.get(project or "")
            if rota is None or project is None or escalation.id in acks:
                continue
            due = self._next(escalation, rota, pages[escalation.id])
            if due is None:
                continue
            step, at = due
            if at <= now:
                await self._page(escalation, rota, project, step)
            elif upcoming is None or at < upcoming:
                upcoming = at
        return upcoming

    def _next(
        self, escalation: domain.Escalation, rota: RotaConfig, pages: list[EscalationPageRow]
    ) -> tuple[int, datetime] | None:
        """The next step to page and when (None: the admins were paged, nothing is left)."""
        timeout = timedelta(seconds=self._settings.ack_timeout)
        if not pages:
            step, at = 0, escalation.triggered_at
        else:
            last = pages[-1]
            if last.step >= len(rota.steps):
                return None
            step, at = last.step + 1, last.paged_at + timeout
        if escalation.origin != self._log.node_id:
            at += timeout  # the origin pages on time; this node only when it is silent
        return step, at

    async def _page(
        self, escalation: domain.Escalation, rota: RotaConfig, project: str, step: int
    ) -> None:
        target = target_of(rota, step, project, self._settings)
        payload = {
            "escalation_id": escalation.id,
            "step": step,
            "name": target.name,
            "channel": target.channel,
            "status": "pending" if target.url else "delivered",
        }
        outcome = await self._log.emit(
            "escalation.paged", "thread", escalation.thread_id, payload, project=project
        )
        if not outcome.get("ok"):
            logger.debug("step %d of %s not paged: %s", step, escalation.id, outcome)
            return
        self.paged += 1
        logger.info("escalation %s: paged step %d (%s, %s)", escalation.id, step, target.name,
                    target.channel)  # fmt: skip
        self._record("escalation.paged", escalation.thread_id, payload)

    def _record(self, action: str, target: str, params: dict[str, Any]) -> None:
        if self._audit is None:
            return
        self._audit.record(
            Action(
                at=stamp(self._clock.now()),
                principal=f"node:{self._log.node_id}"[:256],
                session="paging",
                action=action,
                outcome="ok",
                digest=digest(params),
                target=target[:512],
            )
        )

    # --- deliveries ------------------------------------------------------------------------------

    async def _unconfirmed(self) -> None:
        """Pages this node was sending when it stopped: the receiver may have them."""
        async with self._db.session() as session:
            interrupted = await PagingRepository(session).sending(self._log.node_id)
        stopped = "the node stopped during the attempt"
        for page in interrupted:
            state = {"status": "unconfirmed", "attempts": page.attempts, "error": stopped}
            await self._emit_state(page, state)

    async def _deliver_due(self) -> datetime | None:
        now = self._clock.now()
        async with self._db.session() as session:
            paging = PagingRepository(session)
            due = await paging.due_pages(self._log.node_id, now, DUE_BATCH)
            ids = [p.escalation_id for p in due]
            acks = await paging.acks(ids)
            escalations = {i: await Repository(session).escalation(i) for i in set(ids)}
            threads = {
                e.id: await Repository(session).thread(e.thread_id)
                for e in escalations.values()
                if e is not None
            }
        if due:
            await self._deliver_all(due, escalations, threads, acks)
        async with self._db.session() as session:
            return await PagingRepository(session).next_attempt(self._log.node_id)

    async def _deliver_all(
        self,
        due: list[EscalationPageRow],
        escalations: dict[str, domain.Escalation | None],
        threads: dict[str, domain.Thread | None],
        acks: dict[str, Any],
    ) -> None:
        # A client (its TLS context: ~50 ms to build) only for a round that sends something.
        async with httpx.AsyncClient(timeout=self._settings.timeout) as client:
            for page in due:
                escalation = escalations.get(page.escalation_id)
                thread = threads.get(page.escalation_id)
                if escalation is None or thread is None:
                    continue
                if escalation.resolved or page.escalation_id in acks:
                    continue  # answered: nobody else needs to hear of it
                await self._deliver(client, page, escalation, thread)

    async def _deliver(
        self,
        client: httpx.AsyncClient,
        page: EscalationPageRow,
        escalation: domain.Escalation,
        thread: domain.Thread,
    ) -> None:
        project = thread_project(thread) or ""
        rota = self._settings.rota.get(project)
        target = target_of(rota, page.step, project, self._settings) if rota else None
        attempts = page.attempts + 1
        if target is None or target.url is None or target.secret is None:
            await self._record_attempt(page, MAX_ATTEMPTS, "the step is no longer configured")
            return
        # On the log before the POST: a node that dies during it never sends it again.
        if not await self._emit_state(page, {"status": "sending", "attempts": attempts}):
            return
        error = await self._post(client, target, self._body(page, escalation, thread, rota))
        await self._record_attempt(page, attempts, error)

    def _body(
        self,
        page: EscalationPageRow,
        escalation: domain.Escalation,
        thread: domain.Thread,
        rota: RotaConfig | None,
    ) -> bytes:
        links = self.links(escalation.id, page.step, page.name)
        body = {
            "type": "escalation_page",
            "escalation": escalation.to_json(),
            "thread": {"id": thread.id, "topic": thread.topic, "project": thread_project(thread)},
            "page": {
                "step": page.step,
                "name": page.name,
                "channel": page.channel,
                "of": len(rota.steps) if rota else None,
                "paged_at": iso(page.paged_at),
                "ack_timeout": self._settings.ack_timeout,
            },
            "links": links,
        }
        return json.dumps(body, separators=(",", ":")).encode()

    def links(self, escalation_id: str, step: int, name: str) -> dict[str, str]:
        """The signed ack and resolve links of a page, and when they expire."""
        expires = int(time.time() + self._settings.link_ttl)
        base = self._base_url()
        links = {
            action: self._links.url(base, LinkClaims(escalation_id, action, step, name, expires))
            for action in ("ack", "resolve")
        }
        return links | {"expires_at": datetime.fromtimestamp(expires, UTC).isoformat()}

    async def _post(self, client: httpx.AsyncClient, target: Target, body: bytes) -> str | None:
        assert target.url is not None and target.secret is not None
        headers = {
            "Content-Type": "application/json",
            SIGNATURE_HEADER: sign_body(target.secret, int(time.time()), body),
            "User-Agent": "bzzz-paging/1",
        }
        try:
            response = await client.post(target.url, content=body, headers=headers)
        except httpx.HTTPError as exc:
            return f"unreachable: {type(exc).__name__}"
        if not 200 <= response.status_code < 300:
            return f"HTTP {response.status_code}"
        return None

    async def _record_attempt(
        self, page: EscalationPageRow, attempts: int, error: str | None
    ) -> None:
        now = self._clock.now()
        state: dict[str, Any] = {"attempts": attempts, "error": error}
        if error is None:
            state |= {"status": "delivered", "next_attempt_at": None}
            self.delivered += 1
        elif attempts >= MAX_ATTEMPTS:
            state |= {"status": "dead", "next_attempt_at": None}
            logger.warning("escalation %s: step %d given up after %d attempts: %s",
                           page.escalation_id, page.step, attempts, error)  # fmt: skip
        else:
            self.failed_attempts += 1
            delay = backoff(
                attempts - 1,
                self._settings.initial_backoff,
                self._settings.max_backoff,
                jitter=True,
            )
            state |= {"status": "failed", "next_attempt_at": iso(now + timedelta(seconds=delay))}
            logger.info("escalation %s: step %d not delivered (%s); retry in %.1f s",
                        page.escalation_id, page.step, error, delay)  # fmt: skip
        await self._emit_state(page, state)

    async def _emit_state(self, page: EscalationPageRow, state: dict[str, Any]) -> bool:
        payload = {"escalation_id": page.escalation_id, "step": page.step} | state
        outcome = await self._log.emit(
            "escalation.page_state",
            "thread",
            page.thread_id,
            payload,
            project=await thread_project_in(self._db, page.thread_id),
        )
        return bool(outcome.get("ok"))

    # --- what the API and the dashboard show --------------------------------------------------

    async def attach(self, escalations: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Each escalation (its JSON) with ``paging``: pages by step and the acknowledgement."""
        ids = [str(e["id"]) for e in escalations]
        resolved = [str(e["threadId"]) for e in escalations if e.get("resolved")]
        async with self._db.session() as session:
            paging = PagingRepository(session)
            pages, acks = await paging.pages(ids), await paging.acks(ids)
            resolutions = await paging.resolvers(resolved)
        for e in escalations:
            ack = acks.get(str(e["id"]))
            e["paging"] = {
                "pages": [page_json(p) for p in pages.get(str(e["id"]), [])],
                "ack": ack_json(ack) if ack is not None else None,
                "resolved_by": _resolver(e, resolutions.get(str(e.get("threadId")), [])),
            }
        return escalations


def _resolver(escalation: dict[str, Any], resolutions: list[dict[str, str]]) -> str | None:
    """Who resolved an escalation: the thread's resolution recorded when it was resolved."""
    at = escalation.get("resolvedAt")
    if not escalation.get("resolved") or not at:
        return None
    for entry in resolutions:
        if entry["at"] == at:
            return entry["by"]
    return None
