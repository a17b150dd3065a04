"""Thread summaries without a model: who, how much, what was decided, what is still open."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from bzzz import domain
from bzzz.domain import iso

_WORD = re.compile(r"[a-z0-9][a-z0-9_'-]+")
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_STOP = frozenset(
    [
        "the",
        "a",
        "an",
        "and",
        "or",
        "of",
        "to",
        "in",
        "on",
        "for",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "it",
        "this",
        "that",
        "with",
        "as",
        "at",
        "by",
        "from",
        "we",
        "you",
        "i",
        "they",
        "he",
        "she",
        "our",
        "your",
        "their",
        "not",
        "but",
        "if",
        "then",
        "so",
        "do",
        "does",
        "did",
        "can",
        "could",
        "should",
        "would",
        "will",
        "shall",
        "may",
        "might",
        "have",
        "has",
        "had",
        "about",
        "into",
        "over",
        "than",
        "there",
        "here",
        "what",
        "which",
        "who",
        "how",
    ]
)


def message_text(message: domain.Message) -> str:
    """The human-readable text of a message's content."""
    return content_text(message.content)


def content_text(content: dict[str, Any]) -> str:
    """The human-readable text of a message content object."""
    for key in ("text", "content", "message", "body", "decision", "question", "summary"):
        value = content.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return " ".join(str(v) for v in content.values() if isinstance(v, str | int | float))


def _sentences(messages: list[domain.Message]) -> list[tuple[str, str]]:
    found = []
    for message in messages:
        for sentence in _SENTENCE.split(message_text(message)):
            sentence = sentence.strip()
            if len(sentence) >= 12:
                found.append((message.sender, sentence))
    return found


def _extract(messages: list[domain.Message], limit: int = 3) -> str:
    sentences = _sentences(messages)
    if not sentences:
        return ""
    freq = Counter(
        word for _, s in sentences for word in _WORD.findall(s.lower()) if word not in _STOP
    )

    def weight(item: tuple[int, tuple[str, str]]) -> float:
        words = [w for w in _WORD.findall(item[1][1].lower()) if w not in _STOP]
        return sum(freq[w] for w in words) / (len(words) ** 0.5 or 1)

    best = sorted(enumerate(sentences), key=weight, reverse=True)[:limit]
    return " ".join(f"{sender}: {sentence}" for _, (sender, sentence) in sorted(best))


def summarize_thread(thread: domain.Thread, messages: list[domain.Message]) -> dict[str, Any]:
    """Participants, counts, decisions, open questions and a short extractive summary."""
    replied = {m.reply_to for m in messages if m.reply_to}
    decisions = [
        {"id": m.id, "by": m.sender, "text": message_text(m), "timestamp": iso(m.posted_at)}
        for m in messages
        if m.message_type == "decision"
    ]
    questions = [
        {"id": m.id, "by": m.sender, "text": message_text(m), "timestamp": iso(m.posted_at)}
        for m in messages
        if m.message_type == "question" and m.id not in replied
    ]
    speakers = Counter(m.sender for m in messages)
    head = (
        f"Thread '{thread.topic}' ({thread.status}): {len(messages)} messages from "
        f"{len(speakers)} participants; {len(decisions)} decisions, "
        f"{len(questions)} open questions."
    )
    extract = _extract(messages)
    return {
        "thread_id": thread.id,
        "topic": thread.topic,
        "status": thread.status,
        "participants": thread.active_participants,
        "message_count": len(messages),
        "messages_by_participant": dict(speakers),
        "decisions": decisions,
        "open_questions": questions,
        "summary": f"{head} {extract}".strip(),
        "method": "extractive",
    }
