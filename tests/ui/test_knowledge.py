"""The dashboard's Knowledge tab in headless Chromium: a stated fact shows, an entity's facts are
drawn as a graph of entity nodes, a fact's history lists the version it superseded."""

from __future__ import annotations

import pytest
from playwright.async_api import Browser

from bzzz.eventlog import Caller
from bzzz.principal import LOCAL

from .conftest import Dashboard, Served, open_tab
from .test_layout import _layout_problems

# The session's event loop: the Chromium they share (conftest.browser) lives in it.
pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

RETRIES = "Checkout retries carry idempotency keys; refunds do not."
SOURCE = {"thread": "th-decided-1", "agents": ["ana", "bob"]}


async def test_a_stated_fact_shows_and_its_entity_is_drawn_with_its_neighbours(
    served: Served, dashboard: Dashboard
) -> None:
    knowledge = served.node.knowledge
    caller = Caller("ui-test", LOCAL)
    old = await knowledge.state(caller, "shop", "checkout retries", "carry", "no keys")
    new = await knowledge.state(
        caller, "shop", "checkout retries", "carry", "idempotency keys", statement=RETRIES,
        source=SOURCE,
    )  # fmt: skip
    await knowledge.state(caller, "shop", "idempotency keys", "are stored in", "redis")
    await knowledge.state(caller, "garden", "hoses", "are", "GARDEN-ONLY")
    proposed = await knowledge.state(
        caller, "shop", "refunds", "carry", "no keys", status="proposed", author="rev-1"
    )
    reader = await served.token("shop-reader", ["shop"])
    await dashboard.sign_in(reader)
    page = dashboard.page

    await page.click("[data-tab=knowledge]")
    row = page.locator("#knowledge-result tr", has=page.locator(f'[data-fact="{new["id"]}"]'))
    await row.wait_for()
    shown = await row.inner_text()
    # A proposed fact shows its Agree button; agreeing makes it agreed.
    await page.click(f'[data-agree="{proposed["id"]}"]')
    agreed = page.locator(
        "#knowledge-result tr", has=page.locator(f'[data-fact="{proposed["id"]}"]')
    )
    await agreed.locator(".badge.s-agreed").wait_for()

    await page.fill("#knowledge-about", "checkout retries")
    await page.click("#knowledge-form button[type=submit]")
    graph = page.locator("#knowledge-result svg.knowledge-graph")
    await graph.locator('[data-entity="checkout retries"]').wait_for()
    entities = await graph.locator("g.node").evaluate_all(
        "nodes => nodes.map(n => n.dataset.entity)"
    )
    edges = await graph.locator("g.edge").evaluate_all("edges => edges.map(e => e.dataset.fact)")

    await page.click(f'#knowledge-result button[data-fact="{new["id"]}"]')
    await page.locator(f'#knowledge-history [data-version="{old["id"]}"]').wait_for()
    history = await page.locator("#knowledge-history").inner_text()
    text = await page.locator("#tab-knowledge").inner_text()

    assert RETRIES in shown and "thread th-decided-1" in shown
    assert entities[0] == "checkout retries"
    assert {"checkout retries", "idempotency keys", "redis"} <= set(entities)
    assert new["id"] in edges
    assert "no keys" in history and "idempotency keys" in history
    assert "GARDEN-ONLY" not in text
    assert dashboard.problems.messages == []


async def test_the_knowledge_tab_stays_inside_a_phone_screen(
    open_served: Served, browser: Browser
) -> None:
    caller = Caller("layout", LOCAL)
    await open_served.node.knowledge.state(
        caller, "shop", "checkout retries", "carry", "idempotency keys", statement=RETRIES
    )
    async with open_tab(browser, f"{open_served.url}/ui", 375) as board:
        page = board.page
        await page.locator("#live.on").wait_for()
        await page.click("[data-tab=knowledge]")
        await page.fill("#knowledge-project", "shop")
        await page.fill("#knowledge-about", "checkout retries")
        await page.click("#knowledge-form button[type=submit]")
        await page.locator('svg.knowledge-graph [data-entity="idempotency keys"]').wait_for()
        problems = await _layout_problems(page, "", "knowledge-375")
        assert board.problems.messages == []

    assert problems == []
