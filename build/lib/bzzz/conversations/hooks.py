"""Where a model plugs into conversations; each hook has a default that needs no model.

Hosted LLM agents (``bzzz.llm``) can supply a stance classifier and an insight extractor; until
one is configured, stances come only from what agents declare and insights are extracted.
"""

from __future__ import annotations

from typing import Any, Protocol

from bzzz import domain
from bzzz.conversations.summary import summarize_thread


class StanceClassifier(Protocol):
    """Tells whether a reply agrees or disagrees with the message it answers."""

    async def classify(self, text: str, target: str) -> str | None:
        """'agree', 'disagree', or None when the reply takes no stance."""
        ...


class NoStanceModel:
    """Without a model, a message's stance is only the one its sender declares."""

    async def classify(self, text: str, target: str) -> str | None:
        """Never guesses."""
        return None


class InsightExtractor(Protocol):
    """Draws the insights of a SLURP context event out of a thread."""

    async def insights(self, thread: domain.Thread, messages: list[domain.Message]) -> list[str]:
        """Short statements of what the thread learnt."""
        ...


class ExtractiveInsights:
    """Insights without a model: the decision log, then the thread's most central sentences."""

    def __init__(self, limit: int = 5) -> None:
        self._limit = limit

    async def insights(self, thread: domain.Thread, messages: list[domain.Message]) -> list[str]:
        """Decisions first, then the extractive summary's sentences, without repeats."""
        found = [str(e["text"]) for e in thread.decision_log if e.get("text")]
        summary = str(summarize_thread(thread, messages)["summary"])
        # The extractive part follows the head sentence, which ends with "open questions.".
        _head, _, extract = summary.partition(" open questions.")
        found.extend(part.strip() for part in extract.split(". ") if part.strip())
        return list(dict.fromkeys(found))[: self._limit]


class ThreadObserver(Protocol):
    """Hears of every message applied to a thread (rule checks, consensus follow-up)."""

    async def on_thread_message(self, thread_id: str, outcome: dict[str, Any]) -> None:
        """React to a thread message and its outcome."""
        ...
