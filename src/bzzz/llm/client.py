"""Model access over any OpenAI-compatible API: retries, Retry-After, a circuit breaker, streams.

This module imports the ``openai`` SDK (~0.4 s): only a node with a model endpoint loads it.

The SDK's own retries are off (``max_retries=0``): this module retries instead, so that every
attempt is seen by the circuit breaker and a server's Retry-After is honoured exactly.
"""

from __future__ import annotations

import asyncio
import dataclasses
import email.utils
import logging
import re
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import openai

from bzzz.backoff import backoff
from bzzz.config import OpenAISettings
from bzzz.errors import OpenAIError
from bzzz.llm.breaker import CircuitBreaker
from bzzz.llm.modeltable import ModelTable
from bzzz.llm.types import DeltaHandler, ModelReply, ModelRequest, TokenUsage, ToolCall
from bzzz.privacy.redact import redact_messages

logger = logging.getLogger(__name__)

Sleep = Callable[[float], Awaitable[None]]

MAX_RETRY_AFTER = 300.0
# The SDK wants some key to build a client; without a configured one (a local server such as
# Ollama or vLLM at ``openai.base_url``) this stands in, and no Authorization header is sent.
KEYLESS = "no-key"


class _Retryable(Exception):
    """An attempt failed in a way worth another try."""

    def __init__(self, reason: str, retry_after: float | None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry_after = retry_after


def retry_after(headers: Any) -> float | None:
    """Seconds a server asked us to wait (``retry-after-ms``, ``retry-after``: seconds or date)."""
    if headers is None:
        return None
    millis = headers.get("retry-after-ms")
    if millis:
        try:
            return min(max(float(millis) / 1000, 0.0), MAX_RETRY_AFTER)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        seconds = (when - datetime.now(UTC)).total_seconds()
    return min(max(seconds, 0.0), MAX_RETRY_AFTER)


_KEY_LIKE = re.compile(r"\b(sk|rk)-[A-Za-z0-9_*.-]{6,}")
ERROR_BODY_CHARS = 1_000


def provider_error(exc: openai.APIStatusError, secrets: tuple[str, ...] = ()) -> dict[str, Any]:
    """What the provider said about a refused request (message, type, param, code), keyless.

    An authentication error quotes (part of) the key it was sent: every key-like word and the
    configured key itself are masked before the text reaches a log or a task's error.
    """
    body = exc.body if isinstance(exc.body, dict) else {}
    message = str(body.get("message") or exc.message or "")
    for secret in secrets:
        if secret:
            message = message.replace(secret, "***")
    found = {"message": _KEY_LIKE.sub(lambda m: f"{m.group(1)}-***", message)[:ERROR_BODY_CHARS]}
    for name in ("type", "param", "code"):
        value = body.get(name)
        if isinstance(value, str | int) and not isinstance(value, bool):
            found[name] = str(value)[:200]
    return found


def _classify(exc: Exception, secrets: tuple[str, ...] = ()) -> _Retryable | OpenAIError:
    """A failed attempt: retryable (429, 5xx, connection) or final (other statuses)."""
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        if status == 429 or status >= 500:
            return _Retryable(f"HTTP {status}", retry_after(exc.response.headers))
        said = provider_error(exc, secrets)
        logger.warning("the model endpoint refused a request (HTTP %s): %s", status, said)
        return OpenAIError(
            f"the model endpoint refused the request (HTTP {status}): {said['message']}",
            details={"status": status, "provider_error": said},
        )
    if isinstance(exc, openai.APIConnectionError):
        return _Retryable("connection failed", None)
    return OpenAIError("the model endpoint sent an answer that could not be read")


class OpenAIModelClient:
    """ModelClient over ``openai.AsyncOpenAI``."""

    def __init__(
        self,
        settings: OpenAISettings,
        *,
        sleep: Sleep = asyncio.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        key = settings.api_key.get_secret_value() if settings.api_key is not None else None
        if not key and settings.base_url is None:
            raise OpenAIError("no API key configured (and no base_url of a local server)")
        self._settings = settings
        self.models = ModelTable(settings.model_kinds)
        self._secrets = (key,) if key else ()
        # Keyless: every request omits the Authorization header (the SDK's explicit opt-out).
        self._headers: dict[str, Any] = {} if key else {"Authorization": openai.Omit()}
        self._client = openai.AsyncOpenAI(
            api_key=key or KEYLESS,
            base_url=settings.base_url,
            max_retries=0,
            timeout=settings.request_timeout,
        )
        self._sleep = sleep
        self.breaker = CircuitBreaker(settings.breaker_threshold, settings.breaker_cooldown, clock)
        self.attempts = 0
        self.retries = 0
        self.redact = True  # privacy.redact_models: PII masked in every request's messages

    async def close(self) -> None:
        """Close the HTTP connections."""
        await self._client.close()

    async def complete(
        self, request: ModelRequest, on_delta: DeltaHandler | None = None
    ) -> ModelReply:
        """Send the request, retrying 429/5xx/connection failures with exponential backoff."""
        if self.redact:  # in a thread: ~1-5 ms per KB of prompt, and Presidio loads on first use
            masked = await asyncio.to_thread(redact_messages, request.messages)
            request = dataclasses.replace(request, messages=masked)
        attempt = 0
        while True:
            self.breaker.check()
            self.attempts += 1
            streamed: list[str] = []
            try:
                reply = await self._once(request, on_delta, streamed)
            except (openai.APIError, ValueError, KeyError, TypeError) as exc:
                failure = _classify(exc, self._secrets)
                if isinstance(failure, OpenAIError):
                    raise failure from exc
                self.breaker.failure()
                # Text already handed on cannot be taken back: a broken stream is final.
                if attempt >= self._settings.max_retries or streamed:
                    raise OpenAIError(
                        f"the model endpoint failed ({failure.reason}) after {attempt + 1} "
                        "attempts",
                        details={"attempts": attempt + 1, "last": failure.reason},
                    ) from exc
                delay = self._delay(attempt, failure.retry_after)
                logger.info("model call failed (%s); retry in %.2fs", failure.reason, delay)
                attempt += 1
                self.retries += 1
                await self._sleep(delay)
                continue
            self.breaker.success()
            return reply

    def _delay(self, attempt: int, asked: float | None) -> float:
        if asked is not None:
            return asked
        # Jitter spreads the retries of many agents hit by the same outage.
        s = self._settings
        return backoff(attempt, s.backoff_initial, s.backoff_max, jitter=True)

    def _arguments(self, request: ModelRequest) -> dict[str, Any]:
        return self.models.arguments(request, self._settings)

    async def _once(
        self, request: ModelRequest, on_delta: DeltaHandler | None, streamed: list[str]
    ) -> ModelReply:
        create: Any = self._client.chat.completions.create
        args = self._arguments(request) | {"extra_headers": self._headers}
        if not request.stream:
            return _reply(await create(**args), request.model)
        stream = await create(**args, stream=True, stream_options={"include_usage": True})
        return await _collect(stream, request.model, on_delta, streamed)


def _usage(raw: Any) -> TokenUsage | None:
    if raw is None:
        return None
    return TokenUsage(int(raw.prompt_tokens or 0), int(raw.completion_tokens or 0))


def _reply(response: Any, requested: str) -> ModelReply:
    if not response.choices:
        raise ValueError("no choices in the answer")
    choice = response.choices[0]
    message = choice.message
    calls = [
        ToolCall(str(c.id), str(c.function.name), str(c.function.arguments or "{}"))
        for c in (message.tool_calls or [])
        if getattr(c, "function", None) is not None
    ]
    return ModelReply(
        content=str(message.content or ""),
        model=str(response.model or requested),
        finish_reason=str(choice.finish_reason or "stop"),
        usage=_usage(response.usage),
        tool_calls=calls,
    )


async def _collect(
    stream: Any, requested: str, on_delta: DeltaHandler | None, streamed: list[str]
) -> ModelReply:
    model, finish, usage = requested, "stop", None
    calls: dict[int, dict[str, str]] = {}
    async for chunk in stream:
        model = str(chunk.model or model)
        usage = _usage(chunk.usage) or usage
        for choice in chunk.choices or []:
            finish = str(choice.finish_reason or finish)
            delta = choice.delta
            if delta is None:
                continue
            if delta.content:
                streamed.append(delta.content)
                if on_delta is not None:
                    await on_delta(delta.content)
            for part in delta.tool_calls or []:
                _merge_call(calls.setdefault(int(part.index), {}), part)
    tool_calls = [
        ToolCall(c.get("id", f"call_{i}"), c.get("name", ""), c.get("arguments") or "{}")
        for i, c in sorted(calls.items())
    ]
    return ModelReply("".join(streamed), model, finish, usage, tool_calls)


def _merge_call(into: dict[str, str], part: Any) -> None:
    # A streamed tool call arrives in pieces: id and name once, the arguments in fragments.
    if part.id:
        into["id"] = str(part.id)
    function = part.function
    if function is not None:
        if function.name:
            into["name"] = into.get("name", "") + str(function.name)
        if function.arguments:
            into["arguments"] = into.get("arguments", "") + str(function.arguments)
