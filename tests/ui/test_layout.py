"""The dashboard's first screen and its layout from a phone to a wide screen, in Chromium.

A node that takes callers without a credential opens straight on the network; one that needs a
token shows the sign-in card alone. At every width each element's box lies inside the viewport
or inside a scroll container that itself does, and an id is one line box (never cut, never
wrapped a character a line). Live event times tick. Set ``BZZZ_UI_SHOTS`` to a folder to keep
a screenshot of each width there.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import Browser, Page

from bzzz.eventlog import Caller
from bzzz.schemas import AnnounceInput, PostInput, SubscribeInput, ThreadInput

from .conftest import Served, open_tab

# The session's event loop: the Chromium they share (conftest.browser) lives in it.
pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

WIDTHS = [375, 1366]
# Long ids and text, as a real network has them: the page must neither cut nor smear them.
PLANNER = "planner-" + "a" * 40
BUILDER = "builder-of-the-payment-service-0042"
DESCRIPTION = "Review the payment service's retry logic and its idempotency keys " * 3

# Every box (of an element drawn on the page) inside the viewport, or inside the nearest
# ancestor that scrolls horizontally (which must itself be inside the viewport); and every id
# element in one line box. Returns what breaks the rule, readable.
LAYOUT_PROBLEMS = """
() => {
  const width = document.documentElement.clientWidth;
  const problems = [];
  const name = (e) => e.tagName.toLowerCase() + (e.id ? "#" + e.id : "")
    + (e.className && typeof e.className === "string" ? "." + e.className.split(" ").join(".") : "")
    + " '" + (e.textContent || "").trim().slice(0, 30) + "'";
  const scroller = (e) => {
    for (let p = e.parentElement; p; p = p.parentElement) {
      const o = getComputedStyle(p).overflowX;
      if (o === "auto" || o === "scroll") return p;
    }
    return null;
  };
  if (document.documentElement.scrollWidth > width + 1) {
    problems.push(`the page scrolls sideways: ${document.documentElement.scrollWidth} > ${width}`);
  }
  for (const e of document.body.querySelectorAll("*")) {
    const box = e.getBoundingClientRect();
    if (box.width === 0 || box.height === 0 || e.closest("[hidden]")) continue;
    if (e.classList.contains("sr-only")) continue;
    const box_of = scroller(e);
    const frame = box_of ? box_of.getBoundingClientRect() : { left: 0, right: width };
    if (box_of && box_of.scrollWidth > box_of.clientWidth + 1) {
      // inside a scroller that scrolls: it must reach the element, not clip it
      const origin = frame.left + box_of.clientLeft - box_of.scrollLeft;
      if (box.left < origin - 1 || box.right > origin + box_of.scrollWidth + 1) {
        problems.push(`${name(e)} [${Math.round(box.left)}, ${Math.round(box.right)}] outside `
          + `its scroller [${Math.round(origin)}, ${Math.round(origin + box_of.scrollWidth)}]`);
      }
    } else if (box.left < frame.left - 1 || box.right > frame.right + 1) {
      problems.push(`${name(e)} [${Math.round(box.left)}, ${Math.round(box.right)}] `
        + `outside [${Math.round(frame.left)}, ${Math.round(frame.right)}]`);
    }
  }
  for (const e of document.querySelectorAll(".id, [data-agent], [data-task]")) {
    if (e.closest("[hidden]") || e.getClientRects().length === 0) continue;
    const lines = e.getClientRects().length;
    const size = parseFloat(getComputedStyle(e).fontSize);
    const tall = e.getBoundingClientRect().height > 2.2 * size;  // two lines or more
    if (lines > 1 || tall) problems.push(`id ${name(e)} wraps (${lines} boxes)`);
  }
  return problems;
}
"""

# The boxes of the first element of each selector (null where none is drawn), read at once.
BOXES = """
(selectors) => selectors.map((s) => {
  const e = document.querySelector(s);
  if (!e || e.getClientRects().length === 0) return null;
  const box = e.getBoundingClientRect();
  return { x: box.x, width: box.width };
})
"""


async def _populate(served: Served) -> None:
    """Two agents with long ids, a task with a long description, a thread between them, and
    two webhook subscriptions with long URLs, one of them dead."""
    node = served.node
    planner, builder = Caller("layout-planner"), Caller("layout-builder")
    await node.agents.announce(
        planner,
        AnnounceInput(agent_id=PLANNER, role="planner", project="payments",
                      capabilities=["planning", "architecture", "code_review"]),
    )  # fmt: skip
    await node.agents.announce(
        builder, AnnounceInput(agent_id=BUILDER, role="developer", project="payments")
    )
    task = {"type": "code_review", "description": DESCRIPTION, "data": {"language": "python"}}
    await node.conversations.post(
        planner,
        PostInput(
            target_address=f"bzzz://{BUILDER}",
            message_type="task_assignment",
            content=task,
            priority="high",
        ),
    )
    await node.conversations.thread(
        planner,
        ThreadInput(action="create", topic="Retry policy of the payment service",
                    participants=[BUILDER]),
    )  # fmt: skip
    for name in ("payments-audit-receiver", "gone"):
        url = f"http://127.0.0.1:9/hooks/{name}/" + "x" * 40
        hook = SubscribeInput(event_types=["thread_created"], callback_webhook=url)
        made = await node.subscriptions.subscribe(planner, hook)
    assert await node.subscriptions.mark_dead(made["subscription_id"], "failing since a day")


async def _layout_problems(page: Page, shots: str, label: str) -> list[str]:
    if shots:
        await page.screenshot(path=str(Path(shots) / f"{label}.png"), full_page=True)
    problems: list[str] = await page.evaluate(LAYOUT_PROBLEMS)
    return [f"{label}: {p}" for p in problems]


@pytest.mark.parametrize("width", WIDTHS)
async def test_a_node_without_credentials_opens_straight_on_the_network(
    open_served: Served, browser: Browser, width: int
) -> None:
    await open_served.node.agents.announce(
        Caller("s"), AnnounceInput(agent_id="dev-1", role="developer")
    )
    async with open_tab(browser, f"{open_served.url}/ui", width) as board:
        page = board.page
        await page.locator('[data-agent="dev-1"]').wait_for()
        await page.locator("#live.on").wait_for()

        assert await page.locator("#signin").is_hidden()
        assert await page.locator(".tabs").is_visible()
        assert await page.locator("#sign-out").is_hidden()
        assert board.problems.messages == []


@pytest.mark.parametrize("width", WIDTHS)
async def test_a_node_that_needs_a_token_shows_the_sign_in_card_alone(
    served: Served, browser: Browser, width: int
) -> None:
    async with open_tab(browser, f"{served.url}/ui", width) as board:
        page = board.page
        await page.locator("#signin").wait_for()

        assert await page.locator("#signin").is_visible()
        for hidden in ("#main", ".tabs", ".events", "#anonymous"):
            assert await page.locator(hidden).is_hidden(), hidden
        assert "needs a token" in await page.locator("#signin-error").inner_text()
        assert board.problems.messages == []


@pytest.mark.parametrize("width", WIDTHS)
async def test_no_box_leaves_the_page_and_no_id_wraps(
    open_served: Served, browser: Browser, width: int
) -> None:
    shots = os.environ.get("BZZZ_UI_SHOTS", "")
    async with open_tab(browser, f"{open_served.url}/ui", width) as board:
        page = board.page
        await page.locator("#live.on").wait_for()
        await _populate(open_served)  # live: its events reach the list too
        await page.locator(f'[data-agent="{PLANNER}"]').wait_for()
        await page.locator("#events li", has_text=PLANNER).first.wait_for()
        problems = await _layout_problems(page, shots, f"agents-{width}")
        for tab, ready in (
            ("tasks", "#tasks [data-task]"),
            ("threads", "#threads [data-thread]"),
            ("webhooks", "#webhook-subscriptions .badge.s-dead"),
        ):
            await page.click(f"[data-tab={tab}]")
            await page.locator(ready).first.wait_for()
            problems += await _layout_problems(page, shots, f"{tab}-{width}")
        await page.click("[data-tab=tasks]")
        # When the task started is in sight, not past the edge of its table's frame. Read in
        # one go: showing the tab redraws the table, so an element may be replaced in between.
        started, frame, header = await page.evaluate(
            BOXES, ["#tasks [data-started] time", "#tasks .table-wrap", "header.top"]
        )
        assert board.problems.messages == []

    assert problems == []
    assert started is not None and frame is not None
    assert started["x"] + started["width"] <= min(frame["x"] + frame["width"], width)
    assert header is not None and header["width"] <= width


# Each tab of the dashboard and what shows it has drawn its rows.
TABS = (
    ("agents", f'[data-agent="{PLANNER}"]'),
    ("threads", "#threads [data-thread]"),
    ("tasks", "#tasks [data-task]"),
    ("reservations", "#tab-reservations:not([hidden]) #reservations > *"),
    ("costs", "#tab-costs:not([hidden]) #costs > *"),
    ("peers", "#tab-peers:not([hidden]) #peers > *"),
    ("webhooks", "#webhook-subscriptions .badge.s-dead"),
)


async def test_the_layout_holds_from_360_to_1920_px(open_served: Served, browser: Browser) -> None:
    await _populate(open_served)
    async with open_tab(browser, f"{open_served.url}/ui", 360) as board:
        page = board.page
        await page.locator(f'[data-agent="{PLANNER}"]').wait_for()
        problems: list[str] = []
        for tab, ready in TABS:
            await page.click(f"[data-tab={tab}]")
            await page.locator(ready).first.wait_for()
            for width in (360, 420, 600, 800, 1024, 1280, 1920):
                await page.set_viewport_size({"width": width, "height": 900})
                problems += await _layout_problems(page, "", f"{tab}-{width}")
            await page.set_viewport_size({"width": 360, "height": 900})
        assert board.problems.messages == []

    assert problems == []


async def test_live_event_times_tick(open_served: Served, browser: Browser) -> None:
    async with open_tab(browser, f"{open_served.url}/ui", 1366) as board:
        page = board.page
        await page.locator("#live.on").wait_for()
        await open_served.node.agents.announce(
            Caller("s"), AnnounceInput(agent_id="ticker-1", role="developer")
        )
        first = page.locator("#events li time").first
        await first.wait_for()
        shown = await first.inner_text()
        changed: Any = await page.wait_for_function(
            "(before) => { const t = document.querySelector('#events li time');"
            " return t && t.textContent !== before && t.textContent; }",
            arg=shown,
        )
        later = await changed.json_value()

    assert shown.endswith("s ago") and later.endswith("s ago")
    assert int(later.split()[0]) > int(shown.split()[0])


async def test_a_tab_shows_what_changed_while_another_was_open(
    open_served: Served, browser: Browser
) -> None:
    # A webhook subscription made and marked dead sends no event: showing the tab loads it.
    # The page's clock stands still, so its 15 s periodic refresh cannot be what shows it; the
    # clock runs by hand only for the refresh the page schedules (80 ms after its cause).
    async with open_tab(browser, "about:blank", 1366) as board:
        page = board.page
        await page.clock.install()
        await page.clock.pause_at(await page.evaluate("() => Date.now()") + 1000)
        await page.goto(f"{open_served.url}/ui")
        await page.locator("#live.on").wait_for()  # the first load and the live one: one batch
        async with page.expect_response(lambda r: "/api/v1/escalations" in r.url):
            await page.clock.run_for(100)  # the batch runs; the escalations are its last read
        await page.click("[data-tab=webhooks]")
        await page.clock.run_for(100)
        await page.locator("#webhook-subscriptions .empty").wait_for()

        hook = SubscribeInput(
            event_types=["thread_created"], callback_webhook="http://127.0.0.1:9/hooks/gone"
        )
        made = await open_served.node.subscriptions.subscribe(Caller("watcher"), hook)
        assert await open_served.node.subscriptions.mark_dead(made["subscription_id"], "failing")
        await page.click("[data-tab=agents]")
        await page.click("[data-tab=webhooks]")
        await page.clock.run_for(100)
        await page.locator("#webhook-subscriptions .badge.s-dead").wait_for()
        assert board.problems.messages == []
