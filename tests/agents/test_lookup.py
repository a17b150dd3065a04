"""bzzz_lookup: agents found by semantic address and filters, best first."""

from __future__ import annotations

from typing import Any

import pytest

from bzzz.errors import ErrorCode, InvalidParameters
from bzzz.eventlog import LOCAL_CALLER, Caller
from bzzz.node.core import Node
from bzzz.schemas import AnnounceInput, LookupInput, PostInput


async def announce(node: Node, agent_id: str, role: str, **fields: Any) -> None:
    session = fields.pop("session", f"session-{agent_id}")
    await node.agents.announce(
        Caller(session), AnnounceInput(agent_id=agent_id, role=role, **fields)
    )


async def lookup(node: Node, address: str, **criteria: Any) -> dict[str, Any]:
    params = LookupInput(semantic_address=address, filter_criteria=criteria or None)
    return await node.agents.lookup(LOCAL_CALLER, params)


def ids(result: dict[str, Any]) -> list[str]:
    return [m["id"] for m in result["matches"]]


async def assign(node: Node, boss: str, agent_id: str) -> str:
    posted = await node.conversations.post(
        Caller(f"session-{boss}"),
        PostInput(
            target_address=f"bzzz://{agent_id}",
            message_type="task_assignment",
            content={"description": "do it"},
        ),
    )
    task_id: str = posted["tasks"][agent_id]
    return task_id


async def finish(node: Node, agent_id: str, task_id: str, kind: str) -> None:
    await node.conversations.post(
        Caller(f"session-{agent_id}"),
        PostInput(target_address="bzzz://boss", message_type=kind, content={"task_id": task_id}),
    )


async def test_a_wildcard_address_finds_every_agent(node: Node) -> None:
    await announce(node, "arch-1", "architect")
    await announce(node, "rev-1", "reviewer")

    result = await lookup(node, "bzzz://*:*@*:*")

    assert sorted(ids(result)) == ["arch-1", "rev-1"]
    assert result["count"] == 2
    assert result["success"] is True
    assert result["query_time"].endswith("Z")


async def test_a_role_address_finds_only_that_role(node: Node) -> None:
    await announce(node, "arch-1", "architect")
    await announce(node, "arch-2", "architect")
    await announce(node, "rev-1", "reviewer")

    result = await lookup(node, "bzzz://*:architect@*")

    assert sorted(ids(result)) == ["arch-1", "arch-2"]


async def test_an_agent_address_finds_that_agent_only_if_the_role_fits(node: Node) -> None:
    await announce(node, "arch-1", "architect")

    assert ids(await lookup(node, "bzzz://arch-1")) == ["arch-1"]
    assert ids(await lookup(node, "bzzz://arch-1:architect@*")) == ["arch-1"]
    assert ids(await lookup(node, "bzzz://arch-1:reviewer@*")) == []
    assert ids(await lookup(node, "bzzz://nobody")) == []


async def test_agents_without_a_project_match_any_project(node: Node) -> None:
    await announce(node, "in-alpha", "developer", project="alpha")
    await announce(node, "in-beta", "developer", project="beta")
    await announce(node, "anywhere", "developer")

    result = await lookup(node, "bzzz://*:developer@alpha")

    assert sorted(ids(result)) == ["anywhere", "in-alpha"]


async def test_agents_without_a_task_match_any_task(node: Node) -> None:
    await announce(node, "on-api", "developer", project="alpha", task="api")
    await announce(node, "on-ui", "developer", project="alpha", task="ui")
    await announce(node, "any-task", "developer", project="alpha")

    result = await lookup(node, "bzzz://*:*@alpha:api")

    assert sorted(ids(result)) == ["any-task", "on-api"]
    assert sorted(ids(await lookup(node, "bzzz://*:*@*:ui"))) == ["any-task", "on-ui"]


async def test_expertise_matches_capabilities_and_specialization(node: Node) -> None:
    await announce(node, "py", "developer", capabilities=["Python", "testing"])
    await announce(node, "dist", "developer", specialization="distributed_systems")
    await announce(node, "both", "developer", capabilities=["python"], specialization="distributed")

    assert sorted(ids(await lookup(node, "bzzz://*", expertise=["python"]))) == ["both", "py"]
    assert sorted(ids(await lookup(node, "bzzz://*", expertise=["distributed"]))) == [
        "both",
        "dist",
    ]
    # Every listed expertise is required.
    assert ids(await lookup(node, "bzzz://*", expertise=["python", "distributed"])) == ["both"]


async def test_availability_leaves_out_offline_and_full_agents(node: Node) -> None:
    await announce(node, "boss", "architect")
    await announce(node, "free", "developer")
    await announce(node, "full", "developer", max_tasks=1)
    await announce(node, "gone", "developer")
    await assign(node, "boss", "full")
    await node.agents.session_ended(Caller("session-gone"))

    everyone = await lookup(node, "bzzz://*:developer@*")
    available = await lookup(node, "bzzz://*:developer@*", availability=True)

    assert sorted(ids(everyone)) == ["free", "full", "gone"]
    assert ids(available) == ["free"]
    by_id = {m["id"]: m for m in everyone["matches"]}
    assert (by_id["full"]["available"], by_id["full"]["status"]) == (False, "busy")
    assert (by_id["gone"]["available"], by_id["gone"]["status"]) == (False, "offline")


async def test_performance_threshold_leaves_out_agents_that_failed(node: Node) -> None:
    await announce(node, "boss", "architect")
    await announce(node, "good", "developer")
    await announce(node, "bad", "developer")
    await finish(node, "good", await assign(node, "boss", "good"), "task_complete")
    await finish(node, "bad", await assign(node, "boss", "bad"), "task_failed")

    result = await lookup(node, "bzzz://*:developer@*", performance_threshold=0.8)

    assert ids(result) == ["good"]
    assert result["matches"][0]["performance"] >= 0.8


async def test_matches_are_scored_0_to_100_best_first(node: Node) -> None:
    await announce(node, "boss", "architect")
    await announce(node, "expert", "developer", capabilities=["rust"])
    await announce(node, "novice", "developer")
    await announce(node, "failing", "developer", capabilities=["rust"])
    await finish(node, "failing", await assign(node, "boss", "failing"), "task_failed")

    result = await lookup(node, "bzzz://*:developer@*")
    with_rust = await lookup(node, "bzzz://*:developer@*", expertise=["rust"])

    scores = [m["score"] for m in result["matches"]]
    assert all(0 <= s <= 100 for s in scores)
    assert scores == sorted(scores, reverse=True)
    assert ids(result)[-1] == "failing"
    assert ids(with_rust) == ["expert", "failing"]
    assert with_rust["matches"][0]["score"] > with_rust["matches"][1]["score"]


async def test_lookup_returns_the_parsed_address_and_count(node: Node) -> None:
    await announce(node, "arch-1", "architect", project="myproject", task="api_design")
    address = "bzzz://*:architect@myproject:api_design"

    result = await lookup(node, address)

    assert result["address"] == address
    assert result["parsed_address"] == {
        "agent": None,
        "role": "architect",
        "project": "myproject",
        "task": "api_design",
        "path": None,
        "raw": address,
    }
    assert result["count"] == 1
    assert result["matches"][0]["address"] == "bzzz://arch-1:architect@myproject:api_design"


async def test_lookup_limit_caps_the_matches_but_not_the_total(node: Node) -> None:
    for n in range(4):
        await announce(node, f"dev-{n}", "developer")

    result = await node.agents.lookup(
        LOCAL_CALLER, LookupInput(semantic_address="bzzz://*", limit=2)
    )

    assert result["count"] == 2
    assert result["total_matches"] == 4


@pytest.mark.parametrize(
    "address",
    ["http://agent", "bzzz://a:b:c@x", "bzzz://a@b@c", "bzzz://agent/../inbox", "bzzz://ag ent"],
)
async def test_a_malformed_address_is_invalid_parameters(node: Node, address: str) -> None:
    with pytest.raises(InvalidParameters) as caught:
        await lookup(node, address)

    assert caught.value.code == ErrorCode.INVALID_PARAMETERS
    assert caught.value.message
