"""Two in-memory clients are two MCP sessions: agent ids belong to the session holding them."""

from __future__ import annotations

from mcp_checks import ClientFactory, announce, assert_error_response, call_ok


async def _status(connect: ClientFactory, agent_id: str) -> tuple[str, str]:
    """The agent's status as lookup and get show it, from a fresh session."""
    async with connect() as observer:
        found = await call_ok(observer, "bzzz_lookup", {"semantic_address": f"bzzz://{agent_id}"})
        got = await call_ok(observer, "bzzz_get", {"address": f"bzzz://{agent_id}"})
    [match] = found["matches"]
    return match["status"], got["content"]["agent_info"]["status"]


async def test_a_second_session_cannot_announce_an_id_the_first_holds(
    connect: ClientFactory,
) -> None:
    async with connect() as first, connect() as second:
        await announce(first, "architect-001", capabilities=["system_design"])
        result = await second.call_tool(
            "bzzz_announce", {"agent_id": "architect-001", "role": "impostor"}
        )
        found = await call_ok(second, "bzzz_lookup", {"semantic_address": "bzzz://architect-001"})

    error = assert_error_response(result)
    assert "Agent ID already exists" in error["error"]
    [match] = found["matches"]
    assert (match["role"], match["capabilities"]) == ("architect", ["system_design"])


async def test_an_agent_goes_offline_when_its_session_ends(connect: ClientFactory) -> None:
    async with connect() as first:
        await announce(first, "architect-001")
        assert await _status(connect, "architect-001") == ("idle", "idle")

    assert await _status(connect, "architect-001") == ("offline", "offline")


async def test_another_session_may_announce_the_id_once_its_holder_left(
    connect: ClientFactory,
) -> None:
    async with connect() as second:
        async with connect() as first:
            await announce(first, "architect-001")
        result = await announce(second, "architect-001", role="reviewer")
        found = await call_ok(second, "bzzz_lookup", {"semantic_address": "bzzz://architect-001"})

    assert result["agent"]["status"] == "idle"
    assert result["agent"]["role"] == "reviewer"
    [match] = found["matches"]
    assert (match["role"], match["status"]) == ("reviewer", "idle")


async def test_a_session_acts_only_as_the_agents_it_announced(connect: ClientFactory) -> None:
    async with connect() as owner, connect() as stranger:
        await announce(owner, "architect-001")
        await announce(stranger, "reviewer-001", role="reviewer")
        result = await stranger.call_tool(
            "bzzz_post",
            {
                "target_address": "bzzz://reviewer-001",
                "message_type": "text",
                "content": {"text": "spoofed"},
                "agent_id": "architect-001",
            },
        )
        inbox = await call_ok(stranger, "bzzz_get", {"address": "bzzz://reviewer-001/inbox"})

    assert_error_response(result, "INVALID_PARAMETERS")
    assert inbox["content"]["messages"] == []


async def test_a_session_without_an_agent_is_told_to_announce_first(
    connect: ClientFactory,
) -> None:
    async with connect() as owner, connect() as anonymous:
        await announce(owner, "architect-001")
        result = await anonymous.call_tool(
            "bzzz_post",
            {"target_address": "bzzz://architect-001", "message_type": "text", "content": {}},
        )

    error = assert_error_response(result, "INVALID_PARAMETERS")
    assert "bzzz_announce" in error["error"]


async def test_ending_one_session_leaves_the_other_sessions_agents_online(
    connect: ClientFactory,
) -> None:
    async with connect() as staying:
        await announce(staying, "reviewer-001", role="reviewer")
        async with connect() as leaving:
            await announce(leaving, "architect-001")
        assert await _status(connect, "reviewer-001") == ("idle", "idle")
        assert await _status(connect, "architect-001") == ("offline", "offline")
