"""The agent page, the map of who talks to whom and the project filter, in headless Chromium
at a phone's width (375 px) and a laptop's (1366 px).

Agents are announced and talk through the node's services as their token's principal (the
key a token's REST or sessionless MCP calls hold agents under), so the signed-in owner reads
their inboxes. Every wait is a bounded Playwright wait on what the page shows.
"""

from __future__ import annotations

from typing import Any

import pytest
from playwright.async_api import Browser, Page

from bzzz.access.keys import principal_key
from bzzz.eventlog import Caller
from bzzz.principal import LOCAL, Scope
from bzzz.reservations.schemas import ReserveInput
from bzzz.schemas import AnnounceInput, GetInput, PostInput, ThreadInput

from .conftest import Dashboard, Served, open_tab

# The session's event loop: the Chromium they share (conftest.browser) lives in it.
pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

WIDTHS = [375, 1366]


async def _token(
    served: Served, name: str, projects: list[str], scope: Scope
) -> tuple[Caller, str]:
    record, secret = await served.node.access.create_token(
        LOCAL, name, projects, ["*"], scope, None
    )
    who = record.principal()
    return Caller(principal_key(who), who), secret


async def _announce(served: Served, caller: Caller, agent_id: str, project: str) -> None:
    await served.node.agents.announce(
        caller, AnnounceInput(agent_id=agent_id, role="developer", project=project)
    )


async def _post(served: Served, caller: Caller, sender: str, to: str, kind: str,
                content: dict[str, Any]) -> dict[str, Any]:  # fmt: skip
    post = PostInput(target_address=f"bzzz://{to}", message_type=kind, content=content,
                     agent_id=sender)  # fmt: skip
    return await served.node.conversations.post(caller, post)


async def _signed_in(browser: Browser, served: Served, width: int, token: str) -> Any:
    tab = open_tab(browser, f"{served.url}/ui", width)
    board: Dashboard = await tab.__aenter__()
    await board.page.locator("#signin").wait_for()
    await board.sign_in(token)
    return tab, board


@pytest.mark.parametrize("width", WIDTHS)
async def test_an_agent_row_opens_its_page_with_inbox_tasks_reservations_and_threads(
    served: Served, browser: Browser, width: int
) -> None:
    owner, secret = await _token(served, "alpha-team", ["alpha"], Scope.WRITE)
    _, teammate = await _token(served, "alpha-reviewer", ["alpha"], Scope.WRITE)
    await _announce(served, owner, "alice-dev", "alpha")
    await _announce(served, owner, "bob-dev", "alpha")
    await _post(served, owner, "bob-dev", "alice-dev", "text", {"text": "schema is ready"})
    await _post(served, owner, "bob-dev", "alice-dev", "task_assignment",
                {"type": "code_review", "description": "review the schema"})  # fmt: skip
    listed = await served.node.agents.get(owner, GetInput(address="bzzz://alice-dev/tasks"))
    task_id = listed["content"]["tasks"][0]["id"]
    served.clock.advance(75)
    await _post(served, owner, "alice-dev", "bob-dev", "task_complete",
                {"task_id": task_id, "result": {"verdict": "LGTM, ship it"}})  # fmt: skip
    await served.node.reservations.reserve(
        owner, ReserveInput(paths=["src/schema/**"], agent_id="alice-dev", reason="schema work")
    )
    await served.node.conversations.thread(
        owner,
        ThreadInput(action="create", topic="Schema review", participants=["bob-dev"],
                    agent_id="alice-dev"),
    )  # fmt: skip

    tab, board = await _signed_in(browser, served, width, secret)
    try:
        page = board.page
        row = page.locator("#agents tr", has=page.locator('[data-agent="alice-dev"]'))
        await row.locator("a.agent-link").click()
        await page.locator('[data-agent-page="alice-dev"]').wait_for()
        inbox = await page.locator("#agent-inbox").inner_text()
        result = await page.locator(f'#agent-tasks [data-result="{task_id}"]').inner_text()
        tasks = await page.locator("#agent-tasks").inner_text()
        held = await page.locator("#agent-reservations").inner_text()
        threads = await page.locator("#agent-threads").inner_text()
        hash_ = await page.evaluate("() => location.hash")
        # Live: a message that arrives now shows without a reload.
        await _post(served, owner, "bob-dev", "alice-dev", "text", {"text": "one more thing"})
        await page.locator("#agent-inbox", has_text="one more thing").wait_for()
        assert len(board.loads) == 1
        assert board.problems.messages == []
    finally:
        await tab.__aexit__(None, None, None)
    # The page's link, opened by a teammate: the work shows, the inbox is private.
    async with open_tab(browser, f"{served.url}/ui{hash_}", width) as other:
        await other.sign_in(teammate)
        await other.page.locator('[data-agent-page="alice-dev"]').wait_for()
        private = await other.page.locator("#agent-inbox").inner_text()
        their_tasks = await other.page.locator("#agent-tasks").inner_text()
        assert other.problems.messages == []

    assert "This inbox is private" in private and "schema is ready" not in private
    assert "LGTM, ship it" in their_tasks
    assert "schema is ready" in inbox and "bob-dev" in inbox
    assert "LGTM, ship it" in result
    assert "completed" in tasks and "75 s" in tasks
    assert "src/schema/**" in held and "schema work" in held
    assert "Schema review" in threads
    assert "tab=agent" in hash_ and "agent=alice-dev" in hash_


async def _edges(page: Page) -> dict[tuple[str, str], int]:
    found = await page.eval_on_selector_all(
        "svg.talk-map .map-edge",
        "(all) => all.map((e) => [e.dataset.source, e.dataset.target, e.dataset.messages])",
    )
    return {(a, b): int(n) for a, b, n in found}


async def _nodes(page: Page) -> set[str]:
    found = await page.eval_on_selector_all(
        "svg.talk-map .map-node", "(all) => all.map((n) => n.dataset.node)"
    )
    return set(found)


@pytest.mark.parametrize("width", WIDTHS)
async def test_the_map_draws_each_pair_with_its_count_and_the_project_filter_survives_a_reload(
    served: Served, browser: Browser, width: int
) -> None:
    alpha, _ = await _token(served, "alpha-team", ["alpha"], Scope.WRITE)
    beta, _ = await _token(served, "beta-team", ["beta"], Scope.WRITE)
    _, lead = await _token(served, "lead", ["alpha", "beta"], Scope.ADMIN)
    for name in ("a1", "a2", "a3", "a4"):
        await _announce(served, alpha, name, "alpha")
    for name in ("b1", "b2"):
        await _announce(served, beta, name, "beta")
    said = {("a1", "a2"): 2, ("a2", "a3"): 1, ("a3", "a4"): 3, ("a1", "a4"): 1, ("b1", "b2"): 1}
    for (sender, to), times in said.items():
        for i in range(times):
            caller = beta if sender.startswith("b") else alpha
            await _post(served, caller, sender, to, "text", {"text": f"{sender} to {to} #{i}"})

    tab, board = await _signed_in(browser, served, width, lead)
    try:
        page = board.page
        await page.click("[data-tab=map]")
        await page.locator("svg.talk-map .map-edge").nth(len(said) - 1).wait_for()
        everyone = await _edges(page)
        label = await page.locator(
            'svg.talk-map .map-edge[data-source="a3"][data-target="a4"]'
        ).get_attribute("aria-label")
        await page.locator('svg.talk-map .map-edge[data-source="a3"][data-target="a4"]').click()
        await page.locator('#map-edge [data-edge="a3|a4"] tbody tr').nth(2).wait_for()
        listed = await page.locator("#map-edge").inner_text()

        await page.select_option("#project-filter", "alpha")
        await page.locator('svg.talk-map[data-project="alpha"]').wait_for()
        filtered_nodes = await _nodes(page)
        filtered_edges = await _edges(page)

        await page.reload()
        await page.locator('svg.talk-map[data-project="alpha"]').wait_for()
        kept = await page.locator("#project-filter").input_value()
        nodes_after_reload = await _nodes(page)
        await page.click("[data-tab=agents]")
        await page.locator('#agents [data-agent="a1"]').wait_for()
        agents_tab = await page.locator("#agents").inner_text()
        hash_ = await page.evaluate("() => location.hash")
        assert board.problems.messages == []
    finally:
        await tab.__aexit__(None, None, None)

    assert everyone == said
    assert label == "a3 and a4: 3 messages, 0 task assignments"
    assert listed.count("a3 to a4") == 3
    assert filtered_nodes == {"a1", "a2", "a3", "a4"}
    assert filtered_edges == {pair: n for pair, n in said.items() if pair[0].startswith("a")}
    assert kept == "alpha" and nodes_after_reload == filtered_nodes
    assert "b1" not in agents_tab and "b2" not in agents_tab
    assert "project=alpha" in hash_ and "tab=agents" in hash_
