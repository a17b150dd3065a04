"""When a thread closes, a hosted agent that took part looks back: an episode, and facts proposed.

The seed's episodic memory (participants, topic, summary, outcome, lessons) is kept per closed
thread: one hosted agent of this node among the thread's participants (the first by id, so two
agents of one node do not both write it) asks the model for a retrospective in a JSON schema
(``facts.RESPONSE_FORMAT``). The episode goes on the log as the agent's memory (and so becomes
its project's searchable knowledge, read for prompts like the rest); the facts the model read
in the thread are stated as "proposed", sourced to the thread, until a participant or a second
agent agrees. An endpoint without structured output refuses the schema (HTTP 400): the request
is sent again without it, and the answer is read leniently (``facts.parse_retrospective``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from bzzz import domain
from bzzz.errors import BzzzError, CostLimitExceeded, OpenAIError
from bzzz.llm.facts import (
    RESPONSE_FORMAT,
    FactSource,
    Retrospective,
    facts_message,
    parse_retrospective,
)
from bzzz.llm.memory import Episode, MemoryStore
from bzzz.llm.participation import thread_state
from bzzz.llm.summaries import transcript
from bzzz.llm.types import CompletionOptions, CompletionResult
from bzzz.network.envelope import Envelope

if TYPE_CHECKING:
    from bzzz.llm.agency import Agency
    from bzzz.llm.hosted import HostedAgent

logger = logging.getLogger(__name__)

RETRO_TOKENS = 800
MAX_REMEMBERED = 10_000
PROMPT = (
    "You took part in this conversation between agents; it is now closed. Look back on it and "
    "answer with one JSON object: summary (at most five sentences: what it was about and what "
    "came of it), outcome (one word: agreed, rejected, open or abandoned), lessons (short "
    "sentences worth remembering next time), and facts: what the participants settled, each "
    "as subject, relation, object (short names), a one-sentence statement, and your "
    "confidence from 0 to 1. Propose only what they settled, never a guess, and nothing the "
    "project already agreed (listed below, if any)."
)


def _closes(env: Envelope) -> str | None:
    """The thread an applied envelope may have closed (a close, or an agreement)."""
    p = env.payload
    thread_id = p.get("thread_id")
    if not isinstance(thread_id, str):
        return None
    if env.type == "thread.status" and p.get("action") == "close":
        return thread_id
    if env.type == "message.posted" and p.get("stance") == "agree":
        return thread_id
    return None


def _outcome(thread: domain.Thread) -> str:
    return "agreed" if thread.consensus else "closed"


class Retrospectives:
    """Hears threads close; the hosted agent that took part writes what the thread taught."""

    def __init__(self, agency: Agency, hosted: dict[str, HostedAgent], memory: MemoryStore) -> None:
        self._agency = agency
        self._hosted = hosted
        self._memory = memory
        self._seen: dict[str, None] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self.stopping = False
        self.written = 0
        self.proposed = 0

    @property
    def facts(self) -> FactSource | None:
        """Where facts are read and proposed (None: a node without the knowledge service)."""
        return self._agency.facts

    def on_applied(self, envelopes: Sequence[Envelope]) -> None:
        """Projector listener: a thread that may have closed is looked at once."""
        if self.stopping or not self._hosted:
            return
        for env in envelopes:
            thread_id = _closes(env)
            if thread_id is None or thread_id in self._seen:
                continue
            task = asyncio.create_task(self._look(thread_id), name="bzzz-retrospective")
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _look(self, thread_id: str) -> None:
        try:
            thread, messages = await thread_state(self._agency, thread_id)
            if thread is None or thread.status != "completed" or thread_id in self._seen:
                return
            agent = self._writer(thread)
            if agent is None:
                return
            self._seen[thread_id] = None
            if len(self._seen) > MAX_REMEMBERED:
                del self._seen[next(iter(self._seen))]
            await self.write(agent, thread, messages)
        except (OpenAIError, CostLimitExceeded) as exc:
            logger.info("no retrospective of thread %s: %s", thread_id, exc.message)
        except BzzzError as exc:
            logger.warning("the retrospective of thread %s failed: %s", thread_id, exc.message)
        except Exception:
            # A background task: one thread's failure must not take the runtime down.
            logger.exception("the retrospective of thread %s failed", thread_id)

    def _writer(self, thread: domain.Thread) -> HostedAgent | None:
        ids = sorted({p.agent_id for p in thread.participants} & set(self._hosted))
        return self._hosted[ids[0]] if ids else None

    async def write(
        self, agent: HostedAgent, thread: domain.Thread, messages: list[domain.Message]
    ) -> Retrospective | None:
        """Ask the model, keep the episode, propose the facts; None when not this agent's."""
        project = await self._agency.thread_project(agent, thread)
        if project is None:
            return None
        known = await self._known(project, thread)
        result = await self._ask(agent, thread, messages, known)
        retro = parse_retrospective(result.content, _outcome(thread))
        await self._remember(agent, thread, project, retro)
        if project and self.facts is not None:
            await self._propose(agent, thread, project, retro)
        self.written += 1
        return retro

    async def _known(self, project: str, thread: domain.Thread) -> list[dict[str, Any]]:
        if not project or self.facts is None:
            return []
        return await self.facts.for_prompt(project, thread.topic)

    async def _ask(
        self,
        agent: HostedAgent,
        thread: domain.Thread,
        messages: list[domain.Message],
        known: list[dict[str, Any]],
    ) -> CompletionResult:
        llm = self._agency.llm
        chat: list[dict[str, Any]] = []
        agreed = facts_message(known)
        if agreed is not None:
            chat.append(agreed)
        chat.append(
            {
                "role": "user",
                "content": f"Thread topic: {thread.topic}\nParticipants: "
                f"{', '.join(p.agent_id for p in thread.participants)}\n\n{transcript(messages)}",
            }
        )
        options = CompletionOptions(
            system_prompt=PROMPT,
            messages=chat,
            model=agent.spec.model,
            max_tokens=llm.short_answer_tokens(RETRO_TOKENS, agent.spec.model),
            temperature=0.2,
            response_format=RESPONSE_FORMAT,
        )
        try:
            return await llm.complete(options, agent_id=agent.id, purpose="thread_retrospective")
        except OpenAIError as exc:
            if exc.details.get("status") != 400:
                raise
            # An endpoint without structured output: ask again in words, read them leniently.
            logger.info("the model refused the JSON schema (%s); asking without it", exc.message)
            options.response_format = None
            return await llm.complete(options, agent_id=agent.id, purpose="thread_retrospective")

    async def _remember(
        self, agent: HostedAgent, thread: domain.Thread, project: str, retro: Retrospective
    ) -> None:
        lessons = "".join(f"\nLesson: {lesson}" for lesson in retro.lessons)
        episode = Episode(
            participants=[p.agent_id for p in thread.participants],
            topic=thread.topic,
            summary=f"{retro.summary}{lessons}",
            outcome=retro.outcome,
        )
        await self._memory.remember(agent.id, project, episode, thread_id=thread.id)

    async def _propose(
        self, agent: HostedAgent, thread: domain.Thread, project: str, retro: Retrospective
    ) -> None:
        assert self.facts is not None
        for proposal in retro.facts:
            try:
                await self.facts.state(
                    agent.caller,
                    project,
                    proposal.subject,
                    proposal.relation,
                    proposal.object,
                    statement=proposal.statement,
                    # "summary": the knowledge service marks what a model read as such.
                    source={"thread": thread.id, "agents": [agent.id], "origin": "summary"},
                    status="proposed",
                    confidence=proposal.confidence,
                    author=agent.id,
                )
                self.proposed += 1
            except BzzzError as exc:
                logger.info("fact from thread %s not proposed: %s", thread.id, exc.message)

    async def stop(self) -> None:
        """Cancel the retrospectives in progress."""
        self.stopping = True
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
