"""The seed's completion shapes: CompletionOptions in, CompletionResult out."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

ChatMessage = dict[str, Any]

# The task types hosted agents handle (one list: the WHOOSH route and the metrics use it too).
TASK_TYPES = ("chat_completion", "code_review", "documentation", "architecture_analysis")


@dataclass(frozen=True, slots=True)
class TokenUsage:
    """Tokens a call used."""

    prompt_tokens: int
    completion_tokens: int

    @property
    def total_tokens(self) -> int:
        """Prompt plus completion."""
        return self.prompt_tokens + self.completion_tokens

    def to_json(self) -> dict[str, int]:
        """The reference's TokenUsage."""
        return {
            "promptTokens": self.prompt_tokens,
            "completionTokens": self.completion_tokens,
            "totalTokens": self.total_tokens,
        }


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A function the model asked to call."""

    id: str
    name: str
    arguments: str

    def to_message(self) -> dict[str, Any]:
        """The call as the assistant message carries it back to the model."""
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments},
        }


@dataclass(slots=True)
class CompletionOptions:
    """What to ask (the seed's CompletionOptions); unset fields take the settings' defaults."""

    messages: list[ChatMessage] = field(default_factory=list)
    model: str | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    system_prompt: str | None = None
    tools: list[dict[str, Any]] = field(default_factory=list)
    stream: bool = False
    reasoning_effort: str | None = None
    # Structured output (``{"type": "json_schema", ...}``); endpoints without it refuse it.
    response_format: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class ModelRequest:
    """One request as sent to the endpoint (defaults resolved)."""

    model: str
    messages: list[ChatMessage]
    temperature: float
    max_tokens: int
    tools: list[dict[str, Any]]
    stream: bool
    reasoning_effort: str | None = None
    response_format: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class ModelReply:
    """What the endpoint answered."""

    content: str
    model: str
    finish_reason: str
    usage: TokenUsage | None
    tool_calls: list[ToolCall] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class CompletionResult:
    """The seed's CompletionResult (content, usage, model, finish reason, cost) plus tool calls."""

    content: str
    usage: TokenUsage
    model: str
    finish_reason: str
    cost: float
    cost_nanos: int
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage_estimated: bool = False

    def to_json(self) -> dict[str, Any]:
        """The result as tools and messages show it."""
        return {
            "content": self.content,
            "usage": self.usage.to_json(),
            "model": self.model,
            "finishReason": self.finish_reason,
            "cost": self.cost,
        }


DeltaHandler = Callable[[str], Awaitable[None]]


class ModelClient(Protocol):
    """Sends one chat completion request and returns the reply."""

    async def complete(
        self, request: ModelRequest, on_delta: DeltaHandler | None = None
    ) -> ModelReply:
        """One completion; ``on_delta`` receives streamed text when ``request.stream``."""
        ...

    async def close(self) -> None:
        """Release connections."""
        ...
