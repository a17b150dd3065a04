"""The dashboard in headless Chromium: live agents, the human console, costs, isolation.

Every wait is a bounded Playwright wait on what the page shows; no test sleeps. Each test ends
with no console error and no uncaught page error in the browser.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from access.support import mcp_client, ok
from receiver import ReceiverFactory

from bzzz.eventlog import Caller
from bzzz.llm.types import TokenUsage
from bzzz.principal import Scope
from bzzz.schemas import AnnounceInput, SubscribeInput

from .conftest import Dashboard, Served

# The session's event loop: the Chromium they share (conftest.browser) lives in it.
pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]


def reload_marker(board: Dashboard) -> Any:
    """A value kept in the page's window: a reload would lose it."""
    return board.page.evaluate("() => { window.bzzzNoReload = 42; return 42; }")


async def test_an_agent_announced_over_mcp_appears_within_2_s_without_a_reload(
    served: Served, dashboard: Dashboard
) -> None:
    viewer = await served.token("ops", ["shop"], scope=Scope.ADMIN)
    team = await served.token("team", ["shop"])
    await dashboard.sign_in(viewer)
    await reload_marker(dashboard)
    page = dashboard.page
    await page.locator("#agents .empty").wait_for()

    async with mcp_client(f"{served.url}/mcp", "stateless", team) as client:
        await ok(
            client,
            "bzzz_announce",
            {"agent_id": "reviewer-001", "role": "reviewer", "capabilities": ["code_review"]},
        )
        row = page.locator("#agents tr", has=page.locator('[data-agent="reviewer-001"]'))
        await row.wait_for()

    assert "reviewer" in await row.inner_text()
    assert "shop" in await row.inner_text()
    assert await page.evaluate("() => window.bzzzNoReload") == 42
    assert len(dashboard.loads) == 1
    assert dashboard.problems.messages == []


async def test_a_person_answers_an_escalation_in_the_console_and_the_agents_read_it(
    served: Served, dashboard: Dashboard
) -> None:
    arch_team = await served.token("arch-team", ["shop"])
    dev_team = await served.token("dev-team", ["shop"])
    alice = await served.token("alice", ["shop"], roles=["human"])
    page = dashboard.page
    url = f"{served.url}/mcp"
    async with (
        mcp_client(url, "stateless", arch_team) as arch,
        mcp_client(url, "stateless", dev_team) as dev,
    ):
        await ok(arch, "bzzz_announce", {"agent_id": "arch", "role": "architect"})
        await ok(dev, "bzzz_announce", {"agent_id": "dev", "role": "developer"})
        created = await ok(
            arch, "bzzz_thread", {"action": "create", "topic": "API shape", "participants": ["dev"]}
        )
        thread_id = created["thread_id"]
        address = {"address": f"bzzz://*/threads/{thread_id}"}
        await dashboard.sign_in(alice)
        served.clock.advance(601)
        await served.node.escalations.check_all()

        # The escalation reaches the console live; the person opens the thread and replies.
        escalation = page.locator("[data-escalation]")
        await escalation.wait_for()
        await escalation.click()
        await page.locator(f'[data-thread-view="{thread_id}"]').wait_for()
        await page.fill("#compose-text", "Ship the REST shape; versions under /v2.")
        await page.click("#compose button[type=submit]")
        await page.locator(".message.human").wait_for()
        await page.fill("[data-resolve] input[name=reason]", "the person decided the shape")
        await page.click("[data-resolve] button[type=submit]")
        await page.locator("[data-resolve]").wait_for(state="detached")

        thread = (await ok(dev, "bzzz_get", address))["content"]["thread"]
        said = [(m["sender"], m["content"]) for m in thread["messages"]]
        assert ("human-alice", "Ship the REST shape; versions under /v2.") in said
        assert "human-alice" in thread["participants"]
        assert thread["status"] == "active"
        assert all(e["resolved"] for e in thread["escalation_history"])

        # A decision needs the person's agreement too: the agents alone do not reach it.
        decision = await ok(
            arch,
            "bzzz_post",
            {"thread_id": thread_id, "message_type": "decision", "content": {"text": "Use /v2"}},
        )
        agreed = await ok(
            dev,
            "bzzz_post",
            {
                "thread_id": thread_id,
                "message_type": "text",
                "content": {"text": "ok"},
                "stance": "agree",
                "reply_to": decision["message_id"],
            },
        )
        assert "consensus" not in agreed
        message = page.locator(f'[data-message="{decision["message_id"]}"]')
        await message.wait_for()
        await message.get_by_role("button", name="Agree", exact=True).click()
        await page.locator(".thread .badge.s-completed").wait_for()

        final = (await ok(arch, "bzzz_get", address))["content"]["thread"]
    assert set(final["consensus"]["agreed_by"]) == {"arch", "dev", "human-alice"}
    assert dashboard.problems.messages == []


async def test_the_costs_page_shows_the_spend_of_hosted_agents(
    served: Served, dashboard: Dashboard
) -> None:
    viewer = await served.token("ops", ["*"], scope=Scope.ADMIN)
    costs = served.node.llm.costs
    spent = await costs.record("gpt-4o", TokenUsage(120_000, 40_000), "writer-1", "chat")
    spent += await costs.record("gpt-4o-mini", TokenUsage(10_000, 5_000), "writer-1", "chat")
    await dashboard.sign_in(viewer)
    page = dashboard.page
    await page.click("[data-tab=costs]")

    today = page.locator('[data-spend="today"]')
    await today.wait_for()
    shown = f"${spent / 1e9:.4f}" if spent < 1e9 else f"${spent / 1e9:.2f}"
    assert await today.inner_text() == shown
    assert await page.locator(".chart .bar").count() == 30
    assert await page.locator("#costs td", has_text="gpt-4o-mini").count() == 1
    assert dashboard.problems.messages == []


async def test_a_read_token_of_one_project_sees_none_of_anothers_agents(
    served: Served, dashboard: Dashboard
) -> None:
    a_team = await served.token("team-a", ["project-a"])
    b_team = await served.token("team-b", ["project-b"])
    a_reader = await served.token("reader-a", ["project-a"], scope=Scope.READ)
    url = f"{served.url}/mcp"
    async with mcp_client(url, "stateless", a_team) as a, mcp_client(url, "stateless", b_team) as b:
        await ok(a, "bzzz_announce", {"agent_id": "a-dev", "role": "developer"})
        await ok(b, "bzzz_announce", {"agent_id": "b-dev", "role": "developer"})
        await dashboard.sign_in(a_reader)
        page = dashboard.page
        await page.locator('[data-agent="a-dev"]').wait_for()
        # An announcement in project-b after sign-in does not reach this page either.
        await ok(b, "bzzz_announce", {"agent_id": "b-ops", "role": "ops"})
        await ok(a, "bzzz_announce", {"agent_id": "a-ops", "role": "ops"})
        await page.locator('[data-agent="a-ops"]').wait_for()

    text = await page.locator("#agents").inner_text()
    assert "b-dev" not in text and "b-ops" not in text
    assert "project-b" not in await page.locator("#events").inner_text()
    assert await page.locator("#console-tab").inner_text() == "Escalations"
    assert dashboard.problems.messages == []


async def test_a_bzzz_address_is_searched_from_the_page(
    served: Served, dashboard: Dashboard
) -> None:
    team = await served.token("team", ["shop"])
    async with mcp_client(f"{served.url}/mcp", "stateless", team) as client:
        await ok(client, "bzzz_announce", {"agent_id": "rev-1", "role": "reviewer"})
        await ok(client, "bzzz_announce", {"agent_id": "dev-1", "role": "developer"})
        await dashboard.sign_in(team)
        page = dashboard.page

        await page.fill("#search-address", "bzzz://*:reviewer@shop:*")
        await page.click("#search button[type=submit]")
        await page.locator("#search-result table").wait_for()
        found = await page.locator("#search-result tbody").inner_text()
        await page.fill("#search-address", "bzzz://dev-1/tasks")
        await page.click("#search button[type=submit]")
        await page.locator("#search-result pre").wait_for()
        content = await page.locator("#search-result pre").inner_text()

    assert "rev-1" in found and "dev-1" not in found
    assert '"tasks": []' in content and '"id": "dev-1"' in content
    assert dashboard.problems.messages == []


async def test_an_admin_redrives_a_dead_letter_from_the_page(
    served: Served, dashboard: Dashboard, http_receiver: ReceiverFactory
) -> None:
    admin = await served.token("ops", ["*"], scope=Scope.ADMIN)
    node = served.node
    async with http_receiver(lambda _n: 500) as receiver:
        hook = SubscribeInput(event_types=["agent_announcement"], callback_webhook=receiver.url)
        await node.subscriptions.subscribe(Caller("watcher"), hook)
        await node.agents.announce(Caller("dev"), AnnounceInput(agent_id="dev-1", role="dev"))
        async with asyncio.timeout(30), httpx.AsyncClient(timeout=2.0) as client:
            while not (dead := await node.subscriptions.deliveries("dead")):
                await node.webhooks.deliver_due(client)
    await dashboard.sign_in(admin)
    page = dashboard.page
    await page.click("[data-tab=webhooks]")
    row = page.locator("#dead-letters tbody tr")
    await row.wait_for()
    shown = await row.inner_text()
    # Its URL failed for the whole max_age: the subscription is dead, and says so.
    subscription = page.locator("#webhook-subscriptions tbody tr")
    marked = await subscription.locator(".badge").inner_text()

    await row.get_by_role("button", name="Redrive").click()
    await page.locator("#dead-letters .empty").wait_for()

    assert "HTTP 500" in shown and receiver.url in shown
    assert marked == "dead"
    assert receiver.url in await subscription.inner_text()
    assert [d.id for d in await node.subscriptions.deliveries("pending")] == [dead[0].id]
    assert dashboard.problems.messages == []
