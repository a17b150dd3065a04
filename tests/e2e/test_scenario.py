"""Two agents coordinate through the official MCP client against spawned `bzzz` processes.

Over stdio each agent has its own `bzzz serve --stdio` on one data directory (the second process
joins the first's embedded NATS, so both see one network and reads in the other process are
eventually consistent); over HTTP both sessions talk to one `bzzz serve`.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession

from bzzz.events.webhooks import verify_signature

from .support import (
    CALL_TIMEOUT,
    STOP_TIMEOUT,
    HttpNode,
    WebhookReceiver,
    call,
    call_error,
    eventually,
    http_session,
    nats_servers_of,
    node_env,
    signature_valid,
    stdio_session,
    wait_until,
)

pytestmark = pytest.mark.integration

ARCHITECT = "architect-001"
REVIEWER = "reviewer-001"
PROJECT = "myproject"


@contextlib.asynccontextmanager
async def two_sessions(
    transport: str, env: dict[str, str], logs: Path
) -> AsyncIterator[tuple[ClientSession, ClientSession]]:
    """Two MCP client sessions on one network: two stdio processes or one HTTP node."""
    async with contextlib.AsyncExitStack() as stack:
        if transport == "http":
            node = HttpNode(Path(env["BZZZ_DATA_DIR"]), env, logs)
            stack.push_async_callback(node.kill)
            await node.start()

            async def stop() -> None:
                # How it exits is test_process_lifecycle's concern; here only that it does.
                node.send(signal.SIGTERM)
                await node.wait_exit()

            stack.push_async_callback(stop)
            first = await stack.enter_async_context(http_session(node.mcp_url))
            second = await stack.enter_async_context(http_session(node.mcp_url))
        else:
            # The first process owns the embedded nats-server; it must be up before the second
            # looks for it. The exit stack closes the joiner first, then the owner.
            err_a = stack.enter_context((logs / "stdio-a.err").open("w"))
            first = await stack.enter_async_context(stdio_session(env, err_a))
            err_b = stack.enter_context((logs / "stdio-b.err").open("w"))
            second = await stack.enter_async_context(stdio_session(env, err_b))
        yield first, second


async def ids_at(session: ClientSession, address: str, **criteria: Any) -> list[str]:
    """Ids bzzz_lookup returns for an address and filter criteria, in result order."""
    args: dict[str, Any] = {"semantic_address": address}
    if criteria:
        args["filter_criteria"] = criteria
    body = await call(session, "bzzz_lookup", args)
    assert body["count"] == len(body["matches"])
    scores = [m["score"] for m in body["matches"]]
    assert all(0 <= s <= 100 for s in scores) and scores == sorted(scores, reverse=True)
    return [m["id"] for m in body["matches"]]


async def content_at(session: ClientSession, address: str) -> dict[str, Any]:
    """bzzz_get's content at an address."""
    content: dict[str, Any] = (await call(session, "bzzz_get", {"address": address}))["content"]
    return content


async def thread_seen(session: ClientSession, address: str) -> dict[str, Any] | None:
    """The thread at an address, None while this session's node has not applied it yet."""
    async with asyncio.timeout(CALL_TIMEOUT):
        result = await session.call_tool("bzzz_get", {"address": address})
    body = result.structured_content
    assert body is not None
    if result.is_error:
        assert body["code"] == "THREAD_NOT_FOUND", body
        return None
    thread: dict[str, Any] = body["content"]["thread"]
    return thread


async def announce_both(a: ClientSession, b: ClientSession) -> None:
    """The architect and the reviewer announce; both processes see both."""
    architect = await call(
        a,
        "bzzz_announce",
        {
            "agent_id": ARCHITECT,
            "role": "architect",
            "capabilities": ["system_design", "api_design"],
            "specialization": "distributed_systems",
            "project": PROJECT,
        },
    )
    assert architect["agent"]["id"] == ARCHITECT and architect["agent"]["status"] == "idle"
    reviewer = await call(
        b,
        "bzzz_announce",
        {
            "agent_id": REVIEWER,
            "role": "reviewer",
            "capabilities": ["code_review", "python"],
            "max_tasks": 1,
            "project": PROJECT,
        },
    )
    assert reviewer["agent"]["max_tasks"] == 1
    both = sorted([ARCHITECT, REVIEWER])
    await eventually(lambda: ids_at(a, "bzzz://*"), lambda ids: sorted(ids) == both)
    await eventually(lambda: ids_at(b, "bzzz://*"), lambda ids: sorted(ids) == both)
    # The id is held by a live agent of another session.
    taken = await call_error(a, "bzzz_announce", {"agent_id": REVIEWER, "role": "reviewer"})
    assert taken["code"] == "INVALID_PARAMETERS" and "already exists" in taken["error"]


async def check_lookup_filters(a: ClientSession) -> None:
    """Expertise, role, project and performance filters narrow the matches."""
    everyone = f"bzzz://*:*@{PROJECT}:*"
    assert await ids_at(a, everyone, expertise=["python"]) == [REVIEWER]
    # Expertise matches the specialization too.
    assert await ids_at(a, everyone, expertise=["distributed_systems"]) == [ARCHITECT]
    assert await ids_at(a, everyone, expertise=["python", "system_design"]) == []
    assert await ids_at(a, "bzzz://*:reviewer@*") == [REVIEWER]
    assert await ids_at(a, "bzzz://*:*@another_project") == []
    # New agents start at performance 0.9.
    assert await ids_at(a, everyone, performance_threshold=0.95) == []
    assert sorted(await ids_at(a, everyone, performance_threshold=0.5)) == [ARCHITECT, REVIEWER]
    assert sorted(await ids_at(a, everyone, availability=True)) == [ARCHITECT, REVIEWER]


async def assign_and_complete(a: ClientSession, b: ClientSession) -> str:
    """The architect assigns a review; the reviewer completes it; everyone sees it. Task id."""
    posted = await call(
        a,
        "bzzz_post",
        {
            "target_address": f"bzzz://{REVIEWER}:reviewer@{PROJECT}",
            "message_type": "task_assignment",
            "content": {"task_type": "code_review", "description": "Review the API design"},
            "priority": "high",
        },
    )
    assert posted["delivery_results"]["delivered"] is True
    assert posted["delivery_results"]["recipients"] == [REVIEWER]
    task_id: str = posted["tasks"][REVIEWER]

    # At max_tasks (1) the reviewer is unavailable and a second assignment is refused.
    assert await ids_at(a, "bzzz://*", availability=True) == [ARCHITECT]
    refused = await call(
        a,
        "bzzz_post",
        {
            "target_address": f"bzzz://{REVIEWER}",
            "message_type": "task_assignment",
            "content": {"description": "one more"},
        },
    )
    assert refused["delivery_results"]["delivered"] is False
    assert "max_tasks" in refused["delivery_results"]["undelivered"][0]["reason"]

    def has_task(status: str) -> Any:
        return lambda c: any(t["id"] == task_id and t["status"] == status for t in c["tasks"])

    reviewer_tasks = f"bzzz://{REVIEWER}/tasks"
    await eventually(lambda: content_at(b, reviewer_tasks), has_task("pending"))
    done = await call(
        b,
        "bzzz_post",
        {
            "target_address": f"bzzz://{ARCHITECT}",
            "message_type": "task_complete",
            "content": {"task_id": task_id, "result": "LGTM"},
        },
    )
    assert done["task_update"]["task_status"] == "completed"

    tasks = await eventually(lambda: content_at(a, reviewer_tasks), has_task("completed"))
    task = next(t for t in tasks["tasks"] if t["id"] == task_id)
    assert task["result"] == "LGTM" and task["assigner"] == ARCHITECT and task["endTime"]
    assert task["type"] == "code_review" and task["priority"] == "high"
    # Free again, and one completed task lifted the reviewer above the 0.9 prior.
    await eventually(
        lambda: ids_at(a, "bzzz://*", availability=True),
        lambda ids: sorted(ids) == [ARCHITECT, REVIEWER],
    )
    assert await ids_at(a, "bzzz://*", performance_threshold=0.91) == [REVIEWER]
    return task_id


async def check_webhook(hook: WebhookReceiver, subscription: dict[str, Any], task_id: str) -> None:
    """The task_assignment event was attempted twice (500, then 200), signed both times."""
    await hook.wait_for(lambda seen: any(x.status == 200 for x in seen), within=20)
    first, second = hook.attempts[:2]
    assert [first.status, second.status] == [500, 200]
    assert first.body == second.body
    assert first.headers["x-bzzz-event-id"] == second.headers["x-bzzz-event-id"]
    secret = subscription["webhook_secret"]
    for attempt in (first, second):
        assert (attempt.method, attempt.path) == ("POST", "/hook")
        assert attempt.headers["content-type"].startswith("application/json")
        header = attempt.headers["x-bzzz-signature"]
        assert signature_valid(secret, header, attempt.body), header
        assert verify_signature(secret, header, attempt.body)
        assert not signature_valid(secret, header, attempt.body + b" ")
    event = second.json()
    assert event["event_type"] == "task_assignment"
    assert event["subscription_id"] == subscription["subscription_id"]
    assert event["data"]["task_id"] == task_id
    assert event["data"]["agent_id"] == REVIEWER and event["data"]["assigner"] == ARCHITECT


async def thread_lifecycle(a: ClientSession, b: ClientSession) -> str:
    """Create, join, post, summarize, leave; the thread id."""
    created = await call(
        a,
        "bzzz_thread",
        {"action": "create", "participants": [ARCHITECT], "topic": "API Design Review"},
    )
    thread_id: str = created["thread_id"]
    assert created["result"]["creator"] == ARCHITECT
    assert created["result"]["participants"] == [ARCHITECT]
    assert created["result"]["status"] == "active"
    thread_at = f"bzzz://{ARCHITECT}/threads/{thread_id}"

    await eventually(lambda: thread_seen(b, thread_at), lambda t: t is not None)
    joined = await call(b, "bzzz_thread", {"action": "join", "thread_id": thread_id})
    assert sorted(joined["result"]["participants"]) == [ARCHITECT, REVIEWER]
    await eventually(
        lambda: content_at(a, thread_at),
        lambda c: sorted(c["thread"]["participants"]) == [ARCHITECT, REVIEWER],
    )

    question = await call(
        a,
        "bzzz_post",
        {
            "target_address": f"bzzz://{REVIEWER}",
            "message_type": "question",
            "content": {"text": "Should the public API be REST or gRPC?"},
            "thread_id": thread_id,
        },
    )
    assert question["delivery_results"]["recipients"] == [REVIEWER]
    await eventually(lambda: content_at(b, thread_at), lambda c: c["thread"]["message_count"] == 1)
    decision = await call(
        b,
        "bzzz_post",
        {
            "target_address": f"bzzz://{ARCHITECT}",
            "message_type": "decision",
            "content": {"text": "REST with JSON bodies; gRPC later for internal calls."},
            "thread_id": thread_id,
            "reply_to": question["message_id"],
        },
    )
    assert decision["delivery_results"]["recipients"] == [ARCHITECT]
    await eventually(lambda: content_at(a, thread_at), lambda c: c["thread"]["message_count"] == 2)
    await call(
        a,
        "bzzz_post",
        {
            "target_address": f"bzzz://{REVIEWER}",
            "message_type": "question",
            "content": {"text": "When do we ship the first version?"},
            "thread_id": thread_id,
        },
    )

    summary = (await call(a, "bzzz_thread", {"action": "summarize", "thread_id": thread_id}))[
        "result"
    ]
    assert summary["message_count"] == 3
    assert sorted(summary["participants"]) == [ARCHITECT, REVIEWER]
    assert [d["by"] for d in summary["decisions"]] == [REVIEWER]
    assert "REST" in summary["decisions"][0]["text"]
    assert [q["text"] for q in summary["open_questions"]] == ["When do we ship the first version?"]
    assert "API Design Review" in summary["summary"]

    await eventually(lambda: content_at(b, thread_at), lambda c: c["thread"]["message_count"] == 3)
    left = await call(b, "bzzz_thread", {"action": "leave", "thread_id": thread_id})
    assert left["result"]["participants"] == [ARCHITECT]
    assert left["result"]["former_participants"] == [REVIEWER]
    gone = await call_error(
        b,
        "bzzz_post",
        {
            "target_address": f"bzzz://{ARCHITECT}",
            "message_type": "text",
            "content": {"text": "still here?"},
            "thread_id": thread_id,
        },
    )
    assert gone["code"] == "INVALID_PARAMETERS"

    thread = (
        await eventually(
            lambda: content_at(a, thread_at),
            lambda c: c["thread"]["participants"] == [ARCHITECT],
        )
    )["thread"]
    assert [m["messageType"] for m in thread["messages"]] == ["question", "decision", "question"]
    assert [m["sender"] for m in thread["messages"]] == [ARCHITECT, REVIEWER, ARCHITECT]
    assert thread["summary"]
    listed = (await call(a, "bzzz_thread", {"action": "list"}))["result"]
    assert [t["id"] for t in listed] == [thread_id]
    return thread_id


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_two_agents_coordinate_through_the_official_mcp_client(
    transport: str,
    data_dir: Path,
    tmp_path: Path,
    clean_env: dict[str, str],
    receiver: WebhookReceiver,
) -> None:
    """Announce, look up, assign and complete a task, hold a thread, get a signed webhook."""
    env = node_env(clean_env, data_dir)
    async with two_sessions(transport, env, tmp_path) as (a, b):
        await announce_both(a, b)
        await check_lookup_filters(a)

        subscription = await call(
            b,
            "bzzz_subscribe",
            {
                "event_types": ["task_assignment"],
                "filter_address": "bzzz://*:reviewer@*",
                "callback_webhook": receiver.url,
            },
        )
        assert subscription["status"] == "active" and subscription["webhook_secret"]

        task_id = await assign_and_complete(a, b)
        await check_webhook(receiver, subscription, task_id)
        thread_id = await thread_lifecycle(a, b)

        inbox = await content_at(a, f"bzzz://{REVIEWER}/inbox")
        kinds = {(m["message_type"], m["sender"], m["thread_id"]) for m in inbox["messages"]}
        assert ("task_assignment", ARCHITECT, None) in kinds
        assert ("question", ARCHITECT, thread_id) in kinds
        # One event, one delivery: the 500 was retried once and never re-sent after the 200.
        assert len(receiver.attempts) == 2

    # Every bzzz process has exited; the embedded nats-server went with its owner.
    async with asyncio.timeout(STOP_TIMEOUT):
        await wait_until(lambda: not nats_servers_of(data_dir))
