"""Thread summaries by the model, built on the extractive summary (which stays the fallback)."""

from __future__ import annotations

import logging
from typing import Any

from bzzz import domain
from bzzz.conversations.summary import message_text
from bzzz.errors import CostLimitExceeded, OpenAIError
from bzzz.llm import tokens
from bzzz.llm.service import LLMService
from bzzz.llm.types import CompletionOptions

logger = logging.getLogger(__name__)

TRANSCRIPT_TOKENS = 6_000
SUMMARY_TOKENS = 400
PROMPT = (
    "Summarize this conversation between agents in at most five sentences: what it is about, "
    "what was decided, and what is still open. Name who said what when it matters."
)


def transcript(messages: list[domain.Message], budget: int = TRANSCRIPT_TOKENS) -> str:
    """The newest messages that fit the token budget, oldest first."""
    lines: list[str] = []
    used = 0
    for message in reversed(messages):
        line = f"[{message.sender}] ({message.message_type}) {message_text(message)}"
        cost = tokens.count_text(line)
        if used + cost > budget:
            break
        lines.append(line)
        used += cost
    return "\n".join(reversed(lines))


class ModelSummarizer:
    """Writes a thread's summary with the model; the extractive one when the model cannot."""

    def __init__(self, llm: LLMService) -> None:
        self._llm = llm

    async def __call__(
        self, thread: domain.Thread, messages: list[domain.Message], extractive: dict[str, Any]
    ) -> dict[str, Any]:
        """The extractive summary with its ``summary`` text written by the model."""
        if not self._llm.enabled or not messages:
            return extractive
        options = CompletionOptions(
            system_prompt=PROMPT,
            messages=[
                {
                    "role": "user",
                    "content": f"Thread topic: {thread.topic}\n\n{transcript(messages)}",
                }
            ],
            max_tokens=self._llm.short_answer_tokens(SUMMARY_TOKENS),
            temperature=0.2,
        )
        try:
            result = await self._llm.complete(options, purpose="thread_summary")
        except (OpenAIError, CostLimitExceeded) as exc:
            logger.info("thread %s summarized without the model: %s", thread.id, exc.message)
            return extractive | {"model_unavailable": str(exc.code)}
        if not result.content.strip():
            return extractive
        return extractive | {
            "summary": result.content.strip(),
            "method": "model",
            "model": result.model,
            "cost": result.cost,
        }
