"""From consensus to context: the design's SLURP event, published on the network and submitted.

The projector records a consensus (it decides, in log order, when every active participant has
agreed) and the node whose envelope completed it (``consensus_origin``). That node alone builds
the SLURP context event, publishes it (``slurp.generated``; the projector refuses it from any
other node) and submits it to the configured SLURP endpoint with retries; without an endpoint
the event is kept, listable with ``bzzz slurp``. The submission state is this node's own
(``slurp_submissions``, never in the log): other nodes list the event as ``remote``, and a node
that rebuilds its store from the log does not submit anything again.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta
from typing import Any

import httpx
from ulid import ULID

from bzzz import domain
from bzzz.agents.service import thread_project
from bzzz.backoff import backoff
from bzzz.clock import Clock
from bzzz.config import SlurpSettings
from bzzz.conversations.hooks import InsightExtractor
from bzzz.domain import iso
from bzzz.eventlog import EventLog
from bzzz.projects import NO_PROJECT
from bzzz.store.database import Database
from bzzz.store.directory import AgentDirectory
from bzzz.store.repository import Repository

logger = logging.getLogger(__name__)


def _participants(thread: domain.Thread, directory: AgentDirectory) -> list[dict[str, str]]:
    roles = []
    for agent_id in thread.active_participants:
        agent = directory.get(agent_id)
        roles.append({"agent_id": agent_id, "role": agent.role if agent else "unknown"})
    return roles


def build_slurp_event(
    thread: domain.Thread,
    message_count: int,
    insights: list[str],
    participants: list[dict[str, str]],
    *,
    network: str,
    node_id: str,
    now: str | None,
) -> dict[str, Any]:
    """The design's ContextEvent for a thread that reached consensus."""
    consensus = thread.consensus or {}
    minutes = (thread.last_activity - thread.created_at).total_seconds() / 60
    return {
        "id": f"slurp-{ULID()}",
        "type": "agent_consensus",
        "source": "bzzz_mcp_integration",
        "timestamp": now,
        "context": {
            "conversation_id": thread.id,
            "participants": participants,
            "topic": thread.topic,
            "insights": insights,
            "decision_points": list(consensus.get("decisions", [])),
            "confidence": consensus.get("confidence"),
        },
        "metadata": {
            "thread_duration": round(minutes, 2),
            "message_count": message_count,
            "agent_count": len(participants),
            "consensus_type": consensus.get("type"),
            "network": network,
            "node_id": node_id,
        },
    }


class ConsensusService:
    """Generates SLURP context events from consensus and submits this node's to SLURP."""

    def __init__(
        self,
        db: Database,
        log: EventLog,
        directory: AgentDirectory,
        clock: Clock,
        settings: SlurpSettings,
        insights: InsightExtractor,
        wakeup: asyncio.Event | None = None,
    ) -> None:
        self._db = db
        self._log = log
        self._directory = directory
        self._clock = clock
        self._settings = settings
        # Replaceable: a hosted model can draw the insights instead (see hooks.py).
        self.insights = insights
        self._lock = asyncio.Lock()
        self.wakeup = wakeup or asyncio.Event()

    async def on_thread_message(self, thread_id: str, outcome: dict[str, Any]) -> None:
        """After a message that completed a consensus, generate the thread's SLURP event."""
        if outcome.get("consensus"):
            await self.generate(thread_id)

    async def generate(self, thread_id: str) -> dict[str, Any] | None:
        """Build and publish the SLURP event of a thread's consensus that this node completed
        (None: no consensus, another node's, or the log refused it)."""
        async with self._db.session() as session:
            repo = Repository(session)
            thread = await repo.thread(thread_id)
            owner = await repo.consensus_origin(thread_id)
            messages = await repo.thread_messages(thread_id) if thread else []
        if thread is None or not thread.consensus:
            return None
        if owner is not None and owner != self._log.node_id:
            return None
        event = build_slurp_event(
            thread,
            len(messages),
            await self.insights.insights(thread, messages),
            _participants(thread, self._directory),
            network=self._log.network,
            node_id=self._log.node_id,
            now=iso(self._clock.now()),
        )
        # Owed before it is published: a stop right after the publish cannot lose the submission.
        async with self._db.session() as session:
            await Repository(session).owe_slurp_submission(event["id"], self._clock.now())
        outcome = await self._log.emit(
            "slurp.generated",
            "slurp",
            thread_id,
            {"event_id": event["id"], "thread_id": thread_id, "event": event},
            project=thread_project(thread) or NO_PROJECT,
        )
        if not outcome["ok"]:
            async with self._db.session() as session:
                await Repository(session).forget_slurp_submission(event["id"])
            return None
        self.wakeup.set()
        await self._resolve_parent(thread)
        return event

    async def generate_missing(self) -> int:
        """Generate the SLURP events this node's consensus still owes (it stopped in between)."""
        async with self._db.session() as session:
            owed = await Repository(session).consensus_without_slurp(self._log.node_id)
        generated = 0
        for thread_id in owed:
            if await self.generate(thread_id) is not None:
                generated += 1
        return generated

    async def _resolve_parent(self, thread: domain.Thread) -> None:
        """A decision thread's consensus resolves the escalation that opened it."""
        parent = thread.metadata.get("parent_thread_id")
        if thread.metadata.get("kind") != "decision" or not isinstance(parent, str):
            return
        decisions = "; ".join((thread.consensus or {}).get("decisions", []))
        outcome = await self._log.emit(
            "thread.status",
            "thread",
            parent,
            {
                "thread_id": parent,
                "agent_id": thread.id[:128],
                "action": "resolve",
                "reason": f"decided in {thread.id}: {decisions}"[:4000],
            },
            # A decision thread is its parent's project's.
            project=thread_project(thread) or NO_PROJECT,
        )
        if not outcome["ok"]:
            logger.info("parent thread %s not resolved: %s", parent, outcome.get("reason"))

    async def events(self, status: str | None = None, limit: int = 100) -> list[domain.SlurpEvent]:
        """SLURP events on this node, newest first, with this node's submission state."""
        async with self._db.session() as session:
            return await Repository(session).slurp_events(self._log.node_id, status, limit)

    async def submit_due(self) -> int:
        """Submit this node's due SLURP events once each; returns how many were attempted."""
        async with self._lock:
            now = self._clock.now()
            async with self._db.session() as session:
                due = await Repository(session).due_slurp_events(self._log.node_id, now)
            if not due:
                return 0
            if not self._settings.url:
                for event in due:
                    await self._record(event, "stored", None)
                return len(due)
            async with httpx.AsyncClient(timeout=self._settings.timeout) as client:
                for event in due:
                    await self._submit(client, event)
            return len(due)

    async def _submit(self, client: httpx.AsyncClient, event: domain.SlurpEvent) -> None:
        assert self._settings.url is not None
        headers = {"Content-Type": "application/json", "User-Agent": "bzzz-slurp/1"}
        if self._settings.token is not None:
            headers["Authorization"] = f"Bearer {self._settings.token.get_secret_value()}"
        error: str | None = None
        try:
            response = await client.post(self._settings.url, json=event.event, headers=headers)
            if not 200 <= response.status_code < 300:
                error = f"HTTP {response.status_code}"
        except httpx.HTTPError as exc:
            error = f"{type(exc).__name__}: {exc}"[:500]
        await self._record(event, "submitted" if error is None else "failed", error)

    async def _record(self, event: domain.SlurpEvent, status: str, error: str | None) -> None:
        now = self._clock.now()
        delay = backoff(event.attempts, self._settings.initial_backoff, self._settings.max_backoff)
        if error is not None:
            logger.info(
                "SLURP event %s not submitted (%s); retrying in %.0fs", event.id, error, delay
            )
        async with self._db.session() as session:
            await Repository(session).record_slurp_attempt(
                event.id,
                status=status,
                next_attempt_at=now + timedelta(seconds=delay),
                error=error,
                submitted_at=now if status == "submitted" else None,
            )
