"""Agent memory: working memory per task, episodic and thread memory persisted on the log.

Every persisted memory carries the project it was learned in ("" outside any project) and is
read back only for that same project: nothing learned in project X reaches a prompt for Y.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from ulid import ULID

from bzzz.domain import utcnow
from bzzz.eventlog import EventLog
from bzzz.projects import NO_PROJECT
from bzzz.store.database import Database
from bzzz.store.llm_repository import LLMRepository, Memory

SUMMARY_LIMIT = 2_000


@dataclass(slots=True)
class WorkingMemory:
    """What one task knows while it runs: its project, notes, tool results. Dropped after."""

    task_id: str
    project: str
    notes: dict[str, Any] = field(default_factory=dict)
    tool_results: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Episode:
    """The design's ConversationEpisode: who, about what, what came of it."""

    participants: list[str]
    topic: str
    summary: str
    outcome: str


class MemoryStore:
    """Episodes and thread memories: written as envelopes, read from the store."""

    def __init__(self, db: Database, log: EventLog, recall_limit: int = 5) -> None:
        self._db = db
        self._log = log
        self.recall_limit = recall_limit
        # Episodes are written only by the agent they belong to, and hosted agents live here:
        # after one read, the newest episodes of (agent, project) are kept up to date in memory.
        self._episodes: dict[tuple[str, str], deque[Memory]] = {}

    async def remember(
        self,
        agent_id: str,
        project: str,
        episode: Episode,
        *,
        kind: str = "episode",
        thread_id: str | None = None,
    ) -> None:
        """Persist an episode (or, with ``kind='thread'``, a thread's memory)."""
        memory = Memory(
            id=f"mem-{ULID()}",
            agent_id=agent_id,
            project=project,
            kind=kind,
            thread_id=thread_id,
            topic=episode.topic[:512],
            participants=list(episode.participants),
            summary=episode.summary[:SUMMARY_LIMIT] or "(empty)",
            outcome=episode.outcome[:64],
            created_at=utcnow(),
        )
        outcome = await self._log.emit(
            "memory.recorded",
            "memory",
            agent_id,
            {
                "memory_id": memory.id,
                "agent_id": agent_id,
                "project": project,
                "kind": kind,
                "thread_id": thread_id,
                "topic": episode.topic[:512],
                "participants": episode.participants,
                "summary": episode.summary[:SUMMARY_LIMIT] or "(empty)",
                "outcome": episode.outcome[:64],
            },
            project=project or NO_PROJECT,
        )
        cached = self._episodes.get((agent_id, project))
        if outcome.get("ok") and kind == "episode" and cached is not None:
            cached.appendleft(memory)

    async def recall(self, agent_id: str, project: str, thread_id: str | None) -> list[Memory]:
        """What the agent remembers for this project (and thread), newest first."""
        key = (agent_id, project)
        found: list[Memory] = []
        if thread_id or key not in self._episodes:
            async with self._db.session() as session:
                repo = LLMRepository(session)
                if key not in self._episodes:
                    episodes = await repo.memories(agent_id, project, self.recall_limit)
                    self._episodes[key] = deque(episodes, maxlen=self.recall_limit)
                if thread_id:
                    found = await repo.thread_memories(project, thread_id, self.recall_limit)
        found += list(self._episodes[key])
        # The query already filters by project; this guard keeps the rule if a query changes.
        return [m for m in found if m.project == project]


def context_message(memories: list[Memory]) -> dict[str, Any] | None:
    """The memories as one system message for the prompt (None when there are none)."""
    if not memories:
        return None
    lines = []
    for memory in memories:
        kind = "thread" if memory.kind == "thread" else "earlier task"
        lines.append(
            f"- [{kind}] {memory.topic} (with {', '.join(memory.participants) or 'nobody'}; "
            f"outcome: {memory.outcome}): {memory.summary}"
        )
    return {
        "role": "system",
        "content": "What you remember from this project:\n" + "\n".join(lines),
    }
