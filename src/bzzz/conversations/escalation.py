"""The escalation engine: rules over thread facts, fired through the log, actions retried.

A rule fires when all its conditions hold, once per thread until the thread's escalations are
resolved (the projector refuses a second open escalation of the same rule, so two nodes racing
to fire it are decided in log order). Rules are checked after every thread message and by the
monitor's periodic sweep; time comes from an injectable clock.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from ulid import ULID

from bzzz import domain
from bzzz.agents.service import thread_project_in
from bzzz.backoff import backoff
from bzzz.clock import Clock
from bzzz.config import EscalationConditionConfig, EscalationRuleConfig, EscalationSettings
from bzzz.conversations.actions import HUMAN_INSTEAD, EscalationActions
from bzzz.domain import iso
from bzzz.errors import BzzzError, ErrorCode
from bzzz.eventlog import EventLog
from bzzz.store.database import Database
from bzzz.store.repository import Repository

logger = logging.getLogger(__name__)

MONITOR_AGENT = "bzzz-monitor"


@dataclass(frozen=True, slots=True)
class Firing:
    """A rule whose conditions all hold for a thread, and why."""

    rule: EscalationRuleConfig
    reason: str


# --- conditions (pure) -------------------------------------------------------------------------


def _window_start(facts: domain.ThreadFacts, timeframe: float, now: datetime) -> datetime:
    if not timeframe:
        return facts.epoch_at
    return max(facts.epoch_at, now - timedelta(seconds=timeframe))


def _thread_duration(c: EscalationConditionConfig, f: domain.ThreadFacts, now: datetime) -> str:
    age = (now - f.created_at).total_seconds()
    return f"open for {age / 60:.0f} min" if age >= float(c.threshold) else ""


def _no_progress(c: EscalationConditionConfig, f: domain.ThreadFacts, now: datetime) -> str:
    if c.timeframe:
        stalled = (now - f.last_progress_at).total_seconds() >= c.timeframe
    else:
        stalled = f.last_progress_at <= f.epoch_at
    if stalled != bool(c.threshold):
        return ""
    idle = (now - f.last_progress_at).total_seconds() / 60
    return f"no progress for {idle:.0f} min" if stalled else "progress made"


def _disagreement_count(c: EscalationConditionConfig, f: domain.ThreadFacts, now: datetime) -> str:
    start = _window_start(f, c.timeframe, now)
    count = sum(1 for at in f.disagreements if at >= start)
    return f"{count} disagreements" if count >= float(c.threshold) else ""


def _error_rate(c: EscalationConditionConfig, f: domain.ThreadFacts, now: datetime) -> str:
    start = _window_start(f, c.timeframe, now)
    outcomes = [failed for at, failed in f.tasks if at >= start]
    failed = sum(outcomes)
    if not failed or failed / len(outcomes) < float(c.threshold):
        return ""
    return f"{failed} of {len(outcomes)} tasks failed"


def _no_resolution(c: EscalationConditionConfig, f: domain.ThreadFacts, now: datetime) -> str:
    # Unresolved since the first disagreement after the last resolution (or since then).
    since = min((at for at in f.disagreements if at >= f.epoch_at), default=f.epoch_at)
    unresolved = (now - since).total_seconds() >= c.timeframe
    if unresolved != bool(c.threshold):
        return ""
    return f"unresolved for {(now - since).total_seconds() / 60:.0f} min" if unresolved else ""


CONDITIONS: dict[str, Callable[[EscalationConditionConfig, domain.ThreadFacts, datetime], str]] = {
    "thread_duration": _thread_duration,
    "no_progress": _no_progress,
    "disagreement_count": _disagreement_count,
    "error_rate": _error_rate,
    "no_resolution": _no_resolution,
}


def rule_reason(rule: EscalationRuleConfig, facts: domain.ThreadFacts, now: datetime) -> str:
    """Why every condition of ``rule`` holds ('' when one does not)."""
    reasons = []
    for condition in rule.conditions:
        reason = CONDITIONS[condition.type](condition, facts, now)
        if not reason:
            return ""
        reasons.append(reason)
    return "; ".join(reasons)


def evaluate(
    rules: list[EscalationRuleConfig], facts: domain.ThreadFacts, now: datetime
) -> list[Firing]:
    """The rules that fire for a thread, highest priority first (open ones never fire again)."""
    if facts.status not in ("active", "escalated"):
        return []
    firings = []
    for rule in rules:
        if rule.name in facts.open_rules:
            continue
        reason = rule_reason(rule, facts, now)
        if reason:
            firings.append(Firing(rule, reason))
    return firings


def _action_state(action: dict[str, Any]) -> dict[str, Any]:
    return action | {"status": "pending", "attempts": 0}


# --- the service -------------------------------------------------------------------------------


class EscalationService:
    """Fires rules through the log and carries out the actions of this node's escalations."""

    def __init__(
        self,
        db: Database,
        log: EventLog,
        clock: Clock,
        rules: list[EscalationRuleConfig],
        settings: EscalationSettings,
        actions: EscalationActions,
        wakeup: asyncio.Event | None = None,
    ) -> None:
        self._db = db
        self._log = log
        self._clock = clock
        self.rules = sorted(rules, key=lambda r: -r.priority)
        self._settings = settings
        self._actions = actions
        self._lock = asyncio.Lock()
        self.wakeup = wakeup or asyncio.Event()
        self.fired = 0
        self.actions_done = 0
        self.action_failures = 0

    async def on_thread_message(self, thread_id: str, outcome: dict[str, Any]) -> None:
        """Check the rules of a thread that just got a message."""
        if outcome.get("consensus"):
            return
        await self.check_thread(thread_id)

    def _needs(self) -> tuple[bool, bool]:
        """(disagreements, tasks): facts no rule looks at are not read."""
        kinds = {c.type for r in self.rules for c in r.conditions}
        return bool(kinds & {"disagreement_count", "no_resolution"}), "error_rate" in kinds

    async def check_thread(self, thread_id: str) -> list[str]:
        """Evaluate the rules for one thread; return the ids of escalations fired."""
        if not self.rules:
            return []
        async with self._db.session() as session:
            disagreements, tasks = self._needs()
            facts = await Repository(session).thread_facts(
                thread_id, disagreements=disagreements, tasks=tasks
            )
        return await self._fire_all(facts)

    async def check_all(self) -> list[str]:
        """Evaluate the rules for every active or escalated thread."""
        if not self.rules:
            return []
        async with self._db.session() as session:
            disagreements, tasks = self._needs()
            facts = await Repository(session).thread_facts(disagreements=disagreements, tasks=tasks)
        return await self._fire_all(facts)

    async def _fire_all(self, facts: list[domain.ThreadFacts]) -> list[str]:
        now = self._clock.now()
        fired = []
        for fact in facts:
            for firing in evaluate(self.rules, fact, now):
                escalation_id = await self._fire(fact.thread_id, firing, now)
                if escalation_id:
                    fired.append(escalation_id)
        if fired:
            self.wakeup.set()
        return fired

    async def _fire(self, thread_id: str, firing: Firing, now: datetime) -> str | None:
        escalation_id = f"esc-{ULID()}"
        actions = [
            _action_state(a.model_dump(exclude_defaults=True) | {"type": a.type})
            for a in firing.rule.actions
        ]
        payload = {
            "escalation_id": escalation_id,
            "thread_id": thread_id,
            "rule": firing.rule.name,
            "priority": firing.rule.priority,
            "reason": firing.reason,
            "actions": actions,
            "triggered_at": iso(now),
        }
        outcome = await self._log.emit(
            "thread.escalated",
            "thread",
            thread_id,
            payload,
            project=await thread_project_in(self._db, thread_id),
        )
        if not outcome["ok"]:
            logger.debug("rule %s not fired on %s: %s", firing.rule.name, thread_id, outcome)
            return None
        self.fired += 1
        logger.info(
            "thread %s escalated by rule %s: %s", thread_id, firing.rule.name, firing.reason
        )
        return escalation_id

    # --- actions -------------------------------------------------------------------------------

    async def run_actions(self) -> int:
        """Carry out every due action of this node's open escalations; returns how many ran."""
        async with self._lock:
            async with self._db.session() as session:
                open_ = await Repository(session).escalations(
                    open_only=True, origin=self._log.node_id, limit=10_000
                )
            now = self._clock.now()
            ran = 0
            for escalation in open_:
                for index, action in enumerate(escalation.actions):
                    if self._due(action, now):
                        await self._run_one(escalation, index, action)
                        ran += 1
            return ran

    @staticmethod
    def _due(action: dict[str, Any], now: datetime) -> bool:
        if action.get("status") == "pending":
            return True
        if action.get("status") != "failed":
            return False
        due = action.get("next_attempt_at")
        return due is None or datetime.fromisoformat(str(due).replace("Z", "+00:00")) <= now

    async def _run_one(
        self, escalation: domain.Escalation, index: int, action: dict[str, Any]
    ) -> None:
        attempts = int(action.get("attempts", 0)) + 1
        state: dict[str, Any] = {"attempts": attempts, "last_attempt_at": iso(self._clock.now())}
        try:
            result = await self._actions.perform(escalation, action)
            state |= {"status": "done", "result": result, "code": None, "error": None}
            if result.get("escalated_to") == "human" and action.get("type") != HUMAN_INSTEAD:
                # Recorded as what it became, so the thread asks a human (its project's
                # people read it, the human_notification event goes out).
                state |= {"type": HUMAN_INSTEAD, "requested": action.get("type")}
            self.actions_done += 1
        except BzzzError as exc:
            # Recorded on the escalation and retried with backoff: never silently dropped.
            self.action_failures += 1
            retry = self._clock.now() + timedelta(seconds=self._backoff(attempts))
            state |= {
                "status": "failed",
                "code": str(ErrorCode.ESCALATION_FAILED),
                "error": exc.message[:500],
                "next_attempt_at": iso(retry),
            }
            logger.warning(
                "escalation %s: action %s failed (attempt %d): %s",
                escalation.id,
                action.get("type"),
                attempts,
                exc.message,
            )
        await self._log.emit(
            "escalation.action",
            "thread",
            escalation.thread_id,
            {"escalation_id": escalation.id, "index": index, "state": state},
            project=await thread_project_in(self._db, escalation.thread_id),
        )

    def _backoff(self, attempts: int) -> float:
        return backoff(attempts - 1, self._settings.initial_backoff, self._settings.max_backoff)

    async def list(self, *, open_only: bool = False, limit: int = 100) -> list[domain.Escalation]:
        """Escalations of the network, newest first."""
        async with self._db.session() as session:
            return await Repository(session).escalations(open_only=open_only, limit=limit)
