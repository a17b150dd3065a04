"""A project's agreed facts in a hosted agent's prompt, and facts the model proposes.

The facts come from the knowledge service (``bzzz.knowledge``) through the small interface
below, so this package names no face nor the node. A prompt carries at most ``FACT_LIMIT``
agreed facts of its own project, most relevant to its text first, within ``FACT_CHARS``
characters, each with its source (thread, message, who agreed): agents build on what the team
decided instead of deciding it again. A thread's retrospective (``retrospective.py``) asks
the model for facts in a JSON schema; what it proposes stays "proposed" until agreed.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Protocol

from bzzz.eventlog import Caller
from bzzz.llm.types import ChatMessage

FACT_LIMIT = 8
FACT_CHARS = 2_000
# What a proposal may carry: the fact's parts are names, its statement a sentence or two.
PART_CHARS = 200
STATEMENT_CHARS = 500
MAX_PROPOSALS = 5
LESSON_CHARS = 300
MAX_LESSONS = 5
FACTS_HEADER = (
    "Facts this project agreed (most relevant first). Build on them instead of deciding them "
    "again; if one must change, say so in the thread and why:"
)


class FactSource(Protocol):
    """What hosted agents need of the knowledge service."""

    async def for_prompt(
        self, project: str, text: str, *, limit: int = FACT_LIMIT, max_chars: int = FACT_CHARS
    ) -> list[dict[str, Any]]:
        """The project's agreed facts most relevant to ``text``, bounded."""
        ...

    async def state(
        self,
        caller: Caller,
        project: str,
        subject: str,
        relation: str,
        object: str,
        *,
        statement: str | None = None,
        source: dict[str, Any] | None = None,
        status: str = "agreed",
        confidence: float = 1.0,
        author: str | None = None,
    ) -> dict[str, Any]:
        """Store a fact (agreed, or proposed until someone agrees)."""
        ...


def fact_line(fact: dict[str, Any]) -> str:
    """One fact as a prompt shows it: what it says, then where it comes from."""
    triple = f"{fact.get('subject')} {fact.get('relation')} {fact.get('object')}"
    statement = str(fact.get("statement") or "").strip()
    said = f"{statement} ({triple})" if statement and statement != triple else triple
    return f"- {said} [{source_text(fact)}]"


def source_text(fact: dict[str, Any]) -> str:
    """Where a fact comes from, in a few words: thread, message, who agreed, since when."""
    found = fact.get("source")
    source: dict[str, Any] = found if isinstance(found, dict) else {}
    parts = []
    if source.get("thread"):
        parts.append(f"thread {source['thread']}")
    if source.get("message"):
        parts.append(f"message {source['message']}")
    agents = [str(a) for a in source.get("agents") or []]
    if agents:
        parts.append("agreed by " + ", ".join(agents[:5]))
    elif fact.get("author"):
        parts.append(f"stated by {fact['author']}")
    if fact.get("valid_from"):
        parts.append(f"since {str(fact['valid_from'])[:10]}")
    parts.append(f"fact {fact.get('id')}")
    return "source: " + "; ".join(parts)


def facts_message(facts: list[dict[str, Any]], max_chars: int = FACT_CHARS) -> ChatMessage | None:
    """The facts as one system message, cut at ``max_chars`` on a whole line (None: none)."""
    lines: list[str] = []
    used = 0
    for fact in facts:
        line = fact_line(fact)
        if used + len(line) > max_chars:
            break
        lines.append(line)
        used += len(line) + 1
    if not lines:
        return None
    return {"role": "system", "content": FACTS_HEADER + "\n" + "\n".join(lines)}


# --- what the model proposes ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Proposal:
    """A fact the model read in a thread."""

    subject: str
    relation: str
    object: str
    statement: str
    confidence: float


@dataclass(frozen=True, slots=True)
class Retrospective:
    """What a closed thread taught, as the model wrote it (the seed's episode, with facts)."""

    summary: str
    outcome: str
    lessons: list[str] = field(default_factory=list)
    facts: list[Proposal] = field(default_factory=list)


_PART = {"type": "string", "minLength": 1, "maxLength": PART_CHARS}
RETROSPECTIVE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["summary", "outcome", "lessons", "facts"],
    "properties": {
        "summary": {"type": "string", "description": "what the thread was about, what came of it"},
        "outcome": {"type": "string", "description": "agreed, rejected, open or abandoned"},
        "lessons": {"type": "array", "items": {"type": "string"}, "maxItems": MAX_LESSONS},
        "facts": {
            "type": "array",
            "maxItems": MAX_PROPOSALS,
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["subject", "relation", "object", "statement", "confidence"],
                "properties": {
                    "subject": _PART,
                    "relation": _PART,
                    "object": _PART,
                    "statement": {"type": "string", "maxLength": STATEMENT_CHARS},
                    "confidence": {"type": "number", "minimum": 0, "maximum": 1},
                },
            },
        },
    },
}
RESPONSE_FORMAT: dict[str, Any] = {
    "type": "json_schema",
    "json_schema": {"name": "thread_retrospective", "strict": True, "schema": RETROSPECTIVE_SCHEMA},
}
_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$")


def _json_object(text: str) -> dict[str, Any] | None:
    """The JSON object in a model's answer: the whole of it, fenced or not, or its first {…}."""
    cleaned = _FENCE.sub("", text.strip())
    for candidate in (cleaned, cleaned[cleaned.find("{") : cleaned.rfind("}") + 1]):
        try:
            found = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(found, dict):
            return found
    return None


def _text(value: Any, limit: int) -> str:
    return " ".join(str(value).split())[:limit] if isinstance(value, str | int | float) else ""


def _proposal(raw: Any) -> Proposal | None:
    if not isinstance(raw, dict):
        return None
    parts = [_text(raw.get(name), PART_CHARS) for name in ("subject", "relation", "object")]
    if not all(parts):
        return None
    try:
        confidence = min(max(float(raw.get("confidence", 0.5)), 0.0), 1.0)
    except (TypeError, ValueError):
        confidence = 0.5
    statement = _text(raw.get("statement"), STATEMENT_CHARS) or " ".join(parts)
    return Proposal(parts[0], parts[1], parts[2], statement, confidence)


def parse_retrospective(text: str, outcome: str) -> Retrospective:
    """The model's answer read leniently: JSON as the schema asks, else the text as summary.

    A model without structured output may answer in prose or fence its JSON: what parses is
    kept, a fact missing a part is dropped, and nothing the model says is trusted past the
    bounds above.
    """
    found = _json_object(text)
    if found is None:
        return Retrospective(summary=text.strip()[:2_000], outcome=outcome)
    lessons = [_text(item, LESSON_CHARS) for item in found.get("lessons") or []]
    raw_facts = found.get("facts")
    proposals = [_proposal(raw) for raw in raw_facts] if isinstance(raw_facts, list) else []
    return Retrospective(
        summary=_text(found.get("summary"), 2_000) or text.strip()[:2_000],
        outcome=_text(found.get("outcome"), 64) or outcome,
        lessons=[lesson for lesson in lessons if lesson][:MAX_LESSONS],
        facts=[p for p in proposals if p is not None][:MAX_PROPOSALS],
    )
