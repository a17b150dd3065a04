"""The conversation hooks backed by the model: stances read from text, insights of a consensus.

Both stay under the cost budget (they go through ``LLMService.complete``) and both fall back to
what works without a model — no stance, extractive insights — when the model fails or a limit
refuses the call: a thread message is never lost because the model could not be asked.
"""

from __future__ import annotations

import logging

from bzzz import domain
from bzzz.conversations.hooks import ExtractiveInsights, InsightExtractor
from bzzz.errors import BzzzError
from bzzz.llm.service import LLMService
from bzzz.llm.summaries import transcript
from bzzz.llm.types import CompletionOptions

logger = logging.getLogger(__name__)

# Enough of each message to judge a stance; a long reply is decided by its opening anyway.
STANCE_CHARS = 4_000
STANCE_TOKENS = 16
STANCE_PROMPT = (
    "You label how a reply relates to the message it answers. Answer with exactly one word: "
    "'agree' if the reply agrees with or accepts the message, 'disagree' if it disagrees with, "
    "rejects or objects to it, 'none' if it takes no stance."
)
INSIGHT_TOKENS = 400
INSIGHT_PROMPT = (
    "List what this conversation between agents learnt or decided, as at most {limit} short "
    "statements, one per line, without numbering or commentary."
)
STANCES = ("agree", "disagree")


def parse_stance(answer: str) -> str | None:
    """The stance a model's answer names, or None when it names none (or something else)."""
    words = answer.strip().lower().split()
    word = words[0].strip(" .,:;!'\"*`") if words else ""
    return word if word in STANCES else None


class ModelStanceClassifier:
    """Asks the model whether a reply agrees or disagrees; no stance when it cannot say."""

    def __init__(self, llm: LLMService) -> None:
        self._llm = llm

    async def classify(self, text: str, target: str) -> str | None:
        """'agree', 'disagree', or None (no stance, no model, or the model failed)."""
        if not self._llm.enabled or not text.strip() or not target.strip():
            return None
        options = CompletionOptions(
            system_prompt=STANCE_PROMPT,
            messages=[
                {
                    "role": "user",
                    "content": f"Message:\n{target[:STANCE_CHARS]}\n\n"
                    f"Reply:\n{text[:STANCE_CHARS]}",
                }
            ],
            max_tokens=self._llm.short_answer_tokens(STANCE_TOKENS),
            temperature=0.0,
        )
        try:
            result = await self._llm.complete(options, purpose="stance")
        except BzzzError as exc:
            # A refused or failed call (limit, endpoint down): the reply simply takes no stance.
            logger.info("stance not classified: %s", exc.message)
            return None
        return parse_stance(result.content)


class ModelInsights:
    """The insights of a SLURP event written by the model; extractive ones when it cannot."""

    def __init__(self, llm: LLMService, limit: int = 5) -> None:
        self._llm = llm
        self._limit = limit
        self._fallback: InsightExtractor = ExtractiveInsights(limit)

    async def insights(self, thread: domain.Thread, messages: list[domain.Message]) -> list[str]:
        """Decisions first, then what the model draws from the transcript, without repeats."""
        decisions = [str(e["text"]) for e in thread.decision_log if e.get("text")]
        if not self._llm.enabled or not messages:
            return await self._fallback.insights(thread, messages)
        options = CompletionOptions(
            system_prompt=INSIGHT_PROMPT.format(limit=self._limit),
            messages=[
                {
                    "role": "user",
                    "content": f"Thread topic: {thread.topic}\n\n{transcript(messages)}",
                }
            ],
            max_tokens=self._llm.short_answer_tokens(INSIGHT_TOKENS),
            temperature=0.2,
        )
        try:
            result = await self._llm.complete(options, purpose="insights")
        except BzzzError as exc:
            logger.info(
                "insights of thread %s extracted without the model: %s", thread.id, exc.message
            )
            return await self._fallback.insights(thread, messages)
        drawn = [line.strip(" -*•\t") for line in result.content.splitlines()]
        found = list(dict.fromkeys([*decisions, *(line for line in drawn if line)]))
        if len(found) == len(decisions):
            return await self._fallback.insights(thread, messages)
        return found[: self._limit]
