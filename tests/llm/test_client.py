"""The model client over HTTP with the real openai SDK: answers, streams, retries, the breaker."""

from __future__ import annotations

import asyncio

import pytest

from bzzz.config import OpenAISettings
from bzzz.errors import ErrorCode, OpenAIError
from bzzz.llm.breaker import BreakerState
from bzzz.llm.client import OpenAIModelClient
from bzzz.llm.modeltable import REASONING_MIN_TOKENS, ModelKind, ModelTable
from bzzz.llm.testing import ScriptedModelServer, Step
from bzzz.llm.types import ModelRequest


class Recorder:
    """Stands in for asyncio.sleep and a monotonic clock: records waits, never waits."""

    def __init__(self) -> None:
        self.waits: list[float] = []
        self.now = 1000.0

    async def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)

    def clock(self) -> float:
        return self.now


def client_for(
    server: ScriptedModelServer, recorder: Recorder, **extra: object
) -> OpenAIModelClient:
    settings = OpenAISettings.model_validate(
        {"api_key": "test-key", "base_url": server.base_url, "max_retries": 3} | extra
    )
    return OpenAIModelClient(settings, sleep=recorder.sleep, clock=recorder.clock)


def request(
    stream: bool = False, tools: list[dict[str, object]] | None = None, model: str = "gpt-5"
) -> ModelRequest:
    return ModelRequest(
        model=model,
        messages=[{"role": "user", "content": "Say hello."}],
        temperature=0.7,
        max_tokens=100,
        tools=tools or [],
        stream=stream,
    )


async def test_a_plain_answer_comes_back_with_usage_and_finish_reason(
    model_server: ScriptedModelServer,
) -> None:
    model_server.push(Step(content="Hello there.", usage=(11, 3)))
    client = client_for(model_server, Recorder())

    reply = await client.complete(request())

    assert (reply.content, reply.finish_reason, reply.model) == ("Hello there.", "stop", "gpt-5")
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens) == (11, 3)  # type: ignore[union-attr]
    [sent] = model_server.requests
    assert sent["messages"] == [{"role": "user", "content": "Say hello."}]
    assert sent["max_completion_tokens"] == 100
    assert "temperature" not in sent and "max_tokens" not in sent
    await client.close()


@pytest.mark.parametrize("model", ["gpt-5", "gpt-5-mini", "o3", "o4-mini", "o1-preview"])
async def test_a_reasoning_model_gets_only_what_openai_accepts_from_it(
    model_server: ScriptedModelServer, model: str
) -> None:
    client = client_for(
        model_server, Recorder(), reasoning_effort="low", max_tokens_param="max_tokens"
    )

    reply = await client.complete(request(model=model))

    assert reply.content == "ok"
    [sent] = model_server.requests
    assert model_server.refused == []
    assert (sent["max_completion_tokens"], sent["reasoning_effort"]) == (100, "low")
    assert not {"temperature", "top_p", "max_tokens"} & set(sent)
    await client.close()


@pytest.mark.parametrize(
    ("model", "param"),
    [("gpt-4o", "max_tokens"), ("gpt-4.1-mini", "max_tokens"), ("llama3.1:8b", "max_tokens")],
)
async def test_a_chat_model_gets_its_temperature_and_token_parameter(
    model_server: ScriptedModelServer, model: str, param: str
) -> None:
    client = client_for(model_server, Recorder(), reasoning_effort="high", max_tokens_param=param)

    await client.complete(request(model=model))

    [sent] = model_server.requests
    assert (sent["temperature"], sent[param]) == (0.7, 100)
    assert "reasoning_effort" not in sent
    await client.close()


async def test_the_settings_table_decides_what_a_model_is(
    model_server: ScriptedModelServer,
) -> None:
    client = client_for(model_server, Recorder(), model_kinds={"my-reasoner": "reasoning"})

    await client.complete(request(model="my-reasoner-7b"))

    assert "temperature" not in model_server.requests[0]
    await client.close()


async def test_the_strict_server_refuses_what_openai_refuses_and_the_error_says_why(
    model_server: ScriptedModelServer,
) -> None:
    client = client_for(model_server, Recorder(), model_kinds={"gpt-5": "chat"})

    with pytest.raises(OpenAIError) as caught:
        await client.complete(request(model="gpt-5"))

    assert caught.value.code == ErrorCode.OPENAI_ERROR
    assert "'temperature' does not support 0.7" in caught.value.message
    said = caught.value.details["provider_error"]
    assert (said["param"], said["code"]) == ("temperature", "unsupported_value")
    assert len(model_server.requests) == 1
    await client.close()


async def test_an_error_body_quoting_the_key_reaches_the_error_without_it(
    model_server: ScriptedModelServer, caplog: pytest.LogCaptureFixture
) -> None:
    model_server.push(
        Step(status=401, error="Incorrect API key provided: test-key sk-proj-abcdef123456.")
    )
    client = client_for(model_server, Recorder())

    with pytest.raises(OpenAIError) as caught:
        await client.complete(request())

    assert "Incorrect API key provided" in caught.value.message
    text = caught.value.message + str(caught.value.details) + caplog.text
    assert "test-key" not in text and "abcdef123456" not in text
    assert "Incorrect API key provided" in caplog.text
    await client.close()


async def test_a_streamed_answer_arrives_in_pieces_and_adds_up(
    model_server: ScriptedModelServer,
) -> None:
    text = "Streaming works piece by piece, and the usage comes last."
    model_server.push(Step(content=text, usage=(20, 12)))
    client = client_for(model_server, Recorder())
    pieces: list[str] = []

    async def on_delta(piece: str) -> None:
        pieces.append(piece)

    reply = await client.complete(request(stream=True), on_delta)

    assert len(pieces) > 1
    assert "".join(pieces) == reply.content == text
    assert reply.usage is not None and reply.usage.total_tokens == 32
    assert model_server.requests[0]["stream"] is True
    await client.close()


async def test_streamed_tool_calls_are_put_back_together(model_server: ScriptedModelServer) -> None:
    arguments = {
        "semantic_address": "bzzz://*:reviewer@*",
        "filter_criteria": {"availability": True},
    }
    model_server.push(Step(content="", tool_calls=[("bzzz_lookup", arguments)]))
    client = client_for(model_server, Recorder())

    reply = await client.complete(request(stream=True))

    [call] = reply.tool_calls
    assert call.name == "bzzz_lookup"
    assert call.arguments.replace(" ", "") == (
        '{"semantic_address":"bzzz://*:reviewer@*","filter_criteria":{"availability":true}}'
    )
    assert reply.finish_reason == "tool_calls"
    await client.close()


async def test_a_429_is_retried_after_the_time_the_server_asked_for(
    model_server: ScriptedModelServer,
) -> None:
    model_server.push(Step(status=429, headers={"Retry-After": "7"}), Step(content="finally"))
    recorder = Recorder()
    client = client_for(model_server, recorder)

    reply = await client.complete(request())

    assert reply.content == "finally"
    assert recorder.waits == [7.0]
    assert len(model_server.requests) == 2
    assert client.breaker.state is BreakerState.CLOSED
    await client.close()


async def test_5xx_are_retried_with_growing_backoff_until_one_succeeds(
    model_server: ScriptedModelServer,
) -> None:
    model_server.push(Step(status=500), Step(status=502), Step(status=503), Step(content="up"))
    recorder = Recorder()
    client = client_for(model_server, recorder, backoff_initial=1.0, backoff_max=60.0)

    reply = await client.complete(request())

    assert reply.content == "up"
    assert len(recorder.waits) == 3
    # Full jitter keeps each wait within [half, all] of 1, 2, 4 seconds.
    for wait, ceiling in zip(recorder.waits, (1.0, 2.0, 4.0), strict=True):
        assert ceiling / 2 <= wait <= ceiling


async def test_a_client_error_is_not_retried(model_server: ScriptedModelServer) -> None:
    model_server.push(Step(status=400))
    recorder = Recorder()
    client = client_for(model_server, recorder)

    with pytest.raises(OpenAIError) as raised:
        await client.complete(request())

    assert raised.value.code is ErrorCode.OPENAI_ERROR
    assert raised.value.details["status"] == 400
    assert len(model_server.requests) == 1 and recorder.waits == []
    await client.close()


async def test_a_run_of_500s_opens_the_circuit_and_calls_stop_reaching_the_server(
    model_server: ScriptedModelServer,
) -> None:
    model_server.push(*[Step(status=500)] * 4)
    recorder = Recorder()
    client = client_for(model_server, recorder, max_retries=5, breaker_threshold=4)

    with pytest.raises(OpenAIError):
        await client.complete(request())
    assert len(model_server.requests) == 4
    assert client.breaker.state is BreakerState.OPEN

    with pytest.raises(OpenAIError) as refused:
        await client.complete(request())
    assert "paused" in refused.value.message
    assert len(model_server.requests) == 4

    recorder.now += client.breaker.cooldown + 1
    model_server.push(Step(content="back"))
    assert (await client.complete(request())).content == "back"
    assert client.breaker.state is BreakerState.CLOSED
    await client.close()


async def test_exhausted_retries_fail_with_openai_error(model_server: ScriptedModelServer) -> None:
    model_server.push(*[Step(status=503)] * 3)
    recorder = Recorder()
    client = client_for(model_server, recorder, max_retries=2, breaker_threshold=10)

    async with asyncio.timeout(10):
        with pytest.raises(OpenAIError) as raised:
            await client.complete(request())

    assert raised.value.details["attempts"] == 3
    assert len(recorder.waits) == 2
    await client.close()


def test_a_short_answer_from_a_reasoning_model_leaves_room_for_its_reasoning() -> None:
    table = ModelTable({"local-thinker": "reasoning"})

    assert table.output_budget("gpt-5", 16) == REASONING_MIN_TOKENS
    assert table.output_budget("o4-mini", 4000) == 4000
    assert table.output_budget("local-thinker", 16) == REASONING_MIN_TOKENS
    assert table.output_budget("gpt-4o", 16) == 16
    assert table.kind("openrouter/openai/o3") is ModelKind.REASONING


@pytest.mark.parametrize("stream", [False, True])
async def test_a_local_server_without_a_key_gets_no_authorization_header(
    model_server: ScriptedModelServer, stream: bool
) -> None:
    keyless = OpenAIModelClient(OpenAISettings(base_url=model_server.base_url))
    keyed = OpenAIModelClient(OpenAISettings(base_url=model_server.base_url, api_key="test-key"))
    try:
        answered = await keyless.complete(request(stream=stream, model="llama3.1"))
        await keyed.complete(request(stream=stream, model="llama3.1"))
    finally:
        await keyless.close()
        await keyed.close()

    assert answered.content
    assert model_server.authorizations == [None, "Bearer test-key"]


def test_without_a_key_or_a_base_url_there_is_no_client() -> None:
    with pytest.raises(OpenAIError, match="no API key"):
        OpenAIModelClient(OpenAISettings())
