"""A team's token reads its threads, whatever client announced its agents: agents announced
from legacy (session-based) MCP clients over streamable HTTP, the common case, are the token's
too, over REST and on the dashboard; another project's token sees none of them."""

from __future__ import annotations

import httpx
import pytest
from access.support import mcp_client, ok

from .conftest import Dashboard, Served

# The session's event loop: the Chromium they share (conftest.browser) lives in it.
pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]


async def test_a_team_token_lists_the_threads_of_agents_its_legacy_sessions_announced(
    served: Served, dashboard: Dashboard
) -> None:
    team = await served.token("shop-team", ["shop"])
    rival = await served.token("garden-team", ["garden"])
    url = f"{served.url}/mcp"
    async with (
        mcp_client(url, "legacy", team) as arch,
        mcp_client(url, "legacy", team) as dev,
        httpx.AsyncClient(base_url=served.url, timeout=10) as http,
    ):
        await ok(arch, "bzzz_announce", {"agent_id": "arch", "role": "architect"})
        await ok(dev, "bzzz_announce", {"agent_id": "dev", "role": "developer"})
        created = await ok(
            arch, "bzzz_thread", {"action": "create", "topic": "API shape", "participants": ["dev"]}
        )
        thread_id = created["thread_id"]
        await ok(
            arch,
            "bzzz_post",
            {"target_address": "bzzz://dev", "message_type": "task_assignment",
             "content": {"task_type": "documentation", "description": "document the API"}},
        )  # fmt: skip

        served.clock.advance(601)  # the thread stalls: the 'stuck' rule escalates it
        await served.node.escalations.check_all()
        as_team = {"Authorization": f"Bearer {team}"}
        as_rival = {"Authorization": f"Bearer {rival}"}
        threads = await http.get("/api/v1/threads", headers=as_team)
        tasks = await http.get("/api/v1/tasks", headers=as_team)
        escalations = await http.get("/api/v1/escalations", headers=as_team)
        theirs = await http.get("/api/v1/threads", headers=as_rival)
        their_tasks = await http.get("/api/v1/tasks", headers=as_rival)
        their_escalations = await http.get("/api/v1/escalations", headers=as_rival)

        await dashboard.sign_in(team)
        page = dashboard.page
        await page.click("[data-tab=threads]")
        row = page.locator("#threads tr", has=page.locator(f'[data-thread="{thread_id}"]'))
        await row.wait_for()
        shown = await row.inner_text()

    assert threads.status_code == 200, threads.text
    assert [t["id"] for t in threads.json()["threads"]] == [thread_id]
    assert tasks.status_code == 200, tasks.text
    assert [(t["agent_id"], t["assigner"]) for t in tasks.json()["tasks"]] == [("dev", "arch")]
    assert escalations.status_code == 200, escalations.text
    assert [e["threadId"] for e in escalations.json()["escalations"]] == [thread_id]
    assert theirs.json()["threads"] == [] and their_tasks.json()["tasks"] == []
    assert their_escalations.json()["escalations"] == []
    assert "API shape" in shown and "arch" in shown and "dev" in shown
    assert dashboard.problems.messages == []
