"""bzzz_post: messages sent as the session's agent to an address or a thread."""

from __future__ import annotations

from typing import Any

import pytest

from bzzz.access.keys import principal_key
from bzzz.errors import AgentNotFound, ErrorCode, InvalidParameters, ThreadNotFound
from bzzz.eventlog import LOCAL_CALLER, Caller
from bzzz.node.core import Node
from bzzz.principal import ALL, Scope, principal
from bzzz.schemas import AnnounceInput, GetInput, PostInput, ThreadInput, validate_input


async def announce(node: Node, agent_id: str, role: str, session: str | None = None) -> None:
    await node.agents.announce(
        Caller(session or f"session-{agent_id}"), AnnounceInput(agent_id=agent_id, role=role)
    )


async def post(node: Node, session: str, target: str, **fields: Any) -> dict[str, Any]:
    fields.setdefault("message_type", "text")
    fields.setdefault("content", {"text": "hello"})
    return await node.conversations.post(
        Caller(session), PostInput(target_address=target, **fields)
    )


async def inbox(node: Node, agent_id: str) -> list[dict[str, Any]]:
    got = await node.agents.get(LOCAL_CALLER, GetInput(address=f"bzzz://{agent_id}/inbox"))
    messages: list[dict[str, Any]] = got["content"]["messages"]
    return messages


async def test_a_message_is_sent_as_the_sessions_agent(node: Node) -> None:
    await announce(node, "arch", "architect")
    await announce(node, "dev", "developer")

    result = await post(
        node, "session-arch", "bzzz://dev", message_type="review_request", priority="high"
    )

    assert result["success"] is True
    assert result["message_id"].startswith("msg-")
    assert result["message_type"] == "review_request"
    assert result["target_address"] == "bzzz://dev"
    [message] = await inbox(node, "dev")
    assert (message["id"], message["sender"]) == (result["message_id"], "arch")
    assert (message["priority"], message["message_type"]) == ("high", "review_request")


async def test_delivery_results_name_the_recipients_and_the_time(node: Node) -> None:
    await announce(node, "arch", "architect")
    await announce(node, "dev", "developer")

    result = await post(node, "session-arch", "bzzz://dev")

    delivery = result["delivery_results"]
    assert delivery["delivered"] is True
    assert delivery["recipients"] == ["dev"]
    assert delivery["undelivered"] == []
    assert isinstance(delivery["delivery_time"], int | float)
    assert delivery["delivery_time"] >= 0
    assert result["posted_at"].endswith("Z")


async def test_a_session_without_an_agent_is_told_to_announce(node: Node) -> None:
    await announce(node, "dev", "developer")

    with pytest.raises(InvalidParameters) as caught:
        await post(node, "session-x", "bzzz://dev")

    assert "bzzz_announce" in caught.value.message
    assert await inbox(node, "dev") == []


async def test_a_session_with_several_agents_must_choose_one(node: Node) -> None:
    await announce(node, "arch", "architect", session="multi")
    await announce(node, "rev", "reviewer", session="multi")
    await announce(node, "dev", "developer")

    with pytest.raises(InvalidParameters) as caught:
        await post(node, "multi", "bzzz://dev")
    result = await post(node, "multi", "bzzz://dev", agent_id="rev")

    assert "agent_id" in caught.value.message
    assert caught.value.details["session_agents"] == ["arch", "rev"]
    assert result["delivery_results"]["recipients"] == ["dev"]
    assert [m["sender"] for m in await inbox(node, "dev")] == ["rev"]


async def test_a_session_cannot_post_as_an_agent_it_did_not_announce(node: Node) -> None:
    await announce(node, "arch", "architect")
    await announce(node, "dev", "developer")

    with pytest.raises(InvalidParameters) as caught:
        await post(node, "session-arch", "bzzz://arch", agent_id="dev")

    assert "not announced by this session" in caught.value.message
    assert await inbox(node, "arch") == []


async def test_an_agent_whose_session_ended_cannot_post(node: Node) -> None:
    await announce(node, "arch", "architect")
    await announce(node, "dev", "developer")
    await node.agents.session_ended(Caller("session-arch"))

    with pytest.raises(InvalidParameters) as caught:
        await post(node, "session-arch", "bzzz://dev")

    assert "bzzz_announce" in caught.value.message


async def test_a_wildcard_reaches_every_online_match_but_the_sender(node: Node) -> None:
    await announce(node, "arch", "architect")
    await announce(node, "dev-1", "developer")
    await announce(node, "dev-2", "developer")
    await announce(node, "dev-gone", "developer")
    await announce(node, "rev", "reviewer")
    await node.agents.session_ended(Caller("session-dev-gone"))

    to_devs = await post(node, "session-arch", "bzzz://*:developer@*")
    to_all = await post(node, "session-arch", "bzzz://*")

    assert to_devs["delivery_results"]["recipients"] == ["dev-1", "dev-2"]
    assert to_all["delivery_results"]["recipients"] == ["dev-1", "dev-2", "rev"]
    assert await inbox(node, "dev-gone") == []
    assert await inbox(node, "arch") == []


async def test_a_wildcard_without_matches_says_why_nothing_was_delivered(node: Node) -> None:
    await announce(node, "arch", "architect")

    result = await post(node, "session-arch", "bzzz://*:tester@*")

    delivery = result["delivery_results"]
    assert delivery["delivered"] is False
    assert delivery["recipients"] == []
    assert delivery["undelivered"] == [{"agent_id": None, "reason": "no agent matches the address"}]


async def test_an_unknown_agent_is_agent_not_found(node: Node) -> None:
    await announce(node, "arch", "architect")

    with pytest.raises(AgentNotFound):
        await post(node, "session-arch", "bzzz://nobody")


async def test_a_post_to_an_offline_agent_is_kept_for_it_and_says_it_was_not_delivered(
    node: Node,
) -> None:
    await announce(node, "arch", "architect")
    await announce(node, "dev", "developer")
    await node.agents.session_ended(Caller("session-dev"))

    result = await post(node, "session-arch", "bzzz://dev")

    assert result["success"] is True  # stored: the post is in dev's inbox
    delivery = result["delivery_results"]
    assert delivery["delivered"] is False
    assert delivery["recipients"] == ["dev"]
    assert delivery["queued"] == ["dev"]
    assert delivery["reason"].startswith("offline: dev")
    assert [m["id"] for m in await inbox(node, "dev")] == [result["message_id"]]


async def test_a_post_reaching_one_online_agent_is_delivered_and_names_the_queued_ones(
    node: Node,
) -> None:
    await announce(node, "arch", "architect")
    await announce(node, "dev", "developer")
    await announce(node, "rev", "reviewer")
    created = await node.conversations.thread(
        Caller("session-arch"), ThreadInput(action="create", participants=["dev", "rev"], topic="t")
    )
    await node.agents.session_ended(Caller("session-rev"))

    result = await post(node, "session-arch", "bzzz://*", thread_id=created["thread_id"])

    delivery = result["delivery_results"]
    assert (delivery["delivered"], delivery["recipients"]) == (True, ["dev", "rev"])
    assert delivery["queued"] == ["rev"]
    assert "reason" not in delivery


async def test_an_empty_wildcard_says_no_online_agent_matched(node: Node) -> None:
    await announce(node, "arch", "architect")

    delivery = (await post(node, "session-arch", "bzzz://*:tester@*"))["delivery_results"]

    assert (delivery["delivered"], delivery["queued"]) == (False, [])
    assert delivery["reason"].startswith("no online agent matches the address")


async def test_a_misspelt_agent_id_gets_the_closest_ids_of_the_callers_projects(
    node: Node,
) -> None:
    alpha = principal("token:alpha", "token", ["alpha"], [ALL], Scope.WRITE, "alpha")
    beta = principal("token:beta", "token", ["beta"], [ALL], Scope.WRITE, "beta")
    as_alpha, as_beta = Caller(principal_key(alpha), alpha), Caller(principal_key(beta), beta)
    await node.agents.announce(as_alpha, AnnounceInput(agent_id="arch", role="a", project="alpha"))
    await node.agents.announce(
        as_alpha, AnnounceInput(agent_id="reviewer-01", role="r", project="alpha")
    )
    await node.agents.announce(
        as_beta, AnnounceInput(agent_id="reviewer-02", role="r", project="beta")
    )

    with pytest.raises(AgentNotFound) as posted:
        await node.conversations.post(
            as_alpha,
            PostInput(
                target_address="bzzz://reviewer-0", message_type="text", content={}, agent_id="arch"
            ),
        )
    with pytest.raises(AgentNotFound) as got:
        await node.agents.get(as_alpha, GetInput(address="bzzz://reviewr-01/inbox"))

    for caught in (posted, got):
        assert caught.value.code == ErrorCode.AGENT_NOT_FOUND
        assert caught.value.details["did_you_mean"] == ["reviewer-01"]
        assert "did you mean 'reviewer-01'?" in caught.value.message
        assert "reviewer-02" not in caught.value.message  # beta's agent: not alpha's to see
    with pytest.raises(AgentNotFound) as invited:
        await node.conversations.thread(
            as_alpha,
            ThreadInput(action="create", participants=["reviewr-02"], topic="t", agent_id="arch"),
        )
    assert invited.value.details["did_you_mean"] == {"reviewr-02": ["reviewer-01"]}
    assert "reviewer-02" not in invited.value.message


async def test_a_visible_agent_at_a_wrong_address_is_named_with_its_own(node: Node) -> None:
    await announce(node, "arch", "architect")
    await announce(node, "dev", "developer")

    with pytest.raises(AgentNotFound) as caught:
        await post(node, "session-arch", "bzzz://dev:reviewer@*")

    assert caught.value.details["address"] == "bzzz://dev:developer@*:*"
    assert caught.value.message.endswith("'dev' is at bzzz://dev:developer@*:*")


async def test_a_thread_post_reaches_the_threads_participants(node: Node) -> None:
    await announce(node, "arch", "architect")
    await announce(node, "dev", "developer")
    await announce(node, "rev", "reviewer")
    await announce(node, "outsider", "tester")
    created = await node.conversations.thread(
        Caller("session-arch"),
        ThreadInput(action="create", participants=["dev", "rev"], topic="API design"),
    )
    thread_id = created["thread_id"]
    await node.conversations.thread(
        Caller("session-rev"), ThreadInput(action="leave", thread_id=thread_id)
    )

    result = await post(node, "session-arch", "bzzz://*", thread_id=thread_id)

    assert result["thread_id"] == thread_id
    assert result["delivery_results"]["recipients"] == ["dev"]
    assert [m["thread_id"] for m in await inbox(node, "dev")] == [thread_id]
    assert await inbox(node, "rev") == []
    assert await inbox(node, "outsider") == []


async def test_only_participants_may_post_to_a_thread(node: Node) -> None:
    await announce(node, "arch", "architect")
    await announce(node, "dev", "developer")
    await announce(node, "outsider", "tester")
    created = await node.conversations.thread(
        Caller("session-arch"), ThreadInput(action="create", participants=["dev"], topic="API")
    )

    with pytest.raises(InvalidParameters) as caught:
        await post(node, "session-outsider", "bzzz://*", thread_id=created["thread_id"])

    assert "join it with bzzz_thread" in caught.value.message


async def test_a_thread_refuses_message_types_it_does_not_hold(node: Node) -> None:
    await announce(node, "arch", "architect")
    await announce(node, "dev", "developer")
    created = await node.conversations.thread(
        Caller("session-arch"), ThreadInput(action="create", participants=["dev"], topic="API")
    )

    with pytest.raises(InvalidParameters) as caught:
        await post(
            node, "session-arch", "bzzz://*", thread_id=created["thread_id"], message_type="gossip"
        )

    assert "decision" in caught.value.message
    assert await inbox(node, "dev") == []


async def test_posting_to_an_unknown_thread_is_thread_not_found(node: Node) -> None:
    await announce(node, "arch", "architect")

    with pytest.raises(ThreadNotFound):
        await post(node, "session-arch", "bzzz://*", thread_id="thread-nope")


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"message_type": "text", "content": {}}, "target_address"),
        ({"target_address": "bzzz://a", "content": {}}, "message_type"),
        ({"target_address": "bzzz://a", "message_type": "text", "content": "hi"}, "content"),
        (
            {
                "target_address": "bzzz://a",
                "message_type": "text",
                "content": {},
                "priority": "now",
            },
            "priority",
        ),
        (
            {
                "target_address": "bzzz://a",
                "message_type": "text",
                "content": {},
                "reply_to": "m" * 65,
            },
            "reply_to",
        ),
    ],
)
def test_bad_post_parameters_name_the_field(arguments: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidParameters) as caught:
        validate_input(PostInput, arguments)

    assert f"'{field}'" in caught.value.message
    assert caught.value.code == ErrorCode.INVALID_PARAMETERS


@pytest.mark.parametrize("number", [float("nan"), float("inf"), float("-inf")])
def test_content_with_non_json_numbers_is_refused(number: float) -> None:
    arguments = {"target_address": "bzzz://a", "message_type": "text", "content": {"x": number}}

    with pytest.raises(InvalidParameters) as caught:
        validate_input(PostInput, arguments)

    assert "'content'" in caught.value.message
    assert "NaN" in caught.value.message


def test_oversized_content_is_refused_before_it_reaches_the_network() -> None:
    arguments = {
        "target_address": "bzzz://a",
        "message_type": "text",
        "content": {"text": "x" * 300_000},
    }

    with pytest.raises(InvalidParameters) as caught:
        validate_input(PostInput, arguments)

    assert "too large" in caught.value.message
