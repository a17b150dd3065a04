"""A scripted OpenAI-compatible server on loopback, for tests and benchmarks.

The real ``openai`` SDK talks to it over HTTP. Each request takes the next scripted ``Step``
(or, once the script is empty, the ``responder``'s answer): a plain answer, tool calls, an HTTP
error with headers (429 + Retry-After, 500). Streaming requests get server-sent events. Every
request body is kept in ``requests`` so tests can check exactly what a model was shown.

``strict=True`` refuses what OpenAI refuses (HTTP 400 with OpenAI's error body, before any
step is taken): ``max_tokens``, or a ``temperature`` / ``top_p`` other than 1, sent to a
reasoning model; ``reasoning_effort`` sent to a chat model. ``structured_output=False`` refuses
a ``response_format`` as servers without structured output do (HTTP 400).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import socket
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from bzzz.llm import tokens
from bzzz.llm.modeltable import ModelKind, ModelTable


@dataclass(frozen=True, slots=True)
class Step:
    """One scripted answer."""

    content: str = "ok"
    tool_calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    usage: tuple[int, int] | None = None
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    model: str | None = None
    send_usage: bool = True
    error: str | None = None


Responder = Callable[[dict[str, Any]], Step]


def _default(body: dict[str, Any]) -> Step:
    return Step(content="ok")


def _invalid(message: str, param: str, code: str) -> dict[str, Any]:
    return {
        "error": {
            "message": message,
            "type": "invalid_request_error",
            "param": param,
            "code": code,
        }
    }


def openai_refusal(body: dict[str, Any], table: ModelTable | None = None) -> dict[str, Any] | None:
    """The error body OpenAI answers this request with (HTTP 400), or None when it takes it."""
    kind = (table or ModelTable()).kind(str(body.get("model") or ""))
    if kind is ModelKind.CHAT:
        if "reasoning_effort" in body:
            return _invalid(
                "Unrecognized request argument supplied: reasoning_effort",
                "reasoning_effort",
                "unsupported_parameter",
            )
        return None
    if "max_tokens" in body:
        return _invalid(
            "Unsupported parameter: 'max_tokens' is not supported with this model. "
            "Use 'max_completion_tokens' instead.",
            "max_tokens",
            "unsupported_parameter",
        )
    for name in ("temperature", "top_p"):
        if name in body and body[name] != 1:
            return _invalid(
                f"Unsupported value: '{name}' does not support {body[name]} with this model. "
                "Only the default (1) value is supported.",
                name,
                "unsupported_value",
            )
    return None


class _Quiet(uvicorn.Server):
    def capture_signals(self) -> contextlib.nullcontext[None]:  # type: ignore[override]
        # The process that embeds this server owns its signals.
        return contextlib.nullcontext()


class ScriptedModelServer:
    """An OpenAI-compatible /v1/chat/completions endpoint that answers from a script."""

    def __init__(
        self,
        responder: Responder = _default,
        *,
        strict: bool = False,
        structured_output: bool = True,
    ) -> None:
        self.responder = responder
        self.strict = strict
        self.structured_output = structured_output
        self.refused: list[dict[str, Any]] = []
        self.script: deque[Step] = deque()
        self.requests: list[dict[str, Any]] = []
        self.authorizations: list[str | None] = []  # each request's Authorization header
        self._ids = itertools.count(1)
        self._arrived = asyncio.Condition()
        self._server: _Quiet | None = None
        self._task: asyncio.Task[None] | None = None
        self.base_url = ""
        # While cleared, requests wait before answering (tests of concurrency hold them here).
        self.gate = asyncio.Event()
        self.gate.set()

    def push(self, *steps: Step) -> None:
        """Answer the next requests with these steps, in order."""
        self.script.extend(steps)

    async def start(self) -> str:
        """Listen on a free loopback port; returns the base URL (…/v1)."""
        # IPPROTO_TCP explicitly: asyncio sets TCP_NODELAY on accepted sockets only when the
        # listening socket names its protocol; without it every answer waits ~40 ms for an ACK.
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        sock.listen(128)
        sock.setblocking(False)
        app = Starlette(routes=[Route("/v1/chat/completions", self._handle, methods=["POST"])])
        config = uvicorn.Config(
            app, log_level="warning", lifespan="off", timeout_graceful_shutdown=1
        )
        self._server = _Quiet(config)
        # The socket listens already: requests wait in its backlog until uvicorn accepts them.
        self._task = asyncio.create_task(self._server.serve(sockets=[sock]))
        self.base_url = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
        return self.base_url

    async def close(self) -> None:
        """Stop serving."""
        if self._server is not None and self._task is not None:
            self._server.should_exit = True
            await self._task

    async def wait_for_requests(self, count: int) -> None:
        """Wait until ``count`` requests arrived (bound it with asyncio.timeout)."""
        async with self._arrived:
            await self._arrived.wait_for(lambda: len(self.requests) >= count)

    def prompts(self) -> list[str]:
        """Every message text of every request, for checks on what the model saw."""
        return [
            str(message.get("content") or "")
            for body in self.requests
            for message in body.get("messages", [])
        ]

    async def _handle(self, request: Request) -> Response:
        body = await request.json()
        async with self._arrived:
            self.authorizations.append(request.headers.get("authorization"))
            self.requests.append(body)
            self._arrived.notify_all()
        await self.gate.wait()
        refusal = openai_refusal(body) if self.strict else None
        if refusal is None and not self.structured_output and "response_format" in body:
            refusal = _invalid(
                "response_format is not supported by this model",
                "response_format",
                "unsupported_parameter",
            )
        if refusal is not None:
            self.refused.append(refusal)
            return JSONResponse(refusal, status_code=400)
        step = self.script.popleft() if self.script else self.responder(body)
        if step.status != 200:
            message = step.error or f"scripted {step.status}"
            error = {"error": {"message": message, "type": "scripted"}}
            return JSONResponse(error, status_code=step.status, headers=step.headers)
        model = step.model or str(body.get("model"))
        usage = _usage(step, body)
        if body.get("stream"):
            return StreamingResponse(
                self._events(step, model, usage), media_type="text/event-stream"
            )
        return JSONResponse(self._completion(step, model, usage))

    def _calls(self, step: Step) -> list[dict[str, Any]]:
        return [
            {
                "id": f"call_{next(self._ids)}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(arguments)},
            }
            for name, arguments in step.tool_calls
        ]

    def _completion(self, step: Step, model: str, usage: dict[str, int] | None) -> dict[str, Any]:
        calls = self._calls(step)
        message: dict[str, Any] = {"role": "assistant", "content": step.content or None}
        if calls:
            message["tool_calls"] = calls
        return {
            "id": f"chatcmpl-{next(self._ids)}",
            "object": "chat.completion",
            "created": 0,
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": "tool_calls" if calls else "stop",
                }
            ],
            "usage": usage,
        }

    async def _events(
        self, step: Step, model: str, usage: dict[str, int] | None
    ) -> AsyncIterator[bytes]:
        base: dict[str, Any] = {
            "id": f"chatcmpl-{next(self._ids)}",
            "object": "chat.completion.chunk",
        }
        base |= {"created": 0, "model": model}

        def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
            choice = {"index": 0, "delta": delta, "finish_reason": finish}
            return _sse(base | {"choices": [choice]})

        yield chunk({"role": "assistant", "content": ""})
        text = step.content
        for start in range(0, len(text), 8):
            yield chunk({"content": text[start : start + 8]})
        calls = self._calls(step)
        for index, call in enumerate(calls):
            arguments = call["function"]["arguments"]
            head: dict[str, Any] = {"index": index, "id": call["id"], "type": "function"}
            head["function"] = {"name": call["function"]["name"], "arguments": ""}
            yield chunk({"tool_calls": [head]})
            for start in range(0, len(arguments), 16):
                piece: dict[str, Any] = {
                    "index": index,
                    "function": {"arguments": arguments[start : start + 16]},
                }
                yield chunk({"tool_calls": [piece]})
        yield chunk({}, "tool_calls" if calls else "stop")
        if usage is not None:
            yield _sse(base | {"choices": [], "usage": usage})
        yield b"data: [DONE]\n\n"


def _sse(data: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(data).encode() + b"\n\n"


def _usage(step: Step, body: dict[str, Any]) -> dict[str, int] | None:
    if not step.send_usage:
        return None
    if step.usage is not None:
        prompt, completion = step.usage
    else:
        prompt = tokens.count_messages(body.get("messages", []))
        completion = tokens.count_text(step.content)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }
