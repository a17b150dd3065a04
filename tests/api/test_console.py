"""The dashboard's routes and the human console over HTTP: /ui, whoami, overviews, a person's
posts and resolutions (as human-<name>), and who may do what."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from importlib import resources
from typing import Any

import httpx
import pytest
from audit.support import chain_of

from bzzz.access.keys import principal_key
from bzzz.api.app import build_app
from bzzz.clock import ManualClock
from bzzz.config import EscalationRuleConfig, Settings
from bzzz.conversations.monitor import ThreadMonitor
from bzzz.eventlog import Caller
from bzzz.llm.types import TokenUsage
from bzzz.mcp.server import build_server
from bzzz.network.memory import InMemoryBus
from bzzz.node.core import Node
from bzzz.principal import LOCAL, Scope
from bzzz.schemas import PostInput

from .test_escalations import STUCK, _idle
from .test_rest import refused


@dataclass
class Net:
    """A node that requires credentials, on a manual clock with the 'stuck' rule."""

    node: Node
    clock: ManualClock
    http: httpx.AsyncClient

    async def token(
        self, name: str, project: str, *roles: str, scope: Scope = Scope.WRITE
    ) -> dict[str, str]:
        """The Authorization header of a new network token."""
        _, secret = await self.node.access.create_token(
            LOCAL, name, [project], list(roles) or ["*"], scope, None
        )
        return {"Authorization": f"Bearer {secret}"}

    async def ok(self, method: str, path: str, who: dict[str, str], **kw: Any) -> Any:
        answer = await self.http.request(method, path, headers=who, **kw)
        assert answer.status_code in (200, 201), answer.text
        return answer.json()


@pytest.fixture
async def net(
    settings: Settings, memory_bus: InMemoryBus, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Net]:
    monkeypatch.setattr(ThreadMonitor, "run", _idle)
    settings.auth.required = True
    settings.conversation.default_timeout = 10**7
    settings.conversation.escalation_rules = [EscalationRuleConfig.model_validate(STUCK)]
    clock = ManualClock()
    async with Node(settings, bus=memory_bus, clock=clock) as node:
        server, _ = build_server(node)
        transport = httpx.ASGITransport(app=build_app(node, server, "127.0.0.1"))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:7331") as http:
            yield Net(node, clock, http)


async def escalated_thread(net: Net) -> tuple[str, dict[str, str], dict[str, str]]:
    """arch and dev (one team token each, project shop) in a thread that escalated to humans."""
    arch = await net.token("arch-team", "shop")
    dev = await net.token("dev-team", "shop")
    await net.ok("POST", "/api/v1/agents", arch, json={"agent_id": "arch", "role": "architect"})
    await net.ok("POST", "/api/v1/agents", dev, json={"agent_id": "dev", "role": "developer"})
    opened = await net.ok("POST", "/agents/dev/collaborate", arch, json={"topic": "API"})
    thread_id = opened["thread"]["id"]
    net.clock.advance(601)
    await net.node.escalations.check_all()
    return thread_id, arch, dev


async def test_the_page_is_served_without_a_credential_with_a_strict_policy(net: Net) -> None:
    page = await net.http.get("/ui")
    script = await net.http.get("/ui/app.js")
    missing = await net.http.get("/ui/secrets.py")
    data = await net.http.get("/api/v1/agents")

    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    policy = page.headers["content-security-policy"]
    assert "script-src 'self'" in policy and "unsafe-inline" not in policy
    assert "default-src 'none'" in policy and "frame-ancestors 'none'" in policy
    assert page.headers["x-content-type-options"] == "nosniff"
    assert script.headers["content-type"].startswith("text/javascript")
    assert script.headers["content-security-policy"] == policy
    assert missing.status_code == 404
    assert data.status_code == 401


def test_the_page_has_no_inline_script_and_never_writes_markup_from_data() -> None:
    folder = resources.files("bzzz.ui").joinpath("static")
    html = folder.joinpath("index.html").read_text()
    scripts = [f.read_text() for f in folder.iterdir() if f.name.endswith(".js")]

    assert re.findall(r"<script\b[^>]*>", html) == ['<script type="module" src="/ui/app.js">']
    assert re.search(r"<[^>]*\son[a-z]+\s*=", html) is None  # no inline event handler
    assert " style=" not in html
    assert len(scripts) >= 5
    for source in scripts:
        assert "innerHTML" not in source and "outerHTML" not in source
        assert "insertAdjacentHTML" not in source and "eval(" not in source


async def test_whoami_names_the_grants_and_the_person_of_a_human_token(net: Net) -> None:
    alice = await net.token("Alice Smith", "shop", "human")
    team = await net.token("team", "shop")

    person = await net.ok("GET", "/api/v1/whoami", alice)
    agentless = await net.ok("GET", "/api/v1/whoami", team)

    assert person["human"] == {"agent_id": "human-alice-smith"}
    assert person["principal"]["roles"] == ["human"]
    assert person["admin"] is False
    assert agentless["human"] is None  # a '*' role grant does not make a person
    assert team["Authorization"].removeprefix("Bearer ") not in str(agentless)


async def test_a_person_reads_posts_and_resolves_and_the_agents_read_the_reply(net: Net) -> None:
    thread_id, _, dev = await escalated_thread(net)
    alice = await net.token("alice", "shop", "human")
    path = f"/api/v1/threads/{thread_id}"

    [escalation] = (await net.ok("GET", "/api/v1/escalations", alice))["escalations"]
    seen = await net.ok("GET", path, alice)
    posted = await net.http.post(
        f"{path}/messages", headers=alice, json={"text": "Keep it REST", "message_type": "decision"}
    )
    resolved = await net.ok(
        "POST",
        f"/api/v1/escalations/{escalation['id']}/resolve",
        alice,
        json={"reason": "decided: REST", "as_human": True},
    )
    read_by_dev = await net.ok("GET", path, dev)

    assert seen["content"]["thread"]["status"] == "escalated"
    assert posted.status_code == 201, posted.text
    assert resolved["thread"]["status"] == "active"
    thread = read_by_dev["content"]["thread"]
    assert thread["participants"] == ["arch", "dev", "human-alice"]
    [reply] = [m for m in thread["messages"] if m["sender"] == "human-alice"]
    assert (reply["content"], reply["messageType"]) == ("Keep it REST", "decision")
    agent = await net.ok("GET", "/api/v1/agents/human-alice", dev)
    assert (agent["content"]["agent_info"]["role"], agent["content"]["agent_info"]["project"]) == (
        "human",
        "shop",
    )
    records = await chain_of(net.node)
    mine = [(r.action, r.outcome) for r in records if r.principal.startswith("token:")]
    assert (f"http:POST {path}/messages", "ok") in mine
    assert (f"http:POST /api/v1/escalations/{escalation['id']}/resolve", "ok") in mine


async def test_consensus_waits_for_the_persons_stance(net: Net) -> None:
    thread_id, arch, dev = await escalated_thread(net)
    alice = await net.token("alice", "shop", "human")
    path = f"/api/v1/threads/{thread_id}"
    [escalation] = (await net.ok("GET", "/api/v1/escalations", alice))["escalations"]
    await net.ok(
        "POST",
        f"/api/v1/escalations/{escalation['id']}/resolve",
        alice,
        json={"reason": "go on", "as_human": True},
    )
    decision = await post_as(
        net,
        arch,
        {"thread_id": thread_id, "message_type": "decision", "content": {"text": "Use /v2"}},
    )
    stance = {"reply_to": decision["message_id"], "stance": "agree"}

    agents_agree = await post_as(
        net,
        dev,
        {"thread_id": thread_id, "message_type": "text", "content": {"text": "yes"}, **stance},
    )
    person_agrees = await net.ok("POST", f"{path}/messages", alice, json={"text": "Yes", **stance})
    thread = (await net.ok("GET", path, alice))["content"]["thread"]

    assert "consensus" not in agents_agree  # human-alice is a participant: not everyone agreed
    assert person_agrees["stance"] == {
        "stance": "agree",
        "source": "agent",
        "on": decision["message_id"],
    }
    assert sorted(thread["consensus"]["agreed_by"]) == ["arch", "dev", "human-alice"]
    assert thread["status"] == "completed"


async def post_as(net: Net, who: dict[str, str], body: dict[str, Any]) -> dict[str, Any]:
    """bzzz_post as a token's agent, with the caller a REST route builds (no route takes a
    stance for an agent: MCP does)."""
    principal = await net.node.access.authenticate(who["Authorization"])
    assert principal is not None
    caller = Caller(principal_key(principal), principal)
    return await net.node.conversations.post(caller, PostInput.model_validate(body))


async def test_only_people_with_write_post_or_resolve_as_a_person(net: Net) -> None:
    thread_id, arch, _ = await escalated_thread(net)
    reader = await net.token("bob", "shop", "human", scope=Scope.READ)
    team = await net.token("carol", "shop")
    stranger = await net.token("dave", "elsewhere", "human")
    path = f"/api/v1/threads/{thread_id}"
    [escalation] = (await net.ok("GET", "/api/v1/escalations", arch))["escalations"]
    resolve = f"/api/v1/escalations/{escalation['id']}/resolve"
    body = {"reason": "no", "as_human": True}

    no_role = refused(
        await net.http.post(f"{path}/messages", headers=team, json={"text": "x"}),
        403,
        "PERMISSION_DENIED",
    )
    read_only = refused(
        await net.http.post(resolve, headers=reader, json=body), 403, "PERMISSION_DENIED"
    )
    refused(
        await net.http.post(f"{path}/messages", headers=stranger, json={"text": "x"}),
        404,
        "THREAD_NOT_FOUND",
    )
    # A token of the project reads its threads (the team's), not another project's.
    team_reads = (await net.ok("GET", path, team))["content"]["thread"]
    refused(await net.http.get(path, headers=stranger), 404, "THREAD_NOT_FOUND")
    refused(
        await net.http.post(f"{path}/messages", headers=arch, json={"text": ""}),
        400,
        "INVALID_PARAMETERS",
    )

    assert team_reads["id"] == thread_id
    assert no_role["details"]["missing"] == "role:human"
    assert read_only["details"]["missing"] == "scope:write"
    assert (await net.ok("GET", "/api/v1/escalations", stranger))["escalations"] == []
    thread = (await net.ok("GET", path, arch))["content"]["thread"]
    assert thread["participants"] == ["arch", "dev"]
    assert thread["status"] == "escalated"


async def test_human_ids_belong_to_the_human_role_and_back(net: Net) -> None:
    team = await net.token("team", "shop")

    fake = refused(
        await net.http.post(
            "/api/v1/agents", headers=team, json={"agent_id": "human-alice", "role": "reviewer"}
        ),
        400,
        "INVALID_PARAMETERS",
    )
    refused(
        await net.http.post(
            "/api/v1/agents", headers=team, json={"agent_id": "alice", "role": "human"}
        ),
        400,
        "INVALID_PARAMETERS",
    )

    assert "human-" in fake["error"]
    assert (await net.ok("GET", "/api/v1/agents", team))["matches"] == []


async def test_overviews_list_only_what_the_caller_reads(net: Net) -> None:
    thread_id, arch, dev = await escalated_thread(net)
    await net.ok(
        "POST", "/agents/dev/tasks", arch, json={"type": "code_review", "description": "review it"}
    )
    other = await net.token("other", "lab")
    await net.ok("POST", "/api/v1/agents", other, json={"agent_id": "lab-1", "role": "dev"})
    admin = await net.token("ops", "shop", scope=Scope.ADMIN)

    mine = await net.ok("GET", "/api/v1/overview/threads", dev)
    theirs = await net.ok("GET", "/api/v1/overview/threads", other)
    all_shop = await net.ok("GET", "/api/v1/overview/tasks", admin)
    dev_tasks = await net.ok("GET", "/api/v1/overview/tasks", dev)
    lab_tasks = await net.ok("GET", "/api/v1/overview/tasks", other)
    content = await net.ok("GET", "/api/v1/content", dev, params={"address": "bzzz://dev/tasks"})

    [thread] = mine["threads"]
    assert (thread["id"], thread["open_escalations"], thread["asks_a_human"]) == (
        thread_id,
        1,
        True,
    )
    assert theirs["threads"] == []
    assert [t["agent_id"] for t in all_shop["tasks"]] == ["dev"]
    assert [t["description"] for t in dev_tasks["tasks"]] == ["review it"]
    assert lab_tasks["tasks"] == []
    assert [t["description"] for t in content["content"]["tasks"]] == ["review it"]
    refused(
        await net.http.get(
            "/api/v1/content", headers=other, params={"address": "bzzz://dev/tasks"}
        ),
        404,
        "AGENT_NOT_FOUND",
    )


async def test_costs_show_each_of_the_last_days(net: Net) -> None:
    viewer = await net.token("ops", "shop", scope=Scope.READ)
    spent = await net.node.llm.costs.record("gpt-4o", TokenUsage(1000, 500), "w", "chat")

    costs = await net.ok("GET", "/api/v1/costs", viewer, params={"days": 7})

    assert len(costs["history"]) == 7
    assert costs["history"][-1]["totalCost"] == spent / 1e9
    assert costs["history"][-1]["apiCalls"] == 1
    assert [d["totalCost"] for d in costs["history"][:-1]] == [0.0] * 6
    refused(
        await net.http.get("/api/v1/costs", headers=viewer, params={"days": 0}),
        400,
        "INVALID_PARAMETERS",
    )
