"""The design's cost optimizer: compress long contexts, route simple tasks to a cheaper model.

Compression is extractive (no model call): it must be cheap, deterministic and work offline.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from bzzz.config import CostSettings, OpenAISettings
from bzzz.llm import tokens
from bzzz.llm.types import ChatMessage

# How much a task type asks of a model before its text is even read.
TYPE_WEIGHT = {
    "architecture_analysis": 0.6,
    "code_review": 0.4,
    "documentation": 0.3,
    "chat_completion": 0.1,
}
COMPRESS_AT = 0.8
KEEP_RECENT = 4
_SENTENCE = re.compile(r"(?<=[.!?])\s+")


@dataclass(frozen=True, slots=True)
class Plan:
    """What the optimizer decided for one request."""

    model: str
    messages: list[ChatMessage]
    complexity: float
    compressed: int


def complexity(task_type: str, text: str) -> float:
    """0-1: the task type's weight plus up to 0.4 for length (4,000 tokens and more)."""
    weight = TYPE_WEIGHT.get(task_type, 0.3)
    return round(min(1.0, weight + min(0.4, tokens.count_text(text) / 10_000)), 4)


def _gist(message: ChatMessage, limit: int = 200) -> str:
    text = str(message.get("content") or "")
    first = _SENTENCE.split(text.strip(), maxsplit=1)[0] if text.strip() else ""
    return f"{message.get('role', 'user')}: {first[:limit]}"


def _summary_message(dropped: list[ChatMessage]) -> ChatMessage:
    lines = [_gist(m) for m in dropped if m.get("role") != "tool"]
    return {
        "role": "system",
        "content": f"Summary of {len(dropped)} earlier messages:\n" + "\n".join(lines),
    }


def _split(messages: list[ChatMessage]) -> tuple[list[ChatMessage], list[ChatMessage]]:
    lead = 0
    while lead < len(messages) and messages[lead].get("role") == "system":
        lead += 1
    return messages[:lead], messages[lead:]


class CostOptimizer:
    """Decides the model and trims the context of each request."""

    def __init__(self, cost: CostSettings, openai: OpenAISettings) -> None:
        self.token_budget = cost.token_budget
        self.max_messages = cost.max_messages_before_summary
        self.threshold = cost.complexity_threshold
        self.default_model = openai.default_model
        self.cheap_model = openai.cheap_model

    def choose_model(self, task_type: str, text: str, requested: str | None) -> tuple[str, float]:
        """The requested model, else the cheap one below the complexity threshold."""
        score = complexity(task_type, text)
        if requested:
            return requested, score
        return (self.cheap_model if score < self.threshold else self.default_model), score

    def fit(self, messages: list[ChatMessage]) -> tuple[list[ChatMessage], int]:
        """Summarize past the message count or 80% of the budget; (messages, how many dropped)."""
        system, rest = _split(messages)
        too_many = len(rest) > self.max_messages
        too_big = tokens.count_messages(messages) > COMPRESS_AT * self.token_budget
        if not (too_many or too_big) or len(rest) <= KEEP_RECENT:
            return messages, 0
        keep = min(KEEP_RECENT, self.max_messages // 2) if too_many else KEEP_RECENT
        keep = max(keep, 1)
        # Never cut between a tool call and its answers: start the kept part at a non-tool message.
        cut = len(rest) - keep
        while cut > 0 and rest[cut].get("role") == "tool":
            cut -= 1
        dropped, kept = rest[:cut], rest[cut:]
        if not dropped:
            return messages, 0
        return [*system, _summary_message(dropped), *kept], len(dropped)

    def plan(
        self, task_type: str, messages: list[ChatMessage], requested: str | None, text: str
    ) -> Plan:
        """Model and messages for a request; ``text`` is the task's own (for its complexity)."""
        model, score = self.choose_model(task_type, text, requested)
        fitted, dropped = self.fit(messages)
        return Plan(model, fitted, score, dropped)
