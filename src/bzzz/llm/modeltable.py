"""Which request rules a model follows: OpenAI's reasoning models are not its chat models.

Reasoning models (the ``gpt-5`` family, ``o1``/``o3``/``o4``) refuse ``max_tokens`` and any
``temperature`` or ``top_p`` but the default (HTTP 400): they get ``max_completion_tokens`` and,
when configured, ``reasoning_effort``. Chat models (``gpt-4o``, ``gpt-4.1``, Ollama, vLLM) get
the temperature and ``openai.max_tokens_param`` as before. The table ships with the prices
(``pricing.json``, ``model_kinds``) and ``[openai.model_kinds]`` overrides or extends it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from enum import StrEnum
from importlib import resources
from typing import Any

from bzzz.config import OpenAISettings
from bzzz.llm.types import ModelRequest

# A reasoning model spends completion tokens on reasoning before it writes: a short answer
# asked with a budget of a few tokens would come back empty (finish_reason "length").
REASONING_MIN_TOKENS = 1_024


class ModelKind(StrEnum):
    """The two families of request rules."""

    REASONING = "reasoning"
    CHAT = "chat"


def shipped_kinds() -> dict[str, str]:
    """The ``model_kinds`` table shipped in ``pricing.json``."""
    text = resources.files("bzzz.llm").joinpath("pricing.json").read_text(encoding="utf-8")
    table: dict[str, str] = json.loads(text).get("model_kinds", {})
    return dict(table)


def _matches(name: str, model: str) -> bool:
    # "gpt-5" covers "gpt-5-mini" and "gpt-5.1", not "gpt-50".
    return model == name or model.startswith((name + "-", name + "."))


class ModelTable:
    """Model name -> kind, by the longest matching name; unknown models are chat models."""

    def __init__(self, overrides: Mapping[str, str] | None = None) -> None:
        self._kinds = shipped_kinds() | dict(overrides or {})

    def kind(self, model: str) -> ModelKind:
        """The rules ``model`` follows (a ``provider/`` prefix is ignored)."""
        name = model.rsplit("/", 1)[-1].lower()
        best = max((n for n in self._kinds if _matches(n, name)), key=len, default=None)
        return ModelKind(self._kinds[best]) if best else ModelKind.CHAT

    def output_budget(self, model: str, wanted: int) -> int:
        """The completion tokens to ask for a short answer of about ``wanted`` tokens."""
        if self.kind(model) is ModelKind.REASONING:
            return max(wanted, REASONING_MIN_TOKENS)
        return wanted

    def arguments(self, request: ModelRequest, settings: OpenAISettings) -> dict[str, Any]:
        """The request's body parameters as this model accepts them."""
        args: dict[str, Any] = {"model": request.model, "messages": request.messages}
        if self.kind(request.model) is ModelKind.REASONING:
            args["max_completion_tokens"] = request.max_tokens
            effort = request.reasoning_effort or settings.reasoning_effort
            if effort:
                args["reasoning_effort"] = effort
        else:
            args["temperature"] = request.temperature
            args[settings.max_tokens_param] = request.max_tokens
        if request.tools:
            args["tools"] = request.tools
        if request.response_format is not None:
            args["response_format"] = request.response_format
        return args
