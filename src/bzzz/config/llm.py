"""The model endpoint (``[openai]``) and what hosted agents may spend on it (``[cost]``)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr

from bzzz.config.base import _Section


class OpenAISettings(_Section):
    """The model endpoint (any OpenAI-compatible API)."""

    api_key: SecretStr | None = None
    base_url: str | None = None
    default_model: str = "gpt-5"
    max_tokens: int = Field(4000, gt=0)
    temperature: float = Field(0.7, ge=0, le=2)
    cheap_model: str = Field("gpt-5-mini", description="model for tasks below the complexity bar")
    request_timeout: float = Field(120.0, gt=0)
    max_retries: int = Field(4, ge=0, le=20, description="retries on 429, 5xx, lost connections")
    backoff_initial: float = Field(0.5, ge=0)
    backoff_max: float = Field(30.0, ge=0)
    breaker_threshold: int = Field(5, ge=1, description="failed attempts in a row that open it")
    breaker_cooldown: float = Field(30.0, ge=0, description="seconds the breaker stays open")
    max_tool_rounds: int = Field(5, ge=0, le=50, description="tool-call rounds per task")
    max_tokens_param: Literal["max_completion_tokens", "max_tokens"] = Field(
        "max_completion_tokens",
        description="chat models only: older OpenAI-compatible servers want max_tokens",
    )
    reasoning_effort: Literal["minimal", "low", "medium", "high"] | None = Field(
        None, description="sent to reasoning models (gpt-5, o1/o3/o4) only; unset: theirs"
    )
    model_kinds: dict[str, Literal["reasoning", "chat"]] = Field(
        default_factory=dict,
        description="which request rules a model follows, over the table shipped with prices",
    )


class ModelPrice(_Section):
    """USD per million tokens."""

    input: float = Field(ge=0)
    output: float = Field(ge=0)


class CostSettings(_Section):
    """Spending limits for hosted agents (USD; a limit of 0 means no limit)."""

    daily_limit: float = Field(10.0, ge=0)
    monthly_limit: float = Field(200.0, ge=0)
    warning_threshold: float = Field(0.8, ge=0, le=1)
    pricing: dict[str, ModelPrice] = Field(
        default_factory=dict, description="per-model prices overriding the shipped table"
    )
    fallback_price: ModelPrice = Field(
        default_factory=lambda: ModelPrice(input=0.0, output=0.0),
        description="price of a model missing from the table, e.g. a local one (logged once)",
    )
    token_budget: int = Field(
        32_000, gt=0, description="tokens of context per task; past 80% old messages compress"
    )
    max_messages_before_summary: int = Field(40, gt=1)
    complexity_threshold: float = Field(
        0.3, ge=0, le=1, description="tasks below this go to openai.cheap_model"
    )
