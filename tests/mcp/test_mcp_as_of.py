"""bzzz_get with as_of through an MCP client: the schema offers it; it answers the thread then."""

from __future__ import annotations

from mcp_checks import ClientFactory, announce, assert_error_response, call_ok


async def test_bzzz_get_reads_a_thread_as_it_stood_at_a_time_over_mcp(
    connect: ClientFactory,
) -> None:
    async with connect() as arch, connect() as dev:
        tools = {t.name: t for t in (await arch.list_tools()).tools}
        await announce(arch, "arch-1")
        await announce(dev, "dev-1", role="developer")
        created = await call_ok(
            arch, "bzzz_thread", {"action": "create", "topic": "Queues", "participants": ["dev-1"]}
        )
        address = f"bzzz://*/threads/{created['thread_id']}"
        await call_ok(dev, "bzzz_thread", {"action": "pause", "thread_id": created["thread_id"]})
        live = await call_ok(arch, "bzzz_get", {"address": address})
        opened_at = live["content"]["thread"]["created_at"]
        then = await call_ok(arch, "bzzz_get", {"address": address, "as_of": opened_at})

    assert "as_of" in tools["bzzz_get"].input_schema["properties"]
    assert "as_of" in (tools["bzzz_get"].description or "")
    assert live["content"]["thread"]["status"] == "paused"
    assert then["content"]["thread"]["status"] == "active"
    assert then["content"]["as_of"]["requested"] == opened_at
    assert then["content"]["thread"]["topic"] == "Queues"


BAD = [
    ("2000-01-01T00:00:00Z", "THREAD_NOT_FOUND"),
    ("next tuesday", "INVALID_PARAMETERS"),
    (0, "INVALID_PARAMETERS"),
    ("x" * 5000, "INVALID_PARAMETERS"),
]


async def test_a_thread_before_it_existed_or_a_bad_as_of_answers_the_reference_error(
    connect: ClientFactory,
) -> None:
    async with connect() as arch:
        await announce(arch, "arch-1")
        await announce(arch, "dev-1", role="developer")
        created = await call_ok(
            arch,
            "bzzz_thread",
            {"action": "create", "topic": "Q", "participants": ["dev-1"], "agent_id": "arch-1"},
        )
        address = f"bzzz://*/threads/{created['thread_id']}"
        answers = [
            (await arch.call_tool("bzzz_get", {"address": address, "as_of": as_of}), code)
            for as_of, code in BAD
        ]
        on_agent = await arch.call_tool("bzzz_get", {"address": "bzzz://arch-1", "as_of": 3})

    for answer, code in answers:
        assert_error_response(answer, code)
    assert_error_response(on_agent, "INVALID_PARAMETERS")
