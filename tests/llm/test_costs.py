"""Costs: limits checked before sending, the ledger on the log, warnings and refusals as events."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from decimal import Decimal
from importlib import resources
from typing import Any

import pytest
from mcp import Client

from bzzz.config import ModelPrice, Settings
from bzzz.errors import CostLimitExceeded, ErrorCode, NetworkError
from bzzz.eventlog import LOCAL_CALLER, Caller
from bzzz.llm.testing import ScriptedModelServer, Step
from bzzz.llm.types import CompletionOptions
from bzzz.mcp.server import build_server
from bzzz.network.memory import InMemoryBus
from bzzz.node.core import Node
from bzzz.schemas import AnnounceInput, SubscribeInput

from .conftest import use_model
from .support import TaskWatcher

ASK = CompletionOptions(messages=[{"role": "user", "content": "hello"}], max_tokens=50)


def shipped() -> dict[str, dict[str, float]]:
    text = resources.files("bzzz.llm").joinpath("pricing.json").read_text()
    table: dict[str, dict[str, float]] = json.loads(text)["models"]
    return table


def nanos(prompt: int, completion: int, price: dict[str, float]) -> int:
    """The cost of a call computed by hand from its usage: USD per million tokens."""
    usd = (
        Decimal(prompt) * Decimal(str(price["input"]))
        + Decimal(completion) * Decimal(str(price["output"]))
    ) / Decimal(1_000_000)
    return int((usd * Decimal(1_000_000_000)).to_integral_value())


async def subscribe(node: Node, *types: str) -> str:
    caller = Caller("watcher")
    await node.agents.announce(caller, AnnounceInput(agent_id="watcher", role="ops"))
    sub = await node.subscriptions.subscribe(
        caller, SubscribeInput(event_types=list(types)), "watcher"
    )
    subscription_id: str = sub["subscription_id"]
    return subscription_id


async def events(node: Node, subscription_id: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = (await node.subscriptions.events(LOCAL_CALLER, subscription_id))[
        "events"
    ]
    return found


@pytest.fixture
async def model_node(
    settings: Settings, model_server: ScriptedModelServer, memory_bus: InMemoryBus
) -> AsyncIterator[Node]:
    use_model(settings, model_server)
    async with Node(settings, bus=memory_bus) as node:
        yield node


async def test_the_ledger_sums_to_the_costs_computed_from_the_usage(
    settings: Settings,
    model_server: ScriptedModelServer,
    memory_bus: InMemoryBus,
    database_url: str,
) -> None:
    use_model(settings, model_server)
    settings.node.database_url = database_url
    calls = [("gpt-5", 1234, 567), ("gpt-4o-mini", 98765, 4321), ("gpt-5", 1, 1)]
    calls += [("gpt-5-mini", 77, 0), ("gpt-4o-mini", 3, 999_999)]
    model_server.push(*[Step(content="x", usage=(p, c), model=m) for m, p, c in calls])
    async with Node(settings, bus=memory_bus) as node:
        for model, _, _ in calls:
            await node.llm.complete(CompletionOptions(messages=ASK.messages, model=model))
        usage = await node.llm.usage()

    prices = shipped()
    expected = {m: 0 for m, _, _ in calls}
    for model, prompt, completion in calls:
        expected[model] += nanos(prompt, completion, prices[model])
    for period in ("daily", "monthly"):
        assert usage[period]["costNanos"] == sum(expected.values())
        assert usage[period]["apiCalls"] == len(calls)
        assert usage[period]["tokens"]["prompt"] == sum(p for _, p, _ in calls)
        assert usage[period]["tokens"]["completion"] == sum(c for _, _, c in calls)
        for model, cost in expected.items():
            assert usage[period]["models"][model]["cost"] == cost / 1e9


async def test_a_call_past_the_limit_is_refused_before_anything_is_sent(
    settings: Settings, model_server: ScriptedModelServer, memory_bus: InMemoryBus
) -> None:
    use_model(settings, model_server)
    settings.cost.daily_limit = 0.0001
    async with Node(settings, bus=memory_bus) as node:
        subscription = await subscribe(node, "limit_exceeded")
        with pytest.raises(CostLimitExceeded) as refused:
            await node.llm.complete(ASK, agent_id="watcher")
        seen = await events(node, subscription)
        usage = await node.llm.usage()

    assert refused.value.code is ErrorCode.COST_LIMIT_EXCEEDED
    assert refused.value.details["period"] == "day"
    assert model_server.requests == []
    [event] = seen
    assert event["event_type"] == "limit_exceeded"
    assert event["data"]["reason"] == "refused"
    assert event["data"]["limit_usd"] == 0.0001
    assert usage["daily"]["apiCalls"] == 0


async def test_crossing_the_warning_threshold_is_a_cost_warning_event_once(
    settings: Settings, model_server: ScriptedModelServer, memory_bus: InMemoryBus
) -> None:
    use_model(settings, model_server)
    # gpt-5 output costs $10 per million: 10,000 tokens cost $0.10 of a $1.00 monthly limit.
    settings.cost.daily_limit = 0
    settings.cost.monthly_limit = 1.0
    settings.cost.warning_threshold = 0.25
    model_server.push(*[Step(content="x", usage=(0, 10_000))] * 4)
    async with Node(settings, bus=memory_bus) as node:
        subscription = await subscribe(node, "cost_warning", "limit_exceeded")
        for _ in range(4):
            await node.llm.complete(ASK)
        seen = await events(node, subscription)

    assert [e["event_type"] for e in seen] == ["cost_warning"]
    data = seen[0]["data"]
    assert (data["period"], data["spent_usd"], data["limit_usd"]) == ("month", 0.3, 1.0)


async def test_a_hosted_agent_at_its_limit_escalates_the_task_back(
    llm_settings: Settings, model_server: ScriptedModelServer, memory_bus: InMemoryBus
) -> None:
    llm_settings.cost.daily_limit = 0.000001
    async with Node(llm_settings, bus=memory_bus) as node:
        watcher = TaskWatcher(node)
        server, _ = build_server(node)
        async with Client(server, mode="legacy") as boss:
            await boss.call_tool("bzzz_announce", {"agent_id": "boss", "role": "lead"})
            posted = await boss.call_tool(
                "bzzz_post",
                {
                    "target_address": "bzzz://rev-1",
                    "message_type": "task_assignment",
                    "content": {
                        "task_type": "code_review",
                        "task_data": {"code": "x = 1", "language": "python"},
                    },
                },
            )
            assert posted.structured_content is not None
            task_id = posted.structured_content["tasks"]["rev-1"]
            async with asyncio.timeout(10):
                assert await watcher.finished(task_id) == "failed"
            inbox = await boss.call_tool("bzzz_get", {"address": "bzzz://boss/inbox"})
        reviewer = node.hosted.hosted["rev-1"]

    assert inbox.structured_content is not None
    [failed] = [
        m
        for m in inbox.structured_content["content"]["messages"]
        if m["message_type"] == "task_failed"
    ]
    assert failed["content"]["code"] == "COST_LIMIT_EXCEEDED"
    assert failed["content"]["escalated"] is True
    assert "escalating" in reviewer.lifecycle.history
    assert model_server.requests == []


async def test_a_model_without_a_price_costs_nothing_and_is_named_once_in_the_log(
    model_node: Node, model_server: ScriptedModelServer, caplog: pytest.LogCaptureFixture
) -> None:
    model_server.push(
        Step(content="x", usage=(1_000_000, 1_000_000), model="llama3.1"),
        Step(content="y", usage=(1_000_000, 0), model="llama3.1"),
    )
    options = CompletionOptions(messages=ASK.messages, model="llama3.1")
    with caplog.at_level(logging.WARNING, logger="bzzz.llm.pricing"):
        first = await model_node.llm.complete(options)
        second = await model_node.llm.complete(options)

    assert (first.cost, second.cost) == (0, 0)
    named = [r for r in caplog.records if "llama3.1" in r.getMessage()]
    assert len(named) == 1 and "no price for model llama3.1" in named[0].getMessage()


async def test_a_configured_fallback_price_is_what_an_unpriced_model_costs(
    settings: Settings, model_server: ScriptedModelServer, memory_bus: InMemoryBus
) -> None:
    use_model(settings, model_server)
    settings.cost.fallback_price = ModelPrice(input=10.0, output=30.0)
    model_server.push(Step(content="x", usage=(1_000_000, 0), model="local-llama"))
    async with Node(settings, bus=memory_bus) as node:
        result = await node.llm.complete(
            CompletionOptions(messages=ASK.messages, model="local-llama")
        )

    assert result.cost == 10.0


async def test_prices_in_the_settings_override_the_shipped_table(
    settings: Settings, model_server: ScriptedModelServer, memory_bus: InMemoryBus
) -> None:
    use_model(settings, model_server)
    settings.cost.pricing = {"gpt-5": ModelPrice(input=2.0, output=0.0)}
    model_server.push(Step(content="x", usage=(500_000, 100)))
    async with Node(settings, bus=memory_bus) as node:
        result = await node.llm.complete(ASK)

    assert result.cost == 1.0


async def test_the_costs_resource_shows_usage_and_limits(
    model_node: Node, model_server: ScriptedModelServer
) -> None:
    model_server.push(Step(content="x", usage=(1000, 1000)))
    await model_node.llm.complete(ASK)
    server, _ = build_server(model_node)
    async with Client(server, mode="legacy") as client:
        listed = await client.list_resources()
        read = await client.read_resource("bzzz://costs")

    assert "bzzz://costs" in [str(r.uri) for r in listed.resources]
    usage = json.loads(read.contents[0].text)  # type: ignore[union-attr]
    assert usage["daily"]["apiCalls"] == 1
    assert usage["daily"]["models"]["gpt-5"] == {"calls": 1, "cost": 0.01125, "tokens": 2000}
    assert usage["limits"] == {"dailyLimit": 10.0, "monthlyLimit": 200.0, "warningThreshold": 0.8}
    assert usage["model_access"]["enabled"] is True


async def test_without_an_api_key_hosted_agents_stay_off_and_the_rest_works(
    settings: Settings, memory_bus: InMemoryBus, caplog: pytest.LogCaptureFixture
) -> None:
    settings.agents.default_roles = [{"role": "reviewer", "agent_id": "rev-1"}]
    with caplog.at_level(logging.WARNING, logger="bzzz.llm.runtime"):
        async with Node(settings, bus=memory_bus) as node:
            await node.agents.announce(Caller("me"), AnnounceInput(agent_id="me", role="lead"))
            status = node.status()["hosted_agents"]
            usage = await node.llm.usage()
            assert node.agents.directory.get("rev-1") is None

    assert status["enabled"] is False
    assert "API key" in status["reason"]
    assert "hosted agents are off" in caplog.text
    assert usage["model_access"]["enabled"] is False


class FlakyLog:
    """The node's log, failing ``cost.recorded`` emits as told (the network drops out)."""

    def __init__(self, log: Any, failures: list[str]) -> None:
        # Each failure: "stored" (the log took it but answered too late) or "lost".
        self._log = log
        self.failures = failures
        self.call_ids: list[str] = []
        self.node_id = log.node_id
        self.network = log.network
        self.clock = log.clock

    async def emit(
        self, type_: str, kind: str, key: str, payload: dict[str, Any], **kw: Any
    ) -> Any:
        if type_ == "cost.recorded":
            self.call_ids.append(payload["call_id"])
            if self.failures:
                failure = self.failures.pop(0)
                if failure == "stored":
                    await self._log.emit(type_, kind, key, payload, **kw)
                raise NetworkError("the network stored the change but this node has not applied it")
        return await self._log.emit(type_, kind, key, payload, **kw)


def flaky(node: Node, monkeypatch: pytest.MonkeyPatch, *failures: str) -> FlakyLog:
    log = FlakyLog(node.log, list(failures))
    monkeypatch.setattr(node.llm.costs, "_log", log)
    node.llm.costs.booking_delays = (0.0, 0.0)
    return log


async def test_a_booking_the_network_answers_late_keeps_the_answer_and_one_ledger_row(
    model_node: Node, model_server: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = flaky(model_node, monkeypatch, "stored", "lost")
    model_server.push(Step(content="the answer", usage=(1000, 100)))
    result = await model_node.llm.complete(ASK)
    usage = await model_node.llm.usage()

    assert result.content == "the answer"
    # Retried with the same call id: the ledger keeps the call once.
    assert len(log.call_ids) == 3 and len(set(log.call_ids)) == 1
    assert usage["daily"]["apiCalls"] == 1
    assert usage["daily"]["costNanos"] == result.cost_nanos
    assert await model_node.llm.costs.spent() == (result.cost_nanos, result.cost_nanos)


async def test_a_call_the_log_cannot_book_counts_against_the_limits_and_is_booked_later(
    model_node: Node, model_server: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = flaky(model_node, monkeypatch, "lost", "lost", "lost")
    model_server.push(
        Step(content="paid for", usage=(1000, 100)), Step(content="later", usage=(10, 10))
    )
    first = await model_node.llm.complete(ASK)
    unbooked = await model_node.llm.usage()
    spent = await model_node.llm.costs.spent()
    second = await model_node.llm.complete(ASK)
    booked = await model_node.llm.usage()

    assert first.content == "paid for"
    assert unbooked["daily"]["apiCalls"] == 0
    assert spent == (first.cost_nanos, first.cost_nanos)
    assert second.content == "later"
    assert booked["daily"]["apiCalls"] == 2
    assert booked["daily"]["costNanos"] == first.cost_nanos + second.cost_nanos
    assert len(set(log.call_ids)) == 2
