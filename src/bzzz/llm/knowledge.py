"""Semantic memory: what a project learnt, ranked by full-text relevance for each prompt.

The decisions and insights of a consensus (its SLURP event) and the summaries of episodes are
the project's knowledge (``llm_knowledge``, written through the log). A prompt gets the entries
most relevant to its text. The text is sealed in the store (SQLite and PostgreSQL alike), so no
database index can hold its words: the node ranks in its own memory, with an FTS5 index (BM25)
in an in-memory SQLite database filled from the table's opened rows as entries arrive, one
project at a time as prompts ask for it. Nothing of that index reaches a disk. Every read names
one project: nothing of project X reaches a prompt for Y.
"""

from __future__ import annotations

import hashlib
import re
import sqlite3
from datetime import datetime

from bzzz.eventlog import EventLog
from bzzz.projects import NO_PROJECT
from bzzz.store.database import Database
from bzzz.store.llm_repository import Knowledge, LLMRepository

_WORD = re.compile(r"[A-Za-z][A-Za-z0-9]{2,}")
MAX_WORDS = 32
SYNC_BATCH = 1_000
# Words too common to tell entries apart.
_COMMON = (
    "the and for that this with from are was were will would should could have has had not "
    "but you your our their its into onto about over under than then them they there these "
    "those what which when where who whom why how all any each can may must one two use used "
    "using also only very more most such task please"
)
STOPWORDS = frozenset(_COMMON.split(" "))


def query_words(text: str, limit: int = MAX_WORDS) -> list[str]:
    """The distinct content words of ``text`` (lower case, first seen first)."""
    words = (w.lower() for w in _WORD.findall(text))
    return list(dict.fromkeys(w for w in words if w not in STOPWORDS))[:limit]


def entry_id(source: str, index: int) -> str:
    """A fixed id per source and place: recording one source again keeps it once."""
    digest = hashlib.sha256(source.encode()).hexdigest()[:32]
    return f"kn-{digest}-{index}"


class _LocalIndex:
    """An in-memory FTS5 index of the projects' knowledge (SQLite stores)."""

    def __init__(self) -> None:
        self._db = sqlite3.connect(":memory:")
        self._db.execute(
            "CREATE VIRTUAL TABLE kn USING fts5(kid UNINDEXED, project UNINDEXED, body, "
            "tokenize='porter unicode61')"
        )
        self._entries: dict[str, Knowledge] = {}
        self._seen: dict[str, tuple[datetime, str]] = {}

    def cursor(self, project: str) -> tuple[datetime, str] | None:
        """The last entry of ``project`` indexed."""
        return self._seen.get(project)

    def add(self, entries: list[Knowledge]) -> None:
        """Index entries read from the table, in their order."""
        for entry in entries:
            if entry.id not in self._entries:
                self._entries[entry.id] = entry
                self._db.execute(
                    "INSERT INTO kn (kid, project, body) VALUES (?, ?, ?)",
                    (entry.id, entry.project, entry.text),
                )
            self._seen[entry.project] = (entry.created_at, entry.id)

    def search(self, project: str, words: list[str], limit: int) -> list[Knowledge]:
        """The project's entries matching any word, best BM25 rank first."""
        if not words:
            return []
        match = " OR ".join(f'"{w}"' for w in words)
        rows = self._db.execute(
            "SELECT kid FROM kn WHERE kn MATCH ? AND project = ? ORDER BY bm25(kn) LIMIT ?",
            (match, project, limit),
        ).fetchall()
        return [self._entries[kid] for (kid,) in rows if self._entries[kid].project == project]

    def close(self) -> None:
        """Drop the index."""
        self._db.close()


class KnowledgeBase:
    """Records a project's knowledge on the log and finds the entries relevant to a prompt."""

    def __init__(self, db: Database, log: EventLog) -> None:
        self._db = db
        self._log = log
        self._local = _LocalIndex()
        self.recorded = 0

    async def record(self, project: str, source: str, entries: list[tuple[str, str]]) -> bool:
        """Keep ``(kind, text)`` entries learnt from ``source`` (a thread, an event)."""
        kept = [(kind, text.strip()) for kind, text in entries if text.strip()]
        if not kept:
            return False
        outcome = await self._log.emit(
            "knowledge.recorded",
            "knowledge",
            source,
            {
                "project": project,
                "source": source,
                "entries": [
                    {"id": entry_id(source, i), "kind": kind, "text": text[:4_000]}
                    for i, (kind, text) in enumerate(kept[:100])
                ],
            },
            project=project or NO_PROJECT,
        )
        self.recorded += len(kept) if outcome.get("ok") else 0
        return bool(outcome.get("ok"))

    async def relevant(self, project: str, text: str, limit: int) -> list[Knowledge]:
        """The ``limit`` entries of ``project`` most relevant to ``text``."""
        words = query_words(text)
        if limit <= 0 or not words:
            return []
        await self._sync(project)
        return self._local.search(project, words, limit)

    async def _sync(self, project: str) -> None:
        while True:
            async with self._db.session() as session:
                fresh = await LLMRepository(session).knowledge_after(
                    project, self._local.cursor(project), SYNC_BATCH
                )
            self._local.add(fresh)
            if len(fresh) < SYNC_BATCH:
                return

    def close(self) -> None:
        """Release the local index."""
        self._local.close()
