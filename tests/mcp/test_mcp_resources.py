"""The bzzz:// resource template, subscription resources with resources/updated, address
completion and logging/setLevel, as an MCP host uses them.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from mcp import Client, MCPError
from mcp_checks import ClientFactory, announce, assert_no_leak, call_ok
from mcp_types import ResourceTemplateReference, ResourceUpdatedNotification

pytestmark = pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")

TEMPLATE = "bzzz://{+address}"
WAIT = 5


class UpdateInbox:
    """A client message handler that records resources/updated and wakes whoever waits."""

    def __init__(self) -> None:
        self.uris: list[str] = []
        self._arrived = anyio.Event()

    async def __call__(self, message: Any) -> None:
        if isinstance(message, ResourceUpdatedNotification):
            self.uris.append(str(message.params.uri))
            self._arrived.set()
            self._arrived = anyio.Event()

    async def wait_for(self, uri: str, times: int = 1) -> None:
        """Return once ``uri`` was updated ``times`` times; fail after a bound."""
        with anyio.fail_after(WAIT):
            while self.uris.count(uri) < times:
                await self._arrived.wait()


async def _read_json(client: Any, uri: str) -> Any:
    result = await client.read_resource(uri)
    [contents] = result.contents
    assert contents.mime_type == "application/json"
    return json.loads(contents.text)


async def test_the_address_template_is_listed(connect: ClientFactory) -> None:
    async with connect() as client:
        listed = await client.list_resource_templates()

    [template] = [t for t in listed.resource_templates if t.uri_template == TEMPLATE]
    assert template.mime_type == "application/json"
    assert template.description


@pytest.mark.parametrize("path", ["", "/inbox", "/tasks", "/threads"])
async def test_reading_an_agent_address_equals_bzzz_get(connect: ClientFactory, path: str) -> None:
    async with connect() as client, connect() as peer:
        await announce(client, "architect-001")
        await announce(peer, "reviewer-001", role="reviewer")
        await call_ok(
            peer,
            "bzzz_post",
            {"target_address": "bzzz://architect-001", "message_type": "text", "content": {}},
        )
        got = await call_ok(client, "bzzz_get", {"address": f"bzzz://architect-001{path}"})
        read = await _read_json(client, f"bzzz://architect-001{path}")

    assert read["success"] is True
    assert read["content"] == got["content"]
    assert read["metadata"] == got["metadata"]


async def test_reading_a_thread_address_equals_bzzz_get(connect: ClientFactory) -> None:
    async with connect() as client, connect() as peer:
        await announce(client, "architect-001")
        await announce(peer, "reviewer-001", role="reviewer")
        created = await call_ok(
            client,
            "bzzz_thread",
            {"action": "create", "topic": "API", "participants": ["reviewer-001"]},
        )
        address = f"bzzz://architect-001/threads/{created['thread_id']}"
        got = await call_ok(client, "bzzz_get", {"address": address})
        read = await _read_json(client, address)

    assert read["content"] == got["content"]
    assert read["content"]["thread"]["topic"] == "API"


async def test_reading_a_subscription_gives_its_events(connect: ClientFactory) -> None:
    async with connect() as watcher, connect() as newcomer:
        sub = await call_ok(
            watcher,
            "bzzz_subscribe",
            {"event_types": ["agent_announcement"], "filter_address": "bzzz://*:reviewer@*"},
        )
        await announce(newcomer, "architect-001")
        await announce(newcomer, "reviewer-001", role="reviewer")
        read = await _read_json(watcher, sub["resource_uri"])

    assert read["subscription_id"] == sub["subscription_id"]
    assert read["event_types"] == ["agent_announcement"]
    [event] = read["events"]
    assert event["event_type"] == "agent_announcement"
    assert event["subscription_id"] == sub["subscription_id"]
    assert "reviewer-001" in event["address"]


@pytest.mark.parametrize(
    ("uri", "code"),
    [
        pytest.param("bzzz://nobody-1", "AGENT_NOT_FOUND", id="unknown-agent"),
        pytest.param("bzzz://architect-001/threads/t-0", "THREAD_NOT_FOUND", id="unknown-thread"),
        pytest.param("bzzz://subscriptions/sub-nope", "INVALID_PARAMETERS", id="unknown-sub"),
        pytest.param("bzzz://architect-001/../../etc/passwd", "INVALID_PARAMETERS", id="traversal"),
        pytest.param("bzzz://architect-001/inbox%0aX", "INVALID_PARAMETERS", id="newline"),
        pytest.param("bzzz://a%00b", "INVALID_PARAMETERS", id="nul"),
        pytest.param("bzzz://*:*@*:*", "INVALID_PARAMETERS", id="wildcard"),
        pytest.param(
            "bzzz://" + "a" * 5000,
            "INVALID_PARAMETERS",
            id="5000-chars",
        ),
    ],
)
async def test_reading_a_missing_or_hostile_address_is_a_coded_error_without_internals(
    connect: ClientFactory, uri: str, code: str
) -> None:
    async with connect() as client:
        await announce(client, "architect-001")
        with pytest.raises(MCPError) as caught:
            await client.read_resource(uri)

    message = caught.value.error.message
    assert message.startswith(f"{code}: "), message[:300]
    assert len(message) < 1_000
    assert_no_leak(message + json.dumps(caught.value.error.data))


async def test_a_subscribed_resource_is_updated_when_an_event_arrives(
    connect: ClientFactory,
) -> None:
    updates = UpdateInbox()
    async with connect(message_handler=updates) as watcher, connect() as newcomer:
        sub = await call_ok(watcher, "bzzz_subscribe", {"event_types": ["agent_announcement"]})
        await watcher.subscribe_resource(sub["resource_uri"])

        await announce(newcomer, "reviewer-001", role="reviewer")

        await updates.wait_for(sub["resource_uri"])
        read = await _read_json(watcher, sub["resource_uri"])

    assert [e["address"] for e in read["events"]] == ["bzzz://reviewer-001:reviewer@*:*"]


async def test_a_subscription_resource_is_updated_when_an_agent_leaves(
    connect: ClientFactory,
) -> None:
    updates = UpdateInbox()
    async with connect(message_handler=updates) as watcher:
        sub = await call_ok(watcher, "bzzz_subscribe", {"event_types": ["agent_announcement"]})
        await watcher.subscribe_resource(sub["resource_uri"])
        async with connect() as visitor:
            await announce(visitor, "visitor-1")

        await updates.wait_for(sub["resource_uri"], times=2)
        read = await _read_json(watcher, sub["resource_uri"])

    actions = [(e["data"]["action"], e["data"]["agent"]["id"]) for e in read["events"]]
    assert actions == [("announced", "visitor-1"), ("offline", "visitor-1")]


async def test_an_unsubscribed_resource_is_not_updated(connect: ClientFactory) -> None:
    updates = UpdateInbox()
    async with connect(message_handler=updates) as watcher, connect() as actor:
        dropped = await call_ok(watcher, "bzzz_subscribe", {"event_types": ["agent_announcement"]})
        kept = await call_ok(watcher, "bzzz_subscribe", {"event_types": ["thread_created"]})
        await watcher.subscribe_resource(dropped["resource_uri"])
        await watcher.subscribe_resource(kept["resource_uri"])
        await watcher.unsubscribe_resource(dropped["resource_uri"])

        await announce(actor, "architect-001")
        await call_ok(
            actor,
            "bzzz_thread",
            {"action": "create", "topic": "x", "participants": ["architect-001"]},
        )

        # The projector applies the log in order: the thread's update follows any announce update.
        await updates.wait_for(kept["resource_uri"])
        received = list(updates.uris)

    assert received == [kept["resource_uri"]]


async def test_a_resource_update_reaches_only_the_subscribed_session(
    connect: ClientFactory,
) -> None:
    watcher_updates, other_updates = UpdateInbox(), UpdateInbox()
    async with (
        connect(message_handler=watcher_updates) as watcher,
        connect(message_handler=other_updates) as other,
    ):
        sub = await call_ok(watcher, "bzzz_subscribe", {"event_types": ["agent_announcement"]})
        own = await call_ok(other, "bzzz_subscribe", {"event_types": ["thread_created"]})
        await watcher.subscribe_resource(sub["resource_uri"])
        await other.subscribe_resource(own["resource_uri"])

        await announce(other, "architect-001")
        await call_ok(
            other,
            "bzzz_thread",
            {"action": "create", "topic": "x", "participants": ["architect-001"]},
        )

        # The projector applies the log in order: the thread's update follows the announce's.
        await other_updates.wait_for(own["resource_uri"])
        await watcher_updates.wait_for(sub["resource_uri"])
        received = (list(watcher_updates.uris), list(other_updates.uris))

    assert received == ([sub["resource_uri"]], [own["resource_uri"]])


async def _complete(client: Any, value: str, name: str = "address") -> list[str]:
    result = await client.complete(
        ResourceTemplateReference(type="ref/resource", uri=TEMPLATE), {"name": name, "value": value}
    )
    return list(result.completion.values)


async def test_completion_offers_announced_addresses_starting_with_the_typed_prefix(
    connect: ClientFactory,
) -> None:
    async with connect() as client:
        await announce(client, "alpha-1")
        await announce(client, "alpha-2", role="reviewer", project="bzzz")
        await announce(client, "beta-1")
        values = await _complete(client, "alp")
        everything = await _complete(client, "")
        nothing = await _complete(client, "gamma")

    assert values == ["alpha-1:architect@*:*", "alpha-2:reviewer@bzzz:*"]
    assert all(v.startswith("alp") for v in values)
    assert len(everything) == 3
    assert nothing == []


@pytest.mark.parametrize("prefix", ["_", "%", "a%", "' OR 1=1 --", "\\"])
async def test_completion_treats_the_prefix_literally(connect: ClientFactory, prefix: str) -> None:
    async with connect() as client:
        await announce(client, "alpha-1")
        values = await _complete(client, prefix)

    assert values == []


async def test_completion_of_another_argument_offers_nothing(connect: ClientFactory) -> None:
    async with connect() as client:
        await announce(client, "alpha-1")
        values = await _complete(client, "alp", name="path")

    assert values == []


@pytest.fixture
def restore_bzzz_log_level() -> Iterator[None]:
    """logging/setLevel changes a process-wide logger: put it back after the test."""
    logger = logging.getLogger("bzzz")
    level = logger.level
    yield
    logger.setLevel(level)


@pytest.mark.usefixtures("restore_bzzz_log_level")
async def test_logging_set_level_is_accepted_and_applied(connect: ClientFactory) -> None:
    async with connect() as client:
        await client.set_logging_level("debug")
        debug = logging.getLogger("bzzz").level
        await client.set_logging_level("error")
        error = logging.getLogger("bzzz").level

    assert (debug, error) == (logging.DEBUG, logging.ERROR)


async def test_a_2026_protocol_listener_hears_its_subscription_resource_change(
    mcp_server: Any,
) -> None:
    server, _ = mcp_server
    async with Client(server) as watcher, Client(server) as other:
        sub = await call_ok(watcher, "bzzz_subscribe", {"event_types": ["agent_announcement"]})
        uri = sub["resource_uri"]
        async with watcher.listen(resource_subscriptions=[uri]) as stream:
            await announce(other, "late-1")
            with anyio.fail_after(WAIT):
                event = await stream.__anext__()

    assert str(event.uri) == uri
