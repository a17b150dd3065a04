"""One piece of a hosted agent's work with the model: ask, run the tools it calls, ask again.

Shared by tasks, collaborations and thread replies, so that every model call of a hosted agent
goes through ``LLMService.complete`` (the cost limits) and the same tool loop. It also keeps the
figures of context compression: the tokens a prompt had and the tokens it was sent with.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bzzz.llm import tokens
from bzzz.llm.optimizer import CostOptimizer
from bzzz.llm.service import LLMService
from bzzz.llm.tools import ToolBox
from bzzz.llm.types import ChatMessage, CompletionOptions, CompletionResult, DeltaHandler


@dataclass(slots=True)
class Outcome:
    """What a piece of work's model calls added up to."""

    content: str = ""
    model: str = ""
    finish_reason: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_nanos: int = 0
    calls: int = 0
    tool_calls: list[str] = field(default_factory=list)

    def add(self, result: CompletionResult) -> None:
        """Count one model call."""
        self.content, self.model, self.finish_reason = (
            result.content,
            result.model,
            result.finish_reason,
        )
        self.prompt_tokens += result.usage.prompt_tokens
        self.completion_tokens += result.usage.completion_tokens
        self.cost_nanos += result.cost_nanos
        self.calls += 1

    def absorb(self, other: Outcome) -> None:
        """Add another piece's calls (its content becomes this one's)."""
        self.content, self.model, self.finish_reason = (
            other.content,
            other.model,
            other.finish_reason,
        )
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.cost_nanos += other.cost_nanos
        self.calls += other.calls
        self.tool_calls += other.tool_calls

    def to_json(self, task_type: str) -> dict[str, Any]:
        """The result posted back (the seed's CompletionResult, summed over the task's calls)."""
        return {
            "task_type": task_type,
            "content": self.content,
            "model": self.model,
            "finishReason": self.finish_reason,
            "usage": {
                "promptTokens": self.prompt_tokens,
                "completionTokens": self.completion_tokens,
                "totalTokens": self.prompt_tokens + self.completion_tokens,
            },
            "cost": self.cost_nanos / 1e9,
            "model_calls": self.calls,
            "tool_calls": self.tool_calls,
        }


@dataclass(slots=True)
class ContextStats:
    """Prompt tokens before and after the optimizer compressed them (collaborative prompts)."""

    prompts: int = 0
    compressed: int = 0
    raw_tokens: int = 0
    sent_tokens: int = 0
    # The same, over the prompts the optimizer did compress.
    compressed_raw_tokens: int = 0
    compressed_sent_tokens: int = 0

    def count(self, before: list[ChatMessage], after: list[ChatMessage]) -> None:
        """Count one prompt."""
        raw, sent = tokens.count_messages(before), tokens.count_messages(after)
        self.prompts += 1
        self.raw_tokens += raw
        self.sent_tokens += sent
        if len(after) < len(before):
            self.compressed += 1
            self.compressed_raw_tokens += raw
            self.compressed_sent_tokens += sent

    def to_json(self) -> dict[str, Any]:
        """For the runtime's status and the benchmark."""
        return {
            "prompts": self.prompts,
            "compressed_prompts": self.compressed,
            "raw_tokens": self.raw_tokens,
            "sent_tokens": self.sent_tokens,
            "compressed_raw_tokens": self.compressed_raw_tokens,
            "compressed_sent_tokens": self.compressed_sent_tokens,
            "reduction": _saved(self.raw_tokens, self.sent_tokens),
            "reduction_when_compressed": _saved(
                self.compressed_raw_tokens, self.compressed_sent_tokens
            ),
        }


def _saved(raw: int, sent: int) -> float:
    return round(1 - sent / raw, 4) if raw else 0.0


class ModelTurns:
    """The tool loop: at most ``max_tool_rounds`` rounds of tool calls, then an answer."""

    def __init__(self, llm: LLMService, optimizer: CostOptimizer, max_tool_rounds: int) -> None:
        self._llm = llm
        self._optimizer = optimizer
        self.max_tool_rounds = max_tool_rounds
        self.context = ContextStats()

    def fit(self, messages: list[ChatMessage]) -> list[ChatMessage]:
        """The messages compressed past the budget, counted in ``context``."""
        fitted, _ = self._optimizer.fit(messages)
        self.context.count(messages, fitted)
        return fitted

    async def run(
        self,
        agent_id: str,
        options: CompletionOptions,
        toolbox: ToolBox,
        *,
        purpose: str,
        tool_results: list[str] | None = None,
        on_delta: DeltaHandler | None = None,
    ) -> Outcome:
        """Ask, run the tools the model calls, ask again."""
        outcome = Outcome()
        messages = list(options.messages)
        for round_ in range(self.max_tool_rounds + 1):
            last = round_ == self.max_tool_rounds
            options.messages = messages
            options.tools = [] if last else toolbox.specs
            result = await self._llm.complete(
                options, agent_id=agent_id, purpose=purpose, on_delta=on_delta
            )
            outcome.add(result)
            if not result.tool_calls or last:
                return outcome
            messages.append(_assistant_turn(result))
            for call in result.tool_calls:
                answer = await toolbox.run(call)
                outcome.tool_calls.append(call.name)
                if tool_results is not None:
                    tool_results.append(answer)
                messages.append({"role": "tool", "tool_call_id": call.id, "content": answer})
            messages, _ = self._optimizer.fit(messages)
        return outcome


def _assistant_turn(result: CompletionResult) -> ChatMessage:
    return {
        "role": "assistant",
        "content": result.content or None,
        "tool_calls": [call.to_message() for call in result.tool_calls],
    }
