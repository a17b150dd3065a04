"""Everything a rule acts for stays in the thread's project, and a thread of another project is
THREAD_NOT_FOUND to every action (as a thread that does not exist)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import SecretStr

from bzzz.access.keys import principal_key
from bzzz.clock import ManualClock
from bzzz.errors import BzzzError, ThreadNotFound
from bzzz.eventlog import Caller
from bzzz.node.core import Node
from bzzz.principal import ALL, Principal, Scope, principal
from bzzz.schemas import AnnounceInput, GetInput, PostInput, ThreadInput

from .conftest import NodeFactory, ReceiverFactory, events_of, rule, thread_view, watch

ALPHA = principal("token:alpha", "token", ["alpha"], [ALL], Scope.WRITE, "alpha team")
BETA = principal("token:beta", "token", ["beta"], [ALL], Scope.WRITE, "beta team")
BETA_PERSON = principal("token:bea", "token", ["beta"], ["human"], Scope.WRITE, "bea")
STUCK = [{"type": "no_progress", "threshold": True, "timeframe": 600}]
SECRET = "human-channel-test-secret"


def as_(who: Principal) -> Caller:
    return Caller(principal_key(who), who)


async def announce(node: Node, who: Principal, agent_id: str, role: str, **extra: Any) -> None:
    params = AnnounceInput(agent_id=agent_id, role=role, **extra)
    await node.agents.announce(as_(who), params)


async def beta_thread(node: Node) -> str:
    """A thread of project beta (beta-lead and beta-dev), and alpha's architect and expert."""
    await announce(node, ALPHA, "alpha-arch", "architect", project="alpha")
    await announce(node, ALPHA, "alpha-dba", "dba", project="alpha", capabilities=["databases"])
    await announce(node, BETA, "beta-lead", "developer", project="beta")
    await announce(node, BETA, "beta-dev", "developer", project="beta")
    created = await node.conversations.thread(
        as_(BETA),
        ThreadInput(action="create", topic="beta secrets", participants=["beta-dev"],
                    agent_id="beta-lead"),
    )  # fmt: skip
    thread_id: str = created["thread_id"]
    return thread_id


def thread_state(view: dict[str, Any]) -> tuple[Any, ...]:
    """What an action on a thread could change."""
    return (
        view["status"],
        view["participants"],
        view["message_count"],
        [(e["id"], e.get("resolved")) for e in view["escalation_history"]],
    )


async def test_an_escalation_in_a_project_without_an_architect_turns_to_humans_not_elsewhere(
    make_node: NodeFactory, clock: ManualClock, http_receiver: ReceiverFactory
) -> None:
    actions = [
        {"type": "escalate_to_architect", "priority": "high"},
        {"type": "request_expert", "expertise": ["databases"]},
        {"type": "create_decision_thread", "participants": ["architect"]},
    ]
    async with http_receiver(lambda _n: 200) as human:
        channel = {"human_channel_url": human.url, "human_channel_secret": SecretStr(SECRET)}
        async with make_node([rule("stuck", STUCK, actions)], escalation=channel) as node:
            told = await watch(node, "human_notification")
            thread_id = await beta_thread(node)
            clock.advance(601)
            await node.escalations.check_all()
            await node.escalations.run_actions()
            view = await thread_view(node, thread_id)
            notifications = await events_of(node, told)
            before = thread_state(view)
            refusals = await alphas_attempts(node, thread_id, view)
            after = thread_state(await thread_view(node, thread_id))
            listed = await node.conversations.thread(
                as_(ALPHA), ThreadInput(action="list", agent_id="alpha-arch")
            )
            # Addressed to humans now: beta's people read it in the console.
            read_by_person = await node.agents.get(
                as_(BETA_PERSON), GetInput(address=f"bzzz://*/threads/{thread_id}")
            )

    architect, expert, decision = view["escalation_history"][0]["actions"]
    assert (architect["type"], architect["requested"]) == ("notify_human", "escalate_to_architect")
    assert architect["status"] == "done"
    assert architect["result"]["escalated_to"] == "human"
    assert architect["result"]["invited"] is None
    assert architect["result"]["delivered"] is True
    [request] = human.requests
    assert request.json()["thread"]["id"] == thread_id
    assert [e["data"]["escalation"]["threadId"] for e in notifications] == [thread_id]
    # alpha's architect and its database expert fit the rule; neither is beta's.
    assert (expert["status"], decision["status"]) == ("failed", "failed")
    assert "in the thread's project" in expert["error"]
    assert "in the thread's project" in decision["error"]
    assert sorted(view["participants"]) == ["beta-dev", "beta-lead"]
    assert refusals == dict.fromkeys(refusals, "THREAD_NOT_FOUND")
    assert after == before
    assert listed["result"] == []
    assert read_by_person["content"]["thread"]["id"] == thread_id


async def alphas_attempts(node: Node, thread_id: str, view: dict[str, Any]) -> dict[str, str]:
    """What alpha's token gets for each action on beta's thread, as its architect."""
    alpha = as_(ALPHA)
    thread_actions: dict[str, dict[str, Any]] = {
        "join": {},
        "leave": {},
        "summarize": {},
        "pause": {"reason": "mine now"},
        "resume": {},
        "resolve": {"reason": "resolved by alpha"},
        "close": {"reason": "closed by alpha"},
    }
    codes: dict[str, str] = {}
    for action, extra in thread_actions.items():
        params = ThreadInput(action=action, thread_id=thread_id, agent_id="alpha-arch", **extra)
        codes[action] = await code_of(node.conversations.thread(alpha, params))
    post = PostInput(message_type="text", content={"text": "hi"}, thread_id=thread_id,
                     agent_id="alpha-arch")  # fmt: skip
    codes["post"] = await code_of(node.conversations.post(alpha, post))
    read = GetInput(address=f"bzzz://*/threads/{thread_id}")
    codes["read"] = await code_of(node.agents.get(alpha, read))
    return codes


async def code_of(call: Any) -> str:
    """The error code a call fails with (it must fail)."""
    with pytest.raises(BzzzError) as caught:
        await call
    return str(caught.value.code)


async def test_escalate_to_architect_invites_the_architect_of_the_threads_own_project(
    make_node: NodeFactory, clock: ManualClock
) -> None:
    actions = [{"type": "escalate_to_architect"}]
    async with make_node([rule("stuck", STUCK, actions)]) as node:
        await announce(node, BETA, "beta-arch", "architect", project="beta")
        thread_id = await beta_thread(node)
        clock.advance(601)
        await node.escalations.check_all()
        await node.escalations.run_actions()
        view = await thread_view(node, thread_id)

    [action] = view["escalation_history"][0]["actions"]
    assert action["result"] == {"invited": "beta-arch", "role": "architect"}
    assert sorted(view["participants"]) == ["beta-arch", "beta-dev", "beta-lead"]


async def test_a_decision_thread_is_its_parents_projects_and_its_members_act_in_it(
    make_node: NodeFactory, clock: ManualClock
) -> None:
    actions = [{"type": "create_decision_thread", "participants": ["architect"]}]
    async with make_node([rule("split", STUCK, actions)]) as node:
        await announce(node, BETA, "beta-arch", "architect", project="beta")
        thread_id = await beta_thread(node)
        clock.advance(601)
        await node.escalations.check_all()
        await node.escalations.run_actions()
        [action] = (await thread_view(node, thread_id))["escalation_history"][0]["actions"]
        decision_id = action["result"]["thread_id"]
        post = PostInput(message_type="decision", content={"decision": "go"},
                         thread_id=decision_id, agent_id="beta-arch")  # fmt: skip
        posted = await node.conversations.post(as_(BETA), post)
        hidden = await code_of(
            node.agents.get(as_(ALPHA), GetInput(address=f"bzzz://*/threads/{decision_id}"))
        )
        decision = await thread_view(node, decision_id)

    assert decision["metadata"]["project"] == "beta"
    assert sorted(decision["participants"]) == ["beta-arch", "beta-dev", "beta-lead"]
    assert posted["success"] is True
    assert hidden == "THREAD_NOT_FOUND"


async def test_every_action_on_another_projects_thread_answers_as_for_no_thread(
    node: Node,
) -> None:
    thread_id = await beta_thread(node)
    before = thread_state(await thread_view(node, thread_id))

    seen = await alphas_attempts(node, thread_id, {})
    missing = await alphas_attempts(node, "thread-01NOSUCHTHREAD000000000000", {})
    after = thread_state(await thread_view(node, thread_id))

    assert seen == missing == dict.fromkeys(seen, "THREAD_NOT_FOUND")
    assert set(seen) == {"join", "leave", "summarize", "pause", "resume", "resolve", "close",
                         "post", "read"}  # fmt: skip
    assert after == before
    with pytest.raises(ThreadNotFound) as caught:
        await node.conversations.post(
            as_(ALPHA),
            PostInput(message_type="text", content={"text": "x"}, thread_id=thread_id,
                      agent_id="alpha-arch"),
        )  # fmt: skip
    assert "participant" not in caught.value.message


async def test_a_review_chooses_reviewers_of_its_project_and_reviews_only_its_projects_tasks(
    node: Node,
) -> None:
    await announce(node, ALPHA, "alpha-rev", "reviewer", project="alpha")
    await announce(node, ALPHA, "alpha-dev", "developer", project="alpha")
    await announce(node, BETA, "beta-lead", "developer", project="beta")
    task = await node.conversations.post(
        as_(ALPHA),
        PostInput(target_address="bzzz://alpha-dev", message_type="task_assignment",
                  content={"type": "code_review", "description": "alpha's secret design"},
                  agent_id="alpha-rev"),
    )  # fmt: skip
    alpha_task = task["tasks"]["alpha-dev"]

    no_reviewer = await code_of(
        node.conversations.thread(
            as_(BETA), ThreadInput(action="review", roles=["reviewer"], topic="beta work")
        )
    )  # alpha's reviewer is available, but not beta's
    assert no_reviewer == "AGENT_NOT_FOUND"
    await announce(node, BETA, "beta-rev", "reviewer", project="beta")
    review = await node.conversations.thread(
        as_(BETA),
        ThreadInput(action="review", roles=["reviewer"], topic="beta work", agent_id="beta-lead"),
    )
    assert sorted(review["result"]["participants"]) == ["beta-lead", "beta-rev"]
    foreign = await code_of(
        node.conversations.thread(
            as_(BETA),
            ThreadInput(
                action="review", roles=["reviewer"], task_id=alpha_task, agent_id="beta-lead"
            ),
        )
    )
    assert foreign == "INVALID_PARAMETERS"


async def test_a_thread_is_created_only_with_agents_of_its_project(node: Node) -> None:
    both = principal("token:both", "token", ["alpha", "beta"], [ALL], Scope.WRITE, "both teams")
    await announce(node, both, "alpha-lead", "developer", project="alpha")
    await announce(node, both, "beta-dev", "developer", project="beta")
    await announce(node, both, "alpha-dev", "developer", project="alpha")

    with pytest.raises(BzzzError) as caught:
        await node.conversations.thread(
            as_(both),
            ThreadInput(action="create", topic="mixed", participants=["alpha-dev", "beta-dev"],
                        agent_id="alpha-lead"),
        )  # fmt: skip
    listed = await node.conversations.thread(
        as_(both), ThreadInput(action="list", agent_id="alpha-lead")
    )
    created = await node.conversations.thread(
        as_(both),
        ThreadInput(action="create", topic="alpha only", participants=["alpha-dev"],
                    agent_id="alpha-lead"),
    )  # fmt: skip

    thread_id = created["result"]["id"]
    joining = await code_of(
        node.conversations.thread(
            as_(both), ThreadInput(action="join", thread_id=thread_id, agent_id="beta-dev")
        )
    )
    view = await thread_view(node, thread_id)

    assert caught.value.code == "INVALID_PARAMETERS"
    assert caught.value.details["others"] == ["beta-dev"]
    assert listed["result"] == []  # the refusal made no thread
    assert sorted(created["result"]["participants"]) == ["alpha-dev", "alpha-lead"]
    assert joining == "INVALID_PARAMETERS"
    assert sorted(view["participants"]) == ["alpha-dev", "alpha-lead"]
