"""A thread as it happened: its envelopes on the signed log, each read as what it did.

The transcript of a thread interleaves its messages with what happened to it: who created it,
joined and left it, paused, resumed, resolved or closed it (and why), the escalations its rules
raised (rule, priority, reason), what their actions did, the decisions proposed, the stances
taken on them and the consensus reached. The log holds all of it in order: ``ThreadTimeline``
reads the thread's envelopes back (the replay's reader, every one verified again), asks the
live store whether each one was applied or refused (the projector's record of it), and says
what each did. The history slider's stops are the same entries, so moving it walks through the
actions and the messages alike.

Access is the messages' own: whoever reads the thread reads its timeline
(``require_thread_reader``); reading the log costs what an ``as_of`` read costs, so it is
counted on the same limiter. No content beyond what the thread shows its readers is in an
entry (a message is named by its id; its text comes with the thread), and no webhook URL or
other setting of an action's channel.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from bzzz import domain
from bzzz.errors import InvalidParameters, ThreadNotFound
from bzzz.eventlog import Caller
from bzzz.network.envelope import Envelope
from bzzz.store.database import Database
from bzzz.store.repository import Repository
from bzzz.store.scratch import applied_outcomes

STATUS_KINDS = {"pause": "paused", "resume": "resumed", "resolve": "resolved", "close": "closed"}
# What an entry says of an action's outcome, and of a refusal, at most (characters).
TEXT_SHOWN = 500


class LogEntry(Protocol):
    """One envelope of the thread as the log holds it (``conversations.replay.Entry``)."""

    @property
    def seq(self) -> int:
        """Its log sequence."""
        ...

    @property
    def envelope_id(self) -> str | None:
        """Its id (None: unreadable)."""
        ...

    @property
    def envelope(self) -> Envelope | None:
        """The opened envelope when it verified."""
        ...

    def to_json(self) -> dict[str, Any]:
        """Sequence, time, type, origin, signer, whether it verifies, stand-in."""
        ...


class ThreadLogReader(Protocol):
    """Reads one thread's envelopes back from the log."""

    async def entries(self, thread_id: str) -> Sequence[LogEntry]:
        """The thread's envelopes in log order, each verified again."""
        ...


class ThreadReaders(Protocol):
    """Who reads a thread (the agents service)."""

    def require_thread_reader(self, caller: Caller, thread: domain.Thread) -> None:
        """THREAD_NOT_FOUND outside its project; PERMISSION_DENIED for a non-member."""
        ...


class ReadLimiter(Protocol):
    """The rate of a principal's reads of the log (``as_of`` reads share it)."""

    def take(self, principal: str) -> None:
        """Count one read by ``principal`` (RATE_LIMITED past its rate, nothing taken)."""
        ...


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _short(value: Any) -> str | None:
    return value[:TEXT_SHOWN] if isinstance(value, str) else None


class _Reader:
    """Walks a thread's envelopes in order, keeping what the next ones need to be told."""

    def __init__(self) -> None:
        self.open: list[str] = []  # escalations raised and not yet resolved
        self.actions: dict[str, list[dict[str, Any]]] = {}  # each escalation's actions

    def read(self, env: Envelope, outcome: dict[str, Any] | None) -> list[dict[str, Any]]:
        """What one applied envelope did (one item, two for a post that reached consensus)."""
        p = env.payload
        kind = env.type
        if kind == "message.posted":
            return self._post(p, outcome)
        if kind == "thread.created":
            meta = _object(p.get("metadata"))
            return [{"kind": "created", "by": p.get("creator"),
                     "agents": list(p.get("participants") or []),
                     "parent_thread_id": meta.get("parent_thread_id")}]  # fmt: skip
        if kind in ("thread.joined", "thread.left"):
            item = {"kind": "joined" if kind == "thread.joined" else "left",
                    "agent": p.get("agent_id")}  # fmt: skip
            if p.get("invited_by"):
                item["invited_by"] = p["invited_by"]
            return [item]
        if kind == "thread.status":
            return [self._status(p)]
        if kind == "thread.escalated":
            return [self._escalated(p)]
        if kind == "escalation.action":
            return [self._action(p)]
        if kind == "thread.summarized":
            return [{"kind": "summarized", "by": p.get("agent_id") or p.get("by")}]
        if kind == "slurp.generated":
            return [{"kind": "slurp"}]
        return [{"kind": "other"}]

    def _resolved(self) -> list[str]:
        ended, self.open = self.open, []
        return ended

    def _post(self, p: dict[str, Any], outcome: dict[str, Any] | None) -> list[dict[str, Any]]:
        kind = "message"
        if p.get("message_type") == "decision":
            kind = "decision"
        elif p.get("stance") in domain.STANCES:
            kind = "stance"
        item = {"kind": kind, "by": p.get("sender"), "message_id": p.get("message_id"),
                "message_type": p.get("message_type"), "reply_to": p.get("reply_to"),
                "stance": p.get("stance")}  # fmt: skip
        if not (outcome and isinstance(outcome.get("consensus"), dict)):
            return [item]
        consensus = outcome["consensus"]
        reached = {"kind": "consensus", "by": p.get("sender"),
                   "decision_message_id": consensus.get("decision_message_id"),
                   "agents": list(consensus.get("agreed_by") or []),
                   "escalations": self._resolved()}  # fmt: skip
        return [item, reached]

    def _status(self, p: dict[str, Any]) -> dict[str, Any]:
        action = str(p.get("action"))
        item = {"kind": STATUS_KINDS.get(action, "other"), "by": p.get("agent_id"),
                "reason": _short(p.get("reason")), "idle": bool(p.get("idle_before"))}  # fmt: skip
        if action in ("resolve", "close"):
            item["escalations"] = self._resolved()
        return item

    def _escalated(self, p: dict[str, Any]) -> dict[str, Any]:
        escalation_id = str(p.get("escalation_id"))
        actions = [a for a in p.get("actions") or [] if isinstance(a, dict)]
        given = p.get("priority")
        priority = given if isinstance(given, int) else 0
        self.open.append(escalation_id)
        self.actions[escalation_id] = actions
        return {"kind": "escalated", "escalation_id": escalation_id,
                "rule": p.get("rule"), "priority": domain.escalation_priority(priority, actions),
                "reason": _short(p.get("reason")),
                "actions": [str(a.get("type")) for a in actions]}  # fmt: skip

    def _action(self, p: dict[str, Any]) -> dict[str, Any]:
        escalation_id = str(p.get("escalation_id"))
        index = p.get("index")
        actions = self.actions.get(escalation_id, [])
        action = actions[index] if isinstance(index, int) and 0 <= index < len(actions) else {}
        state = _object(p.get("state"))
        result = _object(state.get("result"))
        return {"kind": "escalation_action", "escalation_id": escalation_id,
                "action": state.get("type") or action.get("type"),
                "status": state.get("status"), "attempts": state.get("attempts"),
                "agent": result.get("invited") or None,
                "delivered": result.get("delivered"),
                "escalated_to": result.get("escalated_to"),
                "error": _short(state.get("error"))}  # fmt: skip


def _applied(outcome: dict[str, Any] | None) -> bool | None:
    """Whether the live store applied it (None: it holds no record of it)."""
    if outcome is None:
        return None
    return bool(outcome.get("ok", True))


class ThreadTimeline:
    """A thread's envelopes in log order, each with what it did (for who reads the thread)."""

    def __init__(
        self,
        db: Database,
        readers: ThreadReaders,
        log: ThreadLogReader | None,
        limiter: ReadLimiter,
    ) -> None:
        self._db = db
        self._readers = readers
        self._log = log
        self._limiter = limiter

    async def timeline(
        self, caller: Caller, thread_id: str, *, as_of: int | None = None
    ) -> list[dict[str, Any]]:
        """The thread's entries up to ``as_of`` (a log sequence; None: all of them)."""
        async with self._db.session() as session:
            thread = await Repository(session).thread(thread_id)
        if thread is None:
            raise ThreadNotFound(f"no thread '{thread_id}'", details={"thread_id": thread_id})
        self._readers.require_thread_reader(caller, thread)
        if self._log is None:
            raise InvalidParameters("this node does not replay threads")
        self._limiter.take(caller.principal.id)
        entries = [e for e in await self._log.entries(thread_id) if as_of is None or e.seq <= as_of]
        ids = [e.envelope_id for e in entries if e.envelope_id]
        async with self._db.session() as session:
            outcomes = await applied_outcomes(session, ids)
        reader = _Reader()
        shown: list[dict[str, Any]] = []
        for entry in entries:
            shown.extend(_shown(entry, outcomes, reader))
        return shown


def _shown(
    entry: LogEntry, outcomes: dict[str, dict[str, Any]], reader: _Reader
) -> list[dict[str, Any]]:
    """An entry as the timeline shows it: the log's record, and what it did if it did."""
    base = entry.to_json()
    env = entry.envelope
    if env is None:
        return [base | {"kind": "unreadable", "applied": None}]
    outcome = outcomes.get(env.id)
    applied = _applied(outcome)
    if applied is False:
        refusal = _short(outcome.get("reason")) if outcome else None
        return [base | {"kind": "refused", "applied": False, "refused": refusal}]
    return [base | {"applied": applied} | item for item in reader.read(env, outcome)]
