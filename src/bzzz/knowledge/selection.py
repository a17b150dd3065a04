"""Which facts a read answers, and how each is shown: the choice over a project's index.

``select_facts`` ranks by BM25 when there are words (ties by id), else by the default order;
``neighbourhood`` walks two hops out from an entity, bounded; ``chain`` follows a fact's
versions. Everything here reads the index in memory and is the same on every node.
"""

from __future__ import annotations

import heapq
from datetime import datetime
from typing import Any

from bzzz.errors import InvalidParameters
from bzzz.knowledge import projection
from bzzz.knowledge.index import Fact, ProjectIndex, default_order, query_words
from bzzz.knowledge.projection import AGREED_STATUS, ENTITY_LENGTH

# Bounds of a read (documented in docs/knowledge.md): the words of a query, the neighbourhood's
# entities and facts.
QUERY_LENGTH = 500
NEIGHBOUR_ENTITIES = 20
NEIGHBOUR_FACTS = 50


def search_terms(about: Any, q: Any) -> tuple[str | None, str | None]:
    if about is not None:
        if not isinstance(about, str) or not about.strip() or len(about) > ENTITY_LENGTH:
            raise InvalidParameters(
                f"about names an entity: 1 to {ENTITY_LENGTH} characters",
                details={"field": "about"},
            )
        about = about.strip()
    if q is not None:
        if not isinstance(q, str) or not q.strip() or len(q) > QUERY_LENGTH:
            raise InvalidParameters(
                f"q is words to look for: 1 to {QUERY_LENGTH} characters",
                details={"field": "q"},
            )
        q = q.strip()
    return about, q


def visible(fact: Fact, as_of: datetime | None, agreed_only: bool) -> bool:
    if as_of is not None:
        return fact.valid_at(as_of)
    return fact.current and (not agreed_only or fact.status == AGREED_STATUS)


def select_facts(
    index: ProjectIndex,
    about: str | None,
    q: str | None,
    as_of: datetime | None,
    *,
    agreed_only: bool,
    limit: int,
    words: list[str] | None = None,
) -> tuple[list[Fact], int]:
    """The ``limit`` best facts a read answers (BM25 with words, else the default order;
    ties by id) and how many it matched."""
    within = index.about(about) if about is not None else None
    facts = index.facts
    if q is not None or words is not None:

        def accept(fact_id: str) -> bool:
            if within is not None and fact_id not in within:
                return False
            return visible(facts[fact_id], as_of, agreed_only)

        scores = index.rank(words if words is not None else query_words(q or ""), accept)
        best = heapq.nsmallest(limit, scores.items(), key=lambda pair: (-pair[1], pair[0]))
        return [facts[fact_id] for fact_id, _ in best], len(scores)
    pool = (facts[i] for i in within) if within is not None else facts.values()
    seen = [f for f in pool if visible(f, as_of, agreed_only)]
    return heapq.nsmallest(limit, seen, key=default_order), len(seen)


def chain(index: ProjectIndex, fact: Fact, *, backwards: bool, limit: int) -> list[Fact]:
    found: list[Fact] = []
    step = fact.supersedes if backwards else fact.superseded_by
    while step is not None and len(found) < limit:
        nxt = index.facts.get(step)
        if nxt is None or nxt in found:
            break
        found.append(nxt)
        step = nxt.supersedes if backwards else nxt.superseded_by
    return found


def shown(index: ProjectIndex, fact: Fact, history: int) -> dict[str, Any]:
    shown = fact.to_json()
    if history:
        shown["history"] = [f.to_json() for f in chain(index, fact, backwards=True, limit=history)]
    return shown


def neighbourhood(index: ProjectIndex, about: str, as_of: datetime | None) -> list[dict[str, Any]]:
    """Facts sharing an entity with the entity's own facts (the second hop), bounded: the
    first entities met in the own facts' default order, their facts in that order too."""
    centre = projection.normalize(about)
    own_ids = index.about(about)
    own = [index.facts[i] for i in own_ids]
    own.sort(key=default_order)
    entities: dict[str, str] = {}
    for fact in own:
        if len(entities) >= NEIGHBOUR_ENTITIES:
            break
        if not visible(fact, as_of, False):
            continue
        for key, name in ((fact.subject_key, fact.subject), (fact.object_key, fact.object)):
            if key != centre and key not in entities and len(entities) < NEIGHBOUR_ENTITIES:
                entities[key] = name
    found: dict[str, tuple[Fact, str]] = {}
    for key, name in entities.items():
        for fact_id in index.about(key):
            fact = index.facts[fact_id]
            if fact_id not in own_ids and fact_id not in found and visible(fact, as_of, False):
                found[fact_id] = (fact, name)
    chosen = heapq.nsmallest(NEIGHBOUR_FACTS, found.values(), key=lambda p: p[0].order)
    return [fact.to_json() | {"hop": 2, "via": via} for fact, via in chosen]


def prompt_line(fact: dict[str, Any]) -> str:
    """One fact as a prompt shows it, with its source."""
    source = fact.get("source") or {}
    where = f"thread {source['thread']}" if source.get("thread") else f"by {fact['author']}"
    text = fact.get("statement") or f"{fact['subject']} {fact['relation']} {fact['object']}"
    return f"- {text} [{fact['subject']} / {fact['relation']} / {fact['object']}; {where}]"
