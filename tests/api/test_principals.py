"""Principals act without pretending to be agents: an orchestrator or a person lists the
threads, tasks and escalations it reads, assigns tasks and invites agents as itself (the
sender and assigner ``token:<id>`` or ``principal:anonymous``), and every change is audited."""

from __future__ import annotations

import httpx
from audit.support import chain_of
from mcp import Client

from bzzz.mcp.server import build_server
from bzzz.node.core import Node
from bzzz.principal import LOCAL, Scope

from .test_console import Net, net  # noqa: F401 - the fixture
from .test_rest import HANDLE, announce, refused

TASK = {"type": "documentation", "description": "write the guide", "priority": "high"}


async def _audited(node: Node) -> list[tuple[str, str, str]]:
    """(principal, action, outcome) of each record of the node's audit chain."""
    return [(r.principal, r.action, r.outcome) for r in await chain_of(node)]


async def test_the_anonymous_caller_assigns_invites_and_lists_as_itself(
    http: httpx.AsyncClient, node: Node
) -> None:
    worker = await announce(http, "worker", "reviewer")
    await announce(http, "third", "tester")

    sent = await http.post("/agents/worker/tasks", json=TASK)
    opened = await http.post("/agents/worker/collaborate", json={"topic": "the guide"})
    thread = opened.json()["thread"]
    invited = await http.post("/agents/third/collaborate", json={"thread_id": thread["id"]})
    tasks = await http.get("/api/v1/tasks")
    threads = await http.get("/api/v1/threads")
    escalations = await http.get("/api/v1/escalations")
    inbox = await http.get(
        "/api/v1/content", params={"address": "bzzz://worker/inbox"}, headers={HANDLE: worker}
    )

    assert sent.status_code == 201, sent.text
    task_id = sent.json()["tasks"]["worker"]
    assert opened.status_code == 201, opened.text
    assert (thread["creator"], thread["participants"]) == ("principal:anonymous", ["worker"])
    assert invited.status_code == 201, invited.text
    assert invited.json()["post"]["delivery_results"]["recipients"] == ["third"]
    assert tasks.status_code == 200, tasks.text
    [task] = tasks.json()["tasks"]
    assert (task["id"], task["agent_id"], task["assigner"]) == (
        task_id,
        "worker",
        "principal:anonymous",
    )
    assert threads.status_code == 200, threads.text
    assert [t["id"] for t in threads.json()["threads"]] == [thread["id"]]
    assert escalations.status_code == 200 and escalations.json()["escalations"] == []
    senders = {m["message_type"]: m["sender"] for m in inbox.json()["content"]["messages"]}
    assert senders == {"task_assignment": "principal:anonymous"}
    done = await _audited(node)
    for path in ("/agents/worker/tasks", "/agents/worker/collaborate", "/agents/third/collaborate"):
        assert ("anonymous", f"http:POST {path}", "ok") in done


async def test_an_agent_finishes_a_task_a_principal_assigned_by_answering_its_sender(
    http: httpx.AsyncClient, node: Node
) -> None:
    worker = await announce(http, "worker", "reviewer")
    task_id = (await http.post("/agents/worker/tasks", json=TASK)).json()["tasks"]["worker"]
    server, _ = build_server(node)

    # An MCP client replies to the sender it was shown: the principal has no inbox, the
    # update reaches nobody and the task is done.
    async with Client(server) as client:
        done = await client.call_tool(
            "bzzz_post",
            {
                "target_address": "bzzz://principal:anonymous",
                "message_type": "task_complete",
                "content": {"task_id": task_id, "result": "the guide is written"},
                "agent_handle": worker,
            },
        )
    listed = (await http.get("/api/v1/tasks")).json()["tasks"]

    assert not done.is_error, done.content
    assert done.structured_content is not None
    assert done.structured_content["delivery_results"]["recipients"] == []
    [task] = listed
    assert (task["id"], task["status"], task["result"]) == (
        task_id,
        "completed",
        "the guide is written",
    )


async def test_a_principal_posts_into_a_thread_only_through_one_of_its_agents(
    http: httpx.AsyncClient,
) -> None:
    await announce(http, "worker", "reviewer")
    thread = (await http.post("/agents/worker/collaborate", json={"topic": "t"})).json()["thread"]

    answer = await http.post("/agents/worker/tasks", json=TASK | {"thread_id": thread["id"]})

    assert "acts as no agent" in refused(answer, 400, "INVALID_PARAMETERS")["error"]
    tasks = (await http.get("/api/v1/tasks")).json()["tasks"]
    assert tasks == []


async def test_a_team_token_assigns_to_its_agents_and_another_project_sees_and_assigns_nothing(
    net: Net,  # noqa: F811 - the imported fixture
) -> None:
    team = await net.token("shop-team", "shop")
    record, secret = await net.node.access.create_token(
        LOCAL, "shop-lead", ["shop"], ["*"], Scope.ADMIN, None
    )
    lead = {"Authorization": f"Bearer {secret}"}
    rival = await net.token("rival-team", "garden")
    reader = await net.token("shop-reader", "shop", scope=Scope.READ)
    await net.ok("POST", "/api/v1/agents", team, json={"agent_id": "dev", "role": "developer"})

    sent = await net.ok("POST", "/agents/dev/tasks", lead, json=TASK)
    opened = await net.ok("POST", "/agents/dev/collaborate", lead, json={"topic": "the guide"})
    thread_id = opened["thread"]["id"]

    for who in (team, lead):
        [task] = (await net.ok("GET", "/api/v1/tasks", who))["tasks"]
        assert (task["id"], task["assigner"]) == (sent["tasks"]["dev"], f"token:{record.id}")
        threads = (await net.ok("GET", "/api/v1/threads", who))["threads"]
        assert [t["id"] for t in threads] == [thread_id]
    assert (await net.ok("GET", "/api/v1/tasks", rival))["tasks"] == []
    assert (await net.ok("GET", "/api/v1/threads", rival))["threads"] == []
    assert (await net.ok("GET", "/api/v1/escalations", rival))["escalations"] == []
    refused(await net.http.post("/agents/dev/tasks", json=TASK, headers=rival), 404,
            "AGENT_NOT_FOUND")  # fmt: skip
    refused(await net.http.post("/agents/dev/collaborate", json={"thread_id": thread_id},
                                headers=rival), 404, "THREAD_NOT_FOUND")  # fmt: skip
    refused(await net.http.post("/agents/dev/tasks", json=TASK, headers=reader), 403,
            "PERMISSION_DENIED")  # fmt: skip
    refused(await net.http.get("/api/v1/tasks", params={"agent_id": "dev"}, headers=rival), 404,
            "AGENT_NOT_FOUND")  # fmt: skip
    assert (f"token:{record.id}", "http:POST /agents/dev/tasks", "ok") in await _audited(net.node)


async def test_an_orchestrator_assigns_through_api_v1_and_follows_its_projects_work(
    net: Net,  # noqa: F811 - the imported fixture
) -> None:
    team = await net.token("shop-team", "shop")
    ci, ci_secret = await net.node.access.create_token(
        LOCAL, "shop-ci", ["shop"], ["*"], Scope.WRITE, None
    )
    orchestrator = {"Authorization": f"Bearer {ci_secret}"}
    lead = await net.token("shop-lead", "shop", scope=Scope.ADMIN)
    for agent_id, role in (("dev", "developer"), ("qa", "tester")):
        await net.ok("POST", "/api/v1/agents", team, json={"agent_id": agent_id, "role": role})
    # The team's own agent opens a thread: the lead (an admin of shop) did not create it.
    opened = await net.ok(
        "POST", "/api/v1/agents/qa/collaborate", team, json={"topic": "release", "agent_id": "dev"}
    )
    thread_id = opened["thread"]["id"]
    given = await net.ok("POST", "/agents/qa/tasks", team, json=TASK | {"agent_id": "dev"})

    sent = await net.ok("POST", "/api/v1/agents/dev/tasks", orchestrator, json=TASK)
    mine = (await net.ok("GET", "/api/v1/tasks", orchestrator))["tasks"]
    invited = await net.http.post(
        "/api/v1/agents/qa/collaborate", json={"thread_id": thread_id}, headers=orchestrator
    )
    lead_threads = (await net.ok("GET", "/api/v1/threads", lead))["threads"]
    lead_tasks = (await net.ok("GET", "/api/v1/tasks", lead))["tasks"]

    # It follows the task it gave and, as a token of shop, the project's other work: the
    # team's task between its agents, the thread none of its agents joined.
    assert {(t["id"], t["agent_id"], t["assigner"], t["project"]) for t in mine} == {
        (sent["tasks"]["dev"], "dev", f"token:{ci.id}", "shop"),
        (given["tasks"]["qa"], "qa", "dev", "shop"),
    }
    assert [t["id"] for t in (await net.ok("GET", "/api/v1/threads", orchestrator))["threads"]] == [
        thread_id
    ]
    # It reads the thread, so it may invite an agent of the project into it (a post to qa).
    assert invited.status_code == 201 and invited.json()["mode"] == "invited", invited.text
    assert [t["id"] for t in lead_threads] == [thread_id]
    assert {t["id"] for t in lead_tasks} == {sent["tasks"]["dev"], given["tasks"]["qa"]}
    assert (f"token:{ci.id}", "http:POST /api/v1/agents/dev/tasks", "ok") in await _audited(
        net.node
    )


async def test_a_task_given_to_an_agent_that_moved_out_of_the_callers_projects_is_not_shown(
    net: Net,  # noqa: F811 - the imported fixture
) -> None:
    both = await net.token("two-teams", "shop")
    _, wide_secret = await net.node.access.create_token(
        LOCAL, "shop-and-garden", ["shop", "garden"], ["*"], Scope.WRITE, None
    )
    wide = {"Authorization": f"Bearer {wide_secret}"}
    orchestrator = await net.token("shop-ci", "shop")
    await net.ok("POST", "/api/v1/agents", both, json={"agent_id": "stays", "role": "developer"})
    mover = {"agent_id": "mover", "role": "developer", "project": "shop"}
    await net.ok("POST", "/api/v1/agents", wide, json=mover)
    kept = await net.ok("POST", "/api/v1/agents/stays/tasks", orchestrator, json=TASK)
    await net.ok("POST", "/api/v1/agents/mover/tasks", orchestrator, json=TASK)
    before = (await net.ok("GET", "/api/v1/tasks", orchestrator))["tasks"]

    await net.ok("POST", "/api/v1/agents", wide, json=mover | {"project": "garden"})
    after = (await net.ok("GET", "/api/v1/tasks", orchestrator))["tasks"]

    assert sorted(t["agent_id"] for t in before) == ["mover", "stays"]
    assert [(t["id"], t["project"]) for t in after] == [(kept["tasks"]["stays"], "shop")]
