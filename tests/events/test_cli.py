"""`bzzz subscriptions list|delete` and `bzzz webhooks redrive`, beside a running node or not."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager

import httpx
import pytest

from bzzz.cli import main
from bzzz.config import Settings
from bzzz.eventlog import Caller
from bzzz.node.core import Node
from bzzz.schemas import SubscribeInput

from .conftest import ReceiverFactory
from .test_webhooks import FAST, announce, drive_until, subscribe_webhook

DrivenNode = Callable[..., AbstractAsyncContextManager[Node]]


async def bzzz(settings: Settings, *args: str) -> int:
    code: int = await asyncio.to_thread(main, ["--data-dir", str(settings.node.data_dir), *args])
    return code


async def make_subscriptions(node: Node) -> tuple[str, str]:
    hooked = await node.subscriptions.subscribe(
        Caller("owner"),
        SubscribeInput(event_types=["thread_created"], callback_webhook="https://example.com/h"),
    )
    plain = await node.subscriptions.subscribe(
        Caller("owner"), SubscribeInput(event_types=["agent_announcement"])
    )
    return hooked["subscription_id"], plain["subscription_id"]


@pytest.mark.integration
async def test_subscriptions_are_listed_and_deleted_beside_a_running_node(
    settings: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    async with Node(settings) as node:  # the embedded nats-server: the CLI joins it
        hooked, plain = await make_subscriptions(node)

        assert await bzzz(settings, "subscriptions", "list", "--json") == 0
        listed = json.loads(capsys.readouterr().out)["subscriptions"]
        assert await bzzz(settings, "subscriptions", "list") == 0
        table = capsys.readouterr().out

        assert await bzzz(settings, "subscriptions", "delete", hooked) == 0
        said = capsys.readouterr().out
        seq = int(re.search(r"log sequence (\d+)", said).group(1))  # type: ignore[union-attr]
        await node.projector.wait_for_sequence(seq, within=10)
        left = [s.id for s in await node.subscriptions.subscriptions()]

        assert await bzzz(settings, "subscriptions", "delete", hooked) == 1
        refused = capsys.readouterr().err

    assert {s["subscription_id"] for s in listed} == {hooked, plain}
    [shown] = [s for s in listed if s["subscription_id"] == hooked]
    assert shown["callback_webhook"] == "https://example.com/h"
    assert shown["event_types"] == ["thread_created"]
    assert hooked in table and plain in table
    assert left == [plain]
    assert f"no subscription '{hooked}'" in refused


@pytest.mark.integration
async def test_a_subscription_deleted_while_no_node_runs_is_gone_when_one_starts(
    settings: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    async with Node(settings) as node:
        hooked, _ = await make_subscriptions(node)
    # Stopping ended the subscription without a webhook; the webhook one lives on.

    assert await bzzz(settings, "subscriptions", "delete", hooked) == 0
    capsys.readouterr()

    async with Node(settings) as node:
        left = await node.subscriptions.subscriptions()

    assert left == []


async def test_a_dead_delivery_is_redriven_and_delivered(
    driven_node: DrivenNode, http_receiver: ReceiverFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    answer = {"status": 500}
    async with (
        driven_node(**FAST, max_age=0.05) as node,
        http_receiver(lambda _n: answer["status"]) as receiver,
    ):
        await subscribe_webhook(node, receiver.url)
        await announce(node, "arch-1")
        [dead] = await drive_until(node, "dead")

        assert await bzzz(node.settings, "webhooks", "redrive", str(dead.id)) == 0
        said = capsys.readouterr().out
        [pending] = await node.subscriptions.deliveries("pending")
        answer["status"] = 200
        async with httpx.AsyncClient() as client:
            await node.webhooks.deliver_due(client)
        [delivered] = await node.subscriptions.deliveries("delivered")

    assert f"queued 1 dead-lettered deliveries again: {dead.id}" in said
    assert (pending.id, pending.attempts, pending.status) == (dead.id, 0, "pending")
    assert delivered.id == dead.id
    assert [r.status for r in receiver.requests][-1] == 200
    assert all(r.status == 500 for r in receiver.requests[:-1])


async def test_redrive_all_queues_every_dead_delivery_and_refuses_others(
    driven_node: DrivenNode, http_receiver: ReceiverFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    async with driven_node(**FAST, max_age=0.05) as node, http_receiver(lambda _n: 500) as rx:
        await subscribe_webhook(node, rx.url)
        await announce(node, "arch-1")
        await announce(node, "arch-2")
        async with asyncio.timeout(5), httpx.AsyncClient() as client:
            while len(await node.subscriptions.deliveries("dead")) < 2:
                await node.webhooks.deliver_due(client)
        settings = node.settings

        codes = [
            await bzzz(settings, "webhooks", "redrive"),
            await bzzz(settings, "webhooks", "redrive", "999"),
            await bzzz(settings, "webhooks", "redrive", "--all"),
        ]
        out = capsys.readouterr()
        pending = await node.subscriptions.deliveries("pending")
        not_dead = await bzzz(settings, "webhooks", "redrive", str(pending[0].id))
        refused = capsys.readouterr().err

    assert codes == [1, 1, 0]
    assert "no webhook delivery 999" in out.err
    assert "queued 2 dead-lettered deliveries again" in out.out
    assert len(pending) == 2
    assert not_dead == 1
    assert "is not dead-lettered" in refused
