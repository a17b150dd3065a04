"""The dashboard's agent page, map and project routes over HTTP: what each token sees.

Agents are announced and talk through the services as their token's principal (the key a
REST or sessionless MCP call of that token holds them under), and the routes are read with
the tokens' bearer headers, so the same grants decide as in the browser.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from audit.support import chain_of

from bzzz.access.keys import principal_key
from bzzz.api.app import build_app
from bzzz.clock import ManualClock
from bzzz.config import Settings
from bzzz.conversations.monitor import ThreadMonitor
from bzzz.eventlog import Caller
from bzzz.mcp.server import build_server
from bzzz.network.memory import InMemoryBus
from bzzz.node.core import Node
from bzzz.principal import LOCAL, Scope
from bzzz.reservations.schemas import ReserveInput
from bzzz.schemas import AnnounceInput, PostInput, ThreadInput

from .test_escalations import _idle
from .test_rest import refused


@dataclass
class Team:
    """A node requiring credentials, and an HTTP client of its app."""

    node: Node
    clock: ManualClock
    http: httpx.AsyncClient

    async def token(
        self, name: str, projects: list[str], scope: Scope = Scope.WRITE
    ) -> tuple[Caller, dict[str, str]]:
        """A new token: the caller its calls are, and its Authorization header."""
        record, secret = await self.node.access.create_token(
            LOCAL, name, projects, ["*"], scope, None
        )
        who = record.principal()
        return Caller(principal_key(who), who), {"Authorization": f"Bearer {secret}"}

    async def get(self, path: str, who: dict[str, str], **params: Any) -> httpx.Response:
        return await self.http.get(path, headers=who, params=params)

    async def ok(self, path: str, who: dict[str, str], **params: Any) -> Any:
        answer = await self.get(path, who, **params)
        assert answer.status_code == 200, answer.text
        return answer.json()

    async def say(self, caller: Caller, sender: str, to: str, text: str) -> dict[str, Any]:
        post = PostInput(
            target_address=f"bzzz://{to}",
            message_type="text",
            content={"text": text},
            agent_id=sender,
        )
        return await self.node.conversations.post(caller, post)


@pytest.fixture
async def team(
    settings: Settings, memory_bus: InMemoryBus, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Team]:
    monkeypatch.setattr(ThreadMonitor, "run", _idle)
    settings.auth.required = True
    clock = ManualClock()
    async with Node(settings, bus=memory_bus, clock=clock) as node:
        server, _ = build_server(node)
        transport = httpx.ASGITransport(app=build_app(node, server, "127.0.0.1"))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:7331") as http:
            yield Team(node, clock, http)


async def _announce(team: Team, caller: Caller, agent_id: str, project: str) -> None:
    params = AnnounceInput(agent_id=agent_id, role="developer", project=project)
    await team.node.agents.announce(caller, params)


async def test_the_agent_page_shows_the_owner_its_inbox_tasks_reservations_and_threads(
    team: Team,
) -> None:
    alice, alice_h = await team.token("alice", ["alpha"])
    bob, bob_h = await team.token("bob", ["alpha"])
    _, admin_h = await team.token("alpha-admin", ["alpha"], Scope.ADMIN)
    _, beta_h = await team.token("beta", ["beta"])
    await _announce(team, alice, "alice-dev", "alpha")
    await _announce(team, bob, "bob-dev", "alpha")
    await team.say(bob, "bob-dev", "alice-dev", "the schema is ready")
    assigned = PostInput(
        target_address="bzzz://alice-dev",
        message_type="task_assignment",
        content={"type": "code_review", "description": "review the schema"},
        agent_id="bob-dev",
    )
    await team.node.conversations.post(bob, assigned)
    page = await team.ok("/api/v1/agents/alice-dev/page", alice_h)
    task_id = page["tasks"]["tasks"][0]["id"]
    team.clock.advance(90)
    done = PostInput(
        target_address="bzzz://bob-dev",
        message_type="task_complete",
        content={"task_id": task_id, "result": {"verdict": "LGTM"}},
        agent_id="alice-dev",
    )
    await team.node.conversations.post(alice, done)
    await team.node.reservations.reserve(
        alice, ReserveInput(paths=["src/schema/**"], agent_id="alice-dev", reason="schema")
    )
    created = await team.node.conversations.thread(
        alice,
        ThreadInput(action="create", topic="Schema review", participants=["bob-dev"],
                    agent_id="alice-dev"),
    )  # fmt: skip

    mine = await team.ok("/api/v1/agents/alice-dev/page", alice_h)
    admins = await team.ok("/api/v1/agents/alice-dev/page", admin_h)
    teammate = await team.ok("/api/v1/agents/alice-dev/page", bob_h)
    other = await team.get("/api/v1/agents/alice-dev/page", beta_h)
    narrowed = await team.get("/api/v1/agents/alice-dev/page", beta_h, project="alpha")

    assert mine["agent"]["id"] == "alice-dev" and mine["agent"]["project"] == "alpha"
    lease = mine["lease"]
    assert lease["lease_bound"] is True and 0 < lease["seconds_left"] <= lease["lease_seconds"]
    assert mine["inbox"]["readable"] is True
    texts = [m["content"].get("text") for m in mine["inbox"]["messages"]]
    assert "the schema is ready" in texts
    (task,) = mine["tasks"]["tasks"]
    assert task["status"] == "completed" and task["result"] == {"verdict": "LGTM"}
    assert task["duration_seconds"] == pytest.approx(90, abs=1)
    assert mine["performance"]["days"][-1]["completed"] == 1
    assert [r["paths"] for r in mine["reservations"]] == [["src/schema/**"]]
    assert [t["id"] for t in mine["threads"]] == [created["thread_id"]]
    assert admins["inbox"]["readable"] is True and len(admins["inbox"]["messages"]) == 2
    # A teammate sees the work, not the inbox.
    assert teammate["inbox"] == {"readable": False, "messages": []}
    assert teammate["tasks"]["readable"] is True and len(teammate["tasks"]["tasks"]) == 1
    refused(other, 404, "AGENT_NOT_FOUND")
    assert "alpha" not in other.text and "schema" not in other.text
    refused(narrowed, 403, "PERMISSION_DENIED")
    # Reads of an inbox are on the audit trail, refused ones too.
    records = await chain_of(team.node)
    reads = [(r.action, r.outcome) for r in records if r.action.endswith("/page")]
    assert reads.count(("http:GET /api/v1/agents/alice-dev/page", "ok")) == 4
    assert ("http:GET /api/v1/agents/alice-dev/page", "AGENT_NOT_FOUND") in reads
    assert ("http:GET /api/v1/agents/alice-dev/page", "PERMISSION_DENIED") in reads


async def test_the_map_counts_messages_and_tasks_per_pair_within_the_window(team: Team) -> None:
    alpha, alpha_h = await team.token("alpha-team", ["alpha"])
    beta, beta_h = await team.token("beta-team", ["beta"])
    _, every_h = await team.token("ops", ["*"], Scope.ADMIN)
    for name in ("a1", "a2", "a3"):
        await _announce(team, alpha, name, "alpha")
    await _announce(team, beta, "b1", "beta")
    await team.say(alpha, "a1", "a2", "old news")
    team.clock.advance(2 * 3600)  # out of the hour's window, still in the day's
    for _ in range(3):
        await team.say(alpha, "a1", "a2", "hello")
    await team.say(alpha, "a2", "a1", "hi")
    await team.say(alpha, "a2", "a3", "ping")
    task = PostInput(
        target_address="bzzz://a3",
        message_type="task_assignment",
        content={"type": "build", "description": "build it"},
        agent_id="a1",
    )
    await team.node.conversations.post(alpha, task)
    await team.say(beta, "b1", "b1", "note to self")
    plans = ThreadInput(action="create", topic="Plans", participants=["a2", "a3"], agent_id="a1")
    made = await team.node.conversations.thread(alpha, plans)

    hour = await team.ok("/api/v1/map", alpha_h, window="1h")
    day = await team.ok("/api/v1/map", every_h, window="24h", project="alpha")
    everything = await team.ok("/api/v1/map", every_h, window="24h")
    edge = await team.ok("/api/v1/map/edge", alpha_h, a="a2", b="a1", window="1h")
    projects = await team.ok("/api/v1/projects", every_h)
    granted = await team.ok("/api/v1/projects", beta_h)

    counts = {(e["source"], e["target"]): (e["messages"], e["tasks"]) for e in hour["edges"]}
    assert counts == {("a1", "a2"): (4, 0), ("a2", "a3"): (1, 0), ("a1", "a3"): (0, 1)}
    pair = next(e for e in hour["edges"] if e["source"] == "a1" and e["target"] == "a2")
    assert (pair["source_to_target"], pair["target_to_source"]) == (3, 1)
    assert {n["id"] for n in hour["nodes"]} == {"a1", "a2", "a3"}
    assert hour["truncated"] is False
    (group,) = hour["groups"]
    assert group["thread_id"] == made["thread_id"] and set(group["members"]) == {"a1", "a2", "a3"}
    assert [e["messages"] for e in day["edges"] if e["target"] == "a2"] == [5]
    assert {n["id"] for n in day["nodes"]} == {"a1", "a2", "a3"}
    assert "b1" in {n["id"] for n in everything["nodes"]}
    assert sorted(m["content"]["text"] for m in edge["messages"]) == ["hello"] * 3 + ["hi"]
    assert edge["hidden"] == 0
    assert projects == {"success": True, "projects": ["alpha", "beta"], "every": True}
    assert granted["projects"] == ["beta"]


async def test_the_map_refuses_another_projects_token_and_hides_what_it_may_not_read(
    team: Team,
) -> None:
    alpha, _ = await team.token("alpha-team", ["alpha"])
    _, reader_h = await team.token("alpha-reader", ["alpha"], Scope.READ)
    _, beta_h = await team.token("beta-team", ["beta"])
    await _announce(team, alpha, "a1", "alpha")
    await _announce(team, alpha, "a2", "alpha")
    await team.say(alpha, "a1", "a2", "private words")

    beta_map = await team.ok("/api/v1/map", beta_h, window="1h")
    refused(await team.get("/api/v1/map", beta_h, window="1h", project="alpha"), 403,
            "PERMISSION_DENIED")  # fmt: skip
    refused(await team.get("/api/v1/map/edge", beta_h, a="a1", b="a2", window="1h"), 404,
            "AGENT_NOT_FOUND")  # fmt: skip
    refused(await team.get("/api/v1/map", beta_h, window="1w"), 400, "INVALID_PARAMETERS")
    seen = await team.ok("/api/v1/map", reader_h, window="1h")
    edge = await team.ok("/api/v1/map/edge", reader_h, a="a1", b="a2", window="1h")

    assert beta_map["nodes"] == [] and beta_map["edges"] == []
    assert [(e["source"], e["target"], e["messages"]) for e in seen["edges"]] == [("a1", "a2", 1)]
    # The reader is neither the agents' owner nor an admin: the message is counted, not shown.
    assert edge["messages"] == [] and edge["hidden"] == 1


async def test_views_narrowed_to_a_project_show_only_its_agents_threads_and_tasks(
    team: Team,
) -> None:
    alpha, _ = await team.token("alpha-team", ["alpha"])
    beta, _ = await team.token("beta-team", ["beta"])
    _, ops_h = await team.token("ops", ["*"], Scope.ADMIN)
    _, beta_h = await team.token("beta-reader", ["beta"], Scope.READ)
    for caller, agent, project in ((alpha, "a", "alpha"), (beta, "b", "beta")):
        await _announce(team, caller, f"{agent}1", project)
        await _announce(team, caller, f"{agent}2", project)
        plans = ThreadInput(
            action="create",
            topic=f"{agent}1 plans",
            participants=[f"{agent}2"],
            agent_id=f"{agent}1",
        )
        await team.node.conversations.thread(caller, plans)

    agents = await team.ok("/api/v1/agents", ops_h, project="alpha")
    threads = await team.ok("/api/v1/overview/threads", ops_h, project="beta")
    refused(await team.get("/api/v1/overview/tasks", beta_h, project="alpha"), 403,
            "PERMISSION_DENIED")  # fmt: skip

    assert sorted(m["id"] for m in agents["matches"]) == ["a1", "a2"]
    assert [t["topic"] for t in threads["threads"]] == ["b1 plans"]
