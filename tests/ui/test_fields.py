"""Every field readable from a phone to a wide screen, in Chromium: no label runs into its value
and no card into its neighbour (from the boxes of every label/value pair, every card and its
parts), and every chart label is drawn at 11 px or more, at 360, 375, 768, 1366 and 1920 px.
The check itself is shown to catch a label pressed onto its value."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.async_api import Browser, Page

from .conftest import Served, open_tab
from .test_layout import PLANNER, TABS, _populate

# The session's event loop: the Chromium they share (conftest.browser) lives in it.
pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

WIDTHS = (360, 375, 768, 1366, 1920)
SMALLEST_TEXT_PX = 11
# At least this much space between a label and its value on one line (px).
GAP = 4

# The boxes that must not meet, read at once: each drawn cell label and its value (side by
# side: a gap between them; one under the other: no overlap), each card's label, value and
# note, the cards of one row of cards, and the header cells of a table. Returns the problems
# and how many pairs were checked.
OVERLAPS = """
() => {
  const problems = [];
  let pairs = 0;
  const drawn = (e) => e && !e.closest("[hidden]") && e.getClientRects().length > 0
    && e.getBoundingClientRect().width > 0;
  const box = (e) => {
    const r = e.getBoundingClientRect();
    if (getComputedStyle(e).display !== "contents") return r;
    const range = document.createRange();
    range.selectNodeContents(e);
    return range.getBoundingClientRect();
  };
  const say = (e) =>
    `${e.className} '${(e.dataset.label || e.textContent || "").trim().slice(0, 24)}'`;
  const meet = (a, b) => Math.min(a.right, b.right) - Math.max(a.left, b.left) > 0.5
    && Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top) > 0.5;
  const apart = (one, two, gap) => {
    if (!drawn(one) || !drawn(two)) return;
    pairs += 1;
    const a = box(one), b = box(two);
    const sameLine = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top) > 0.5;
    if (meet(a, b)) problems.push(`${say(one)} overlaps ${say(two)}`);
    else if (gap && sameLine && b.left - a.right < gap) {
      problems.push(`${say(one)} runs into ${say(two)} (${(b.left - a.right).toFixed(1)} px)`);
    }
  };
  for (const label of document.querySelectorAll("td .cell-label")) {
    apart(label, label.parentElement.querySelector(".cell-value"), GAP_PX);
  }
  for (const card of document.querySelectorAll(".card")) {
    const parts = [...card.children].filter(drawn);
    for (let i = 0; i < parts.length; i++) {
      for (let j = i + 1; j < parts.length; j++) apart(parts[i], parts[j], 0);
    }
  }
  for (const row of document.querySelectorAll(".cards")) {
    const cards = [...row.querySelectorAll(":scope > .card")].filter(drawn);
    for (let i = 0; i < cards.length; i++) {
      for (let j = i + 1; j < cards.length; j++) apart(cards[i], cards[j], 0);
    }
  }
  for (const head of document.querySelectorAll("thead tr")) {
    const cells = [...head.children].filter(drawn);
    for (let i = 0; i + 1 < cells.length; i++) apart(cells[i], cells[i + 1], 0);
  }
  return { problems, pairs };
}
""".replace("GAP_PX", str(GAP))

# Each chart text's size as drawn: its computed font size times the scale its SVG is drawn at.
CHART_TEXT = """
() => [...document.querySelectorAll("svg.chart text")]
  .filter((t) => t.getClientRects().length > 0)
  .map((t) => ({ text: t.textContent,
    px: parseFloat(getComputedStyle(t).fontSize) * t.getScreenCTM().a }))
"""

SETTLED = "() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)))"
# The page is laid out at the new width and each shown chart is drawn at its box's width.
FITTED = """
(width) => document.documentElement.clientWidth <= width
  && [...document.querySelectorAll(".chart-box")].filter((b) => b.clientWidth > 0)
    .every((b) => Number(b.querySelector("svg").getAttribute("width"))
      === Math.floor(Math.min(b.getBoundingClientRect().width, 760)))
"""


async def _at(page: Page, width: int) -> None:
    await page.set_viewport_size({"width": width, "height": 900})
    await page.wait_for_function(FITTED, arg=width)
    await page.evaluate(SETTLED)


async def test_no_label_runs_into_its_value_and_chart_labels_stay_legible_at_every_width(
    open_served: Served, browser: Browser
) -> None:
    await _populate(open_served)
    problems: list[str] = []
    small: list[str] = []
    checked: dict[str, int] = {}
    async with open_tab(browser, f"{open_served.url}/ui", WIDTHS[0]) as board:
        page = board.page
        await page.locator(f'[data-agent="{PLANNER}"]').wait_for()
        for tab, ready in TABS:
            await page.click(f"[data-tab={tab}]")
            await page.locator(ready).first.wait_for()
            for width in WIDTHS:
                await _at(page, width)
                found: dict[str, Any] = await page.evaluate(OVERLAPS)
                problems += [f"{tab}-{width}: {p}" for p in found["problems"]]
                checked[f"{tab}-{width}"] = found["pairs"]
                if tab == "costs":
                    texts = await page.evaluate(CHART_TEXT)
                    checked[f"chart-{width}"] = len(texts)
                    small += [f"{width}: '{t['text']}' at {t['px']:.1f} px"
                              for t in texts if t["px"] < SMALLEST_TEXT_PX]  # fmt: skip
            await _at(page, WIDTHS[0])
        assert board.problems.messages == []

    assert problems == []
    assert small == []
    # Not a vacuous pass: pairs and chart labels were there to check at every width.
    assert all(checked[f"agents-{w}"] > 0 and checked[f"chart-{w}"] >= 4 for w in WIDTHS)
    assert checked["agents-375"] > checked["agents-1366"]  # the phone's label/value lines


async def test_the_check_catches_a_label_pressed_onto_its_value(
    open_served: Served, browser: Browser
) -> None:
    await _populate(open_served)
    async with open_tab(browser, f"{open_served.url}/ui", 375) as board:
        page = board.page
        await page.locator(f'[data-agent="{PLANNER}"]').wait_for()
        # What the page did before: a label box that its value starts right after.
        await page.evaluate(
            "() => document.querySelectorAll('td .cell-label').forEach((l) => {"
            " l.style.marginRight = '0'; l.style.minWidth = '0'; })"
        )
        await page.evaluate(SETTLED)
        found: dict[str, Any] = await page.evaluate(OVERLAPS)

    assert any("PERFORMANCE" in p.upper() and "runs into" in p for p in found["problems"])
