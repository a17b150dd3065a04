"""LLMService: one way to ask the model, with limits checked first and every call booked."""

from __future__ import annotations

import json
import logging
from typing import Any

from bzzz.audit.model import audited_model_call
from bzzz.audit.trail import AuditTrail
from bzzz.config import Settings
from bzzz.errors import OpenAIError
from bzzz.eventlog import EventLog
from bzzz.llm import tokens
from bzzz.llm.costs import CostTracker
from bzzz.llm.modeltable import ModelTable
from bzzz.llm.pricing import NANOS_PER_USD, PriceTable
from bzzz.llm.types import (
    ChatMessage,
    CompletionOptions,
    CompletionResult,
    DeltaHandler,
    ModelClient,
    ModelRequest,
    TokenUsage,
)
from bzzz.store.database import Database

logger = logging.getLogger(__name__)

NO_KEY = (
    "no OpenAI API key or base URL configured (set BZZZ_OPENAI_API_KEY, or "
    "BZZZ_OPENAI_BASE_URL for a local server that needs no key)"
)


class LLMService:
    """Completions under the cost budget; ``enabled`` is False without a key or a base URL."""

    # Where each model call is recorded, sent or refused (bzzz.audit); the node sets it.
    audit: AuditTrail | None = None

    def __init__(
        self,
        settings: Settings,
        db: Database,
        log: EventLog,
        client: ModelClient | None = None,
    ) -> None:
        self.settings = settings
        self.costs = CostTracker(db, log, settings.cost, PriceTable(settings.cost))
        endpoint = settings.openai
        if client is None and (endpoint.api_key is not None or endpoint.base_url is not None):
            # The SDK loads only here, on a node with a model endpoint.
            from bzzz.llm.client import OpenAIModelClient

            client = OpenAIModelClient(settings.openai)
            client.redact = settings.privacy.redact_models
        self.client = client
        self.disabled_reason = None if client is not None else NO_KEY
        self.models = ModelTable(settings.openai.model_kinds)

    def short_answer_tokens(self, wanted: int, model: str | None = None) -> int:
        """The token budget of a short answer (the hooks' stances, insights, summaries)."""
        return self.models.output_budget(model or self.settings.openai.default_model, wanted)

    @property
    def enabled(self) -> bool:
        """A model endpoint is configured."""
        return self.client is not None

    async def close(self) -> None:
        """Close the endpoint's connections."""
        if self.client is not None:
            await self.client.close()

    def request(self, options: CompletionOptions) -> ModelRequest:
        """Resolve the options against the settings' defaults."""
        defaults = self.settings.openai
        messages: list[ChatMessage] = []
        if options.system_prompt:
            messages.append({"role": "system", "content": options.system_prompt})
        messages.extend(options.messages)
        return ModelRequest(
            model=options.model or defaults.default_model,
            messages=messages,
            temperature=defaults.temperature
            if options.temperature is None
            else options.temperature,
            max_tokens=options.max_tokens or defaults.max_tokens,
            tools=list(options.tools),
            stream=options.stream,
            reasoning_effort=options.reasoning_effort,
            response_format=options.response_format,
        )

    @audited_model_call
    async def complete(
        self,
        options: CompletionOptions,
        *,
        agent_id: str | None = None,
        purpose: str = "task",
        on_delta: DeltaHandler | None = None,
    ) -> CompletionResult:
        """Ask the model; refused before sending when a cost limit would be passed."""
        if self.client is None:
            raise OpenAIError(NO_KEY)
        request = self.request(options)
        prompt_estimate = tokens.count_messages(request.messages) + _tools_tokens(request.tools)
        estimate = self.costs.estimate(request.model, prompt_estimate, request.max_tokens)
        reservation = await self.costs.reserve(request.model, estimate, agent_id)
        try:
            reply = await self.client.complete(request, on_delta)
            usage, estimated = reply.usage, False
            if usage is None:
                # Some local servers send no usage: book the offline estimate rather than nothing.
                usage = TokenUsage(prompt_estimate, tokens.count_text(reply.content))
                estimated = True
            cost = await self.costs.record(reply.model, usage, agent_id, purpose)
        finally:
            # Held until booked: a call in between must see this one's cost one way or the other.
            self.costs.release(reservation)
        return CompletionResult(
            content=reply.content,
            usage=usage,
            model=reply.model,
            finish_reason=reply.finish_reason,
            cost=cost / NANOS_PER_USD,
            cost_nanos=cost,
            tool_calls=reply.tool_calls,
            usage_estimated=estimated,
        )

    async def usage(self, *, node_only: bool = True) -> dict[str, Any]:
        """The CostUsage of today and this month, with the limits and the endpoint's state."""
        usage = await self.costs.usage(node_only=node_only)
        usage["model_access"] = {
            "enabled": self.enabled,
            "reason": self.disabled_reason,
            "default_model": self.settings.openai.default_model,
        }
        breaker = getattr(self.client, "breaker", None)
        if breaker is not None:
            usage["model_access"]["circuit"] = str(breaker.state)
        return usage


def _tools_tokens(tools: list[dict[str, Any]]) -> int:
    return tokens.count_text(json.dumps(tools)) if tools else 0
