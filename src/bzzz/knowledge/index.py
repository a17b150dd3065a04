"""A project's facts opened in the node's memory: entity lookups and BM25 ranking.

The facts' text is sealed in the store, so no database index can hold its words: the node
keeps each project it is asked about in memory, filled from the table's opened rows and
refreshed by the change number ``v`` (the same on every node), dropped when erasure or
retention removed rows. Ranking is BM25 (k1 1.2, b 0.75) over subject, relation, object and
statement of every fact of the project, scores rounded to 9 places and ties broken by id, so
two nodes holding the same facts answer in the same order. Nothing of it reaches a disk.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import Row

from bzzz import domain
from bzzz.knowledge.projection import AGREED_STATUS, normalize
from bzzz.store.models import FactRow

_WORD = re.compile(r"[0-9a-z]+")
# Words too common to tell facts apart (as llm/knowledge.py's, plus a few of relations).
_COMMON = (
    "the and for that this with from are was were will would should could have has had not "
    "but you your our their its into onto about over under than then them they there these "
    "those what which when where who whom why how all any each can may must one two use used "
    "using also only very more most such is a an of to in on or be by as it at"
)
STOPWORDS = frozenset(_COMMON.split(" "))
MAX_QUERY_WORDS = 32
K1 = 1.2
B = 0.75


def _stem(word: str) -> str:
    """A light plural fold: retries/retry, keys/key (no dictionary, the same everywhere)."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


# Words already folded (a project's vocabulary repeats): bounded, cleared when full.
_FOLDED: dict[str, str] = {}
FOLDED_KEPT = 200_000


def words(text: str) -> list[str]:
    """The indexed words of ``text``: lower case, stopwords out, plurals folded."""
    found = []
    for word in _WORD.findall(text.casefold()):
        folded = _FOLDED.get(word)
        if folded is None:
            if word in STOPWORDS:
                continue
            if len(_FOLDED) >= FOLDED_KEPT:
                _FOLDED.clear()
            folded = _FOLDED[word] = _stem(word)
        found.append(folded)
    return found


def query_words(text: str, limit: int = MAX_QUERY_WORDS) -> list[str]:
    """The distinct words of a query (first seen first, at most ``limit``)."""
    return list(dict.fromkeys(words(text)))[:limit]


@dataclass(slots=True)
class Fact:
    """A fact opened in memory (a row's copy)."""

    id: str
    project: str
    subject: str
    relation: str
    object: str
    statement: str
    subject_key: str
    object_key: str
    status: str
    confidence: float
    author: str
    origin: str
    source_thread: str | None
    source_message: str | None
    agents: list[str]
    valid_from: datetime | None
    valid_until: datetime | None
    superseded_by: str | None
    supersedes: str | None
    recorded_at: datetime
    v: int
    # Its place without words (see default_order), computed once.
    order: tuple[Any, ...] = field(init=False, compare=False)

    def __post_init__(self) -> None:
        newest = self.valid_from or self.recorded_at
        self.order = (
            self.status != AGREED_STATUS,
            -self.confidence,
            -newest.timestamp(),
            self.id,
        )

    @classmethod
    def of(cls, row: FactRow | Row[Any]) -> Fact:
        """The opened copy of a row (an ORM row or a selected one)."""
        return cls(
            id=row.id,
            project=row.project,
            subject=row.subject,
            relation=row.relation,
            object=row.object,
            statement=row.statement,
            subject_key=normalize(row.subject),
            object_key=normalize(row.object),
            status=row.status,
            confidence=row.confidence,
            author=row.author,
            origin=row.origin,
            source_thread=row.source_thread,
            source_message=row.source_message,
            agents=list(row.agents or []),
            valid_from=row.valid_from,
            valid_until=row.valid_until,
            superseded_by=row.superseded_by,
            supersedes=row.supersedes,
            recorded_at=row.recorded_at,
            v=row.v,
        )

    @property
    def text(self) -> str:
        """What the ranking reads of it."""
        return f"{self.subject} {self.relation} {self.object} {self.statement}"

    @property
    def current(self) -> bool:
        """Neither superseded nor ended."""
        return self.valid_until is None and self.superseded_by is None

    def valid_at(self, at: datetime) -> bool:
        """An agreed fact that held at ``at``."""
        return (
            self.status == AGREED_STATUS
            and self.valid_from is not None
            and self.valid_from <= at
            and (self.valid_until is None or self.valid_until > at)
        )

    def to_json(self) -> dict[str, Any]:
        """The contract's fact dict."""
        return {
            "id": self.id,
            "project": self.project,
            "subject": self.subject,
            "relation": self.relation,
            "object": self.object,
            "statement": self.statement,
            "status": self.status,
            "confidence": self.confidence,
            "author": self.author,
            "origin": self.origin,
            "source": {
                "thread": self.source_thread,
                "message": self.source_message,
                "agents": list(self.agents),
            },
            "valid_from": domain.iso(self.valid_from),
            "valid_until": domain.iso(self.valid_until),
            "superseded_by": self.superseded_by,
            "supersedes": self.supersedes,
            "recorded_at": domain.iso(self.recorded_at),
        }


def default_order(fact: Fact) -> tuple[Any, ...]:
    """Best first without words: agreed, more confident, newer, then by id."""
    return fact.order


class ProjectIndex:
    """One project's facts in memory: by id, by entity, and their words' postings."""

    def __init__(self, project: str) -> None:
        self.project = project
        self.facts: dict[str, Fact] = {}
        self.cursor: tuple[int, str] = (0, "")  # the newest (change number, id) loaded
        # Set when erasure or retention may have removed facts: checked at the next read.
        self.stale = False
        self.checked = -math.inf  # when it last looked at the store (time.monotonic)
        self._entities: dict[str, set[str]] = {}
        self._postings: dict[str, dict[str, int]] = {}
        self._lengths: dict[str, int] = {}
        self._total = 0

    def put(self, fact: Fact) -> None:
        """Add a fact, or replace the copy it had."""
        if fact.id in self.facts:
            self.remove(fact.id)
        self.facts[fact.id] = fact
        for key in {fact.subject_key, fact.object_key}:
            self._entities.setdefault(key, set()).add(fact.id)
        counted = words(fact.text)
        for word, tf in Counter(counted).items():
            postings = self._postings.get(word)
            if postings is None:
                postings = self._postings[word] = {}
            postings[fact.id] = tf
        self._lengths[fact.id] = len(counted)
        self._total += len(counted)
        self.cursor = max(self.cursor, (fact.v, fact.id))

    def remove(self, fact_id: str) -> None:
        """Forget a fact."""
        fact = self.facts.pop(fact_id, None)
        if fact is None:
            return
        for key in {fact.subject_key, fact.object_key}:
            ids = self._entities.get(key)
            if ids is not None:
                ids.discard(fact_id)
                if not ids:
                    del self._entities[key]
        for word in set(words(fact.text)):
            postings = self._postings.get(word)
            if postings is not None:
                postings.pop(fact_id, None)
                if not postings:
                    del self._postings[word]
        self._total -= self._lengths.pop(fact_id, 0)

    def about(self, entity: str) -> set[str]:
        """The ids of the facts whose subject or object is ``entity``."""
        return set(self._entities.get(normalize(entity), ()))

    def rarest(self, query: Iterable[str], limit: int) -> list[str]:
        """The ``limit`` query words found in fewest facts (ties by word): a long text (a
        prompt's) is ranked by the words that tell its facts apart, at a bounded cost."""
        found = [w for w in dict.fromkeys(query) if w in self._postings]
        return sorted(found, key=lambda w: (len(self._postings[w]), w))[:limit]

    def rank(self, query: Iterable[str], accept: Callable[[str], bool]) -> dict[str, float]:
        """BM25 scores of the accepted facts matching any query word.

        Each fact's score adds its words' terms in the query's order, from the project's
        counts alone, so two nodes holding the same facts compute the same floats.
        """
        n = len(self.facts)
        if n == 0:
            return {}
        average = self._total / n or 1.0
        lengths = self._lengths
        scores: dict[str, float] = {}
        refused: set[str] = set()
        for word in dict.fromkeys(query):
            postings = self._postings.get(word)
            if not postings:
                continue
            df = len(postings)
            idf = math.log(1.0 + (n - df + 0.5) / (df + 0.5))
            for fact_id, tf in postings.items():
                known = scores.get(fact_id)
                if known is None:
                    if fact_id in refused:
                        continue
                    if not accept(fact_id):
                        refused.add(fact_id)
                        continue
                    known = 0.0
                norm = K1 * (1.0 - B + B * lengths[fact_id] / average)
                scores[fact_id] = known + idf * tf * (K1 + 1.0) / (tf + norm)
        return scores
