"""A thread's status: pause, resume, resolve (its escalations), close, and closing idle threads.

    active ──pause──▶ paused ──resume──▶ active (escalated, if escalations are still open)
    active ──rule fires──▶ escalated ──resolve──▶ active
    any but completed ──close / consensus / idle timeout──▶ completed

An idle close carries the cutoff it was decided on: a message that lands first keeps the thread.

The service checks a transition to answer with a clear error; the projector checks it again
(in log order) so that a race between two nodes ends the same way everywhere.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from bzzz import domain
from bzzz.agents.service import raise_store_failure, thread_project, thread_project_in
from bzzz.clock import Clock
from bzzz.domain import iso
from bzzz.errors import InvalidParameters, ThreadNotFound
from bzzz.eventlog import EventLog
from bzzz.principal import Principal
from bzzz.store.database import Database
from bzzz.store.repository import Repository

logger = logging.getLogger(__name__)

IDLE_AGENT = "bzzz-monitor"


def refusal(action: str, thread: domain.Thread) -> str | None:
    """Why ``action`` cannot apply to the thread now (None: it can)."""
    status = thread.status
    if status == "completed":
        return f"thread '{thread.id}' is completed"
    if action == "pause" and status == "paused":
        return f"thread '{thread.id}' is already paused"
    if action == "resume" and status != "paused":
        return f"thread '{thread.id}' is not paused (it is {status})"
    if action == "resolve" and not any(not e.get("resolved") for e in thread.escalation_history):
        return f"thread '{thread.id}' has no open escalation to resolve"
    return None


class ThreadLifecycle:
    """Status changes of threads, through the log."""

    def __init__(self, db: Database, log: EventLog, clock: Clock, idle_timeout: float) -> None:
        self._db = db
        self._log = log
        self._clock = clock
        self._idle_timeout = idle_timeout

    async def change(
        self, thread_id: str, agent_id: str, action: str, reason: str | None, who: Principal
    ) -> domain.Thread:
        """Apply a status action for a participant; return the thread as it is afterwards.

        A thread outside ``who``'s projects is THREAD_NOT_FOUND, as one that does not exist.
        """
        thread = await self._thread(thread_id)
        if not who.may_see_project(thread_project(thread)):
            raise ThreadNotFound(f"no thread '{thread_id}'", details={"thread_id": thread_id})
        if agent_id not in thread.active_participants:
            raise InvalidParameters(
                f"agent '{agent_id}' is not a participant of thread '{thread_id}'",
                details={"thread_id": thread_id},
            )
        why = refusal(action, thread)
        if why:
            raise InvalidParameters(why, details={"thread_id": thread_id, "status": thread.status})
        await self._emit(thread_id, agent_id, action, reason)
        return await self._thread(thread_id)

    async def _emit(self, thread_id: str, agent_id: str, action: str, reason: str | None) -> None:
        outcome = await self._log.emit(
            "thread.status",
            "thread",
            thread_id,
            {"thread_id": thread_id, "agent_id": agent_id, "action": action, "reason": reason},
            project=await thread_project_in(self._db, thread_id),
        )
        raise_store_failure(outcome)
        if not outcome["ok"]:
            raise InvalidParameters(
                f"refused: {outcome['reason']}", details={"reason": outcome["reason"]}
            )

    async def _thread(self, thread_id: str) -> domain.Thread:
        async with self._db.session() as session:
            thread = await Repository(session).thread(thread_id)
        if thread is None:
            raise ThreadNotFound(f"no thread '{thread_id}'", details={"thread_id": thread_id})
        return thread

    async def close_idle(self) -> list[str]:
        """Close active and paused threads idle for the default timeout; return their ids."""
        cutoff = self._clock.now() - timedelta(seconds=self._idle_timeout)
        async with self._db.session() as session:
            idle = await Repository(session).idle_threads(cutoff)
        closed = []
        for thread_id in idle:
            reason = f"idle for {self._idle_timeout:.0f} s (conversation.defaultTimeout)"
            outcome = await self._log.emit(
                "thread.status",
                "thread",
                thread_id,
                {
                    "thread_id": thread_id,
                    "agent_id": IDLE_AGENT,
                    "action": "close",
                    "reason": reason,
                    # The projector refuses the close if the thread was active after this.
                    "idle_before": iso(cutoff),
                },
                project=await thread_project_in(self._db, thread_id),
            )
            if outcome["ok"]:
                closed.append(thread_id)
        if closed:
            logger.info("closed %d idle threads", len(closed))
        return closed
