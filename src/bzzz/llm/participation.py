"""Hosted agents take part in threads: they hear every thread message and answer what asks them.

An agent answers when the thread asks something of it: a review opening, a question, a decision
that awaits its stance, a message that names it, an invitation (``request_expert``,
``escalate_to_architect``). It never answers its own messages, answers each message at most
once, and posts at most ``agents.max_replies_per_thread`` messages in one thread, so two models
cannot talk forever. Its answers are a reply, a stance on a decision (``agree`` / ``disagree``
with ``reply_to``) or a decision of its own; every model call counts against the cost limits.

The projector tells this module of every applied envelope (from any node); the work happens in
tasks of its own, one at a time per agent and thread, so the log is never held up.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from bzzz import domain
from bzzz.conversations.service import ConversationService
from bzzz.conversations.summary import message_text
from bzzz.errors import BzzzError
from bzzz.network.envelope import Envelope
from bzzz.schemas import PostInput
from bzzz.store.database import Database
from bzzz.store.repository import Repository

if TYPE_CHECKING:
    from bzzz.llm.hosted import HostedAgent

logger = logging.getLogger(__name__)

T = TypeVar("T")
# A model's answer to a decision opens with its stance; one of its own opens with DECISION:.
_STANCE = re.compile(r"^\W*(agree|disagree)\b[\s.:,;!-]*", re.IGNORECASE)
_DECISION = re.compile(r"^\W*decision\s*:\s*", re.IGNORECASE)
TEXT_CHARS = 20_000
MAX_CLAIMS = 100_000


class Agency(Protocol):
    """What answering needs of the agency (``agency.Agency``, which builds on this module)."""

    @property
    def db(self) -> Database:
        """Where threads are read."""
        ...

    @property
    def conversations(self) -> ConversationService:
        """Where answers are posted."""
        ...

    async def answer(self, agent: HostedAgent, trigger: Trigger) -> bool:
        """Answer what ``trigger`` asks of ``agent``; whether it did."""
        ...


@dataclass(frozen=True, slots=True)
class Trigger:
    """What may ask an agent to speak: a thread message, or an invitation into the thread."""

    thread_id: str
    message_id: str | None = None
    invitation: str | None = None

    @property
    def key(self) -> str:
        """What is answered at most once."""
        return self.message_id or f"invitation:{self.invitation}"


@dataclass(frozen=True, slots=True)
class Answer:
    """What a model's text becomes in the thread."""

    message_type: str
    content: dict[str, object]
    reply_to: str | None = None
    stance: str | None = None


def parse_answer(text: str, message: domain.Message | None, on_decision: bool) -> Answer | None:
    """A reply, a stance on the decision answered, or a decision of the agent's own."""
    text = text.strip()[:TEXT_CHARS]
    if not text:
        return None
    stance = _STANCE.match(text)
    if on_decision and message is not None and stance:
        rest = text[stance.end() :].strip() or stance.group(1).lower()
        return Answer("text", {"text": rest}, message.id, stance.group(1).lower())
    decision = _DECISION.match(text)
    if decision:
        body = text[decision.end() :].strip() or text
        return Answer("decision", {"decision": body, "text": body})
    content: dict[str, object] = {"text": text}
    if message is not None:
        # No reply_to: a plain reply takes no stance, and none should be guessed for it.
        content["in_reply_to"] = message.id
    return Answer("text", content)


def names(text: str, agent_id: str) -> bool:
    """Whether ``text`` names the agent (its id as a word, with or without @)."""
    return re.search(rf"(?<![\w-])@?{re.escape(agent_id)}(?![\w-])", text) is not None


def open_decision(thread: domain.Thread, message_id: str) -> dict[str, Any] | None:
    """The decision-log entry of a proposed decision."""
    for entry in thread.decision_log:
        if entry.get("message_id") == message_id and entry.get("status") == "proposed":
            return entry
    return None


def awaits_stance(thread: domain.Thread, message: domain.Message, agent_id: str) -> bool:
    """A proposed decision this agent has taken no stance on."""
    entry = open_decision(thread, message.id)
    if entry is None:
        return False
    taken = {*(entry.get("agreed") or []), *(entry.get("disagreed") or [])}
    return agent_id not in taken


def reason_to_answer(thread: domain.Thread, message: domain.Message, agent_id: str) -> str | None:
    """Why the message asks something of the agent (None: it asks nothing of it)."""
    if message.sender == agent_id or message.message_type in domain.TASK_UPDATE_TYPES:
        return None
    if message.message_type == "task_assignment":
        return None
    if message.message_type == "decision":
        return (
            "a decision awaiting your stance" if awaits_stance(thread, message, agent_id) else None
        )
    if message.content.get("kind") == "review_request":
        return "the review's opening"
    if message.message_type == "question":
        return "a question to the thread"
    if names(message_text(message), agent_id):
        return "a message naming you"
    return None


def answered(messages: Sequence[domain.Message], agent_id: str, message_id: str) -> bool:
    """Whether the agent already answered the message (a stance on it or a reply to it)."""
    return any(
        m.sender == agent_id
        and (m.reply_to == message_id or m.content.get("in_reply_to") == message_id)
        for m in messages
    )


def posted(messages: Sequence[domain.Message], agent_id: str) -> int:
    """The agent's own messages in the thread (task updates aside)."""
    return sum(
        1
        for m in messages
        if m.sender == agent_id and m.message_type not in domain.TASK_UPDATE_TYPES
    )


class ThreadWatch:
    """Wakes those waiting on a thread whenever something of it is applied."""

    def __init__(self) -> None:
        self._waiting: dict[str, set[asyncio.Event]] = {}

    def touch(self, thread_id: str) -> None:
        """Something of the thread changed."""
        for event in self._waiting.get(thread_id, ()):
            event.set()

    async def until(
        self, thread_id: str, check: Callable[[], Awaitable[T | None]], within: float
    ) -> T | None:
        """Check after every change until ``check`` returns something (None on timeout)."""
        event = asyncio.Event()
        self._waiting.setdefault(thread_id, set()).add(event)
        try:
            async with asyncio.timeout(within):
                while True:
                    event.clear()
                    found = await check()
                    if found is not None:
                        return found
                    await event.wait()
        except TimeoutError:
            return None
        finally:
            waiting = self._waiting.get(thread_id, set())
            waiting.discard(event)
            if not waiting:
                self._waiting.pop(thread_id, None)


class ThreadResponder:
    """Hears thread envelopes, schedules and writes the hosted agents' answers."""

    def __init__(self, agency: Agency, hosted: dict[str, HostedAgent]) -> None:
        self._agency = agency
        self._hosted = hosted
        self.watch = ThreadWatch()
        # One answer at a time per agent and thread: (lock, tasks using it).
        self._locks: dict[tuple[str, str], tuple[asyncio.Lock, int]] = {}
        self._claimed: dict[tuple[str, str], None] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self.stopping = False
        self.replies = 0
        self.skipped = 0

    def on_applied(self, envelopes: Sequence[Envelope]) -> None:
        """Projector listener: wake the watchers, schedule the answers a thread asks for."""
        for env in envelopes:
            thread_id = env.payload.get("thread_id")
            if not isinstance(thread_id, str):
                continue
            self.watch.touch(thread_id)
            if self.stopping:
                continue
            for agent_id, trigger in self._triggers(env, thread_id):
                self._schedule(self._hosted[agent_id], trigger)

    def _triggers(self, env: Envelope, thread_id: str) -> list[tuple[str, Trigger]]:
        p = env.payload
        if env.type == "message.posted":
            recipients = p.get("recipients") or []
            message_id = str(p.get("message_id"))
            return [
                (r, Trigger(thread_id, message_id=message_id))
                for r in recipients
                if r in self._hosted and r != p.get("sender")
            ]
        if (
            env.type == "thread.joined"
            and p.get("invited_by")
            and p.get("agent_id") in self._hosted
        ):
            return [
                (str(p["agent_id"]), Trigger(thread_id, invitation=f"invited by {p['invited_by']}"))
            ]
        found = p.get("metadata")
        metadata: dict[str, Any] = found if isinstance(found, dict) else {}
        if env.type == "thread.created" and metadata.get("kind") == "decision":
            # A decision thread an escalation opened asks each of its members to decide.
            why = f"a decision thread of {metadata.get('escalation_id') or 'an escalation'}"
            return [
                (a, Trigger(thread_id, invitation=why))
                for a in p.get("participants") or []
                if a in self._hosted and a != p.get("creator")
            ]
        return []

    def _schedule(self, agent: HostedAgent, trigger: Trigger) -> None:
        claim = (agent.id, trigger.key)
        if claim in self._claimed:
            return
        self._claimed[claim] = None
        if len(self._claimed) > MAX_CLAIMS:
            # The oldest go: a message answered before is found answered in the store anyway.
            del self._claimed[next(iter(self._claimed))]
        task = asyncio.create_task(self._serially(agent, trigger), name=f"bzzz-reply-{agent.id}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _serially(self, agent: HostedAgent, trigger: Trigger) -> None:
        key = (agent.id, trigger.thread_id)
        lock, users = self._locks.get(key, (asyncio.Lock(), 0))
        self._locks[key] = (lock, users + 1)
        try:
            async with lock:
                if await self._agency.answer(agent, trigger):
                    self.replies += 1
                else:
                    self.skipped += 1
        except BzzzError as exc:
            logger.info(
                "hosted agent %s did not answer in %s: %s", agent.id, trigger.thread_id, exc
            )
        except Exception:
            # One answer's unexpected failure must not take the agent or the runtime down.
            logger.exception("hosted agent %s failed answering in %s", agent.id, trigger.thread_id)
        finally:
            lock, users = self._locks[key]
            if users <= 1:
                del self._locks[key]
            else:
                self._locks[key] = (lock, users - 1)

    async def stop(self) -> None:
        """Cancel the answers in progress."""
        self.stopping = True
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def post_answer(agency: Agency, agent: HostedAgent, thread_id: str, answer: Answer) -> None:
    """Post an answer into the thread as the agent."""
    params = PostInput(
        target_address="bzzz://*",
        message_type=answer.message_type,
        content=dict(answer.content),
        thread_id=thread_id,
        reply_to=answer.reply_to,
        stance=answer.stance,
        agent_id=agent.id,
    )
    await agency.conversations.post(agent.caller, params)


async def thread_state(
    agency: Agency, thread_id: str
) -> tuple[domain.Thread | None, list[domain.Message]]:
    """A thread and its messages, oldest first."""
    async with agency.db.session() as session:
        repo = Repository(session)
        thread = await repo.thread(thread_id)
        messages = await repo.thread_messages(thread_id) if thread else []
    return thread, messages
