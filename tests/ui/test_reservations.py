"""The dashboard's Reservations tab in headless Chromium: who holds which paths, per project."""

from __future__ import annotations

import httpx
import pytest
from access.support import mcp_client, ok, refused
from playwright.async_api import Browser

from bzzz.eventlog import Caller
from bzzz.principal import Scope
from bzzz.reservations.schemas import ReserveInput
from bzzz.schemas import AnnounceInput

from .conftest import Dashboard, Served, open_tab
from .test_layout import _layout_problems

# The session's event loop: the Chromium they share (conftest.browser) lives in it.
pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

LONG_PATH = "services/payments/" + "adapters/" * 6 + "**/*_idempotency_keys.py"


async def test_the_reservations_tab_lists_the_projects_reservations_and_conflicts(
    served: Served, dashboard: Dashboard
) -> None:
    shop = await served.token("shop-team", ["shop"])
    blog = await served.token("blog-team", ["blog"])
    reader = await served.token("shop-reader", ["shop"], scope=Scope.READ)
    url = f"{served.url}/mcp"
    async with mcp_client(url, "legacy", shop) as alice, mcp_client(url, "legacy", blog) as bob:
        await ok(alice, "bzzz_announce", {"agent_id": "alice", "role": "dev", "project": "shop"})
        await ok(bob, "bzzz_announce", {"agent_id": "bob", "role": "dev", "project": "blog"})
        await ok(alice, "bzzz_reserve", {"paths": ["src/api/**"], "reason": "routes refactor"})
        await ok(bob, "bzzz_reserve", {"paths": ["src/api/**"]})  # another project's
        await dashboard.sign_in(reader)
        page = dashboard.page
        await page.click("[data-tab=reservations]")
        row = page.locator("#reservations tr", has=page.locator('[data-holder="alice"]'))
        await row.wait_for()
        shown = await row.inner_text()

        # A second agent of the project asks for an overlapping path: refused, and the tab,
        # told by the event stream, shows the holder's reservation still.
        async with mcp_client(url, "legacy", shop) as carol:
            await ok(
                carol, "bzzz_announce", {"agent_id": "carol", "role": "dev", "project": "shop"}
            )
            await refused(
                carol, "bzzz_reserve", {"paths": ["src/api/x.py"]}, "RESERVATION_CONFLICT"
            )
            await page.locator("#events li", has_text="reservation_conflict").first.wait_for()
            # A guard's enforced check refuses carol the path: a live reservation_refused.
            async with httpx.AsyncClient(base_url=served.url, timeout=30) as http:
                checked = await http.post(
                    "/api/v1/reservations/check",
                    json={"agent": "carol", "paths": ["src/api/x.py"], "enforce": True,
                          "source": "guard"},
                    headers={"Authorization": f"Bearer {shop}"},
                )  # fmt: skip
            await page.locator("#events li", has_text="reservation_refused").first.wait_for()

    assert "src/api/**" in shown and "exclusive" in shown and "routes refactor" in shown
    token = await row.locator("[data-token]").inner_text()
    assert int(token) >= 1  # the grant's fencing token
    assert checked.status_code == 200 and checked.json()["allowed"] is False
    assert "shop" in shown
    text = await page.locator("#reservations").inner_text()
    assert "bob" not in text and "blog" not in text
    assert "carol" not in text
    assert dashboard.problems.messages == []


async def test_a_long_reserved_path_stays_inside_a_phone_screen(
    open_served: Served, browser: Browser
) -> None:
    node = open_served.node
    dev = Caller("layout-dev")
    await node.agents.announce(dev, AnnounceInput(agent_id="dev-" + "a" * 40, role="developer"))
    await node.reservations.reserve(dev, ReserveInput(paths=[LONG_PATH, "README.md"]))
    async with open_tab(browser, f"{open_served.url}/ui", 375) as board:
        page = board.page
        await page.locator("#live.on").wait_for()
        await page.click("[data-tab=reservations]")
        await page.locator(f'#reservations [data-path="{LONG_PATH}"]').wait_for()
        problems = await _layout_problems(page, "", "reservations-375")
        assert board.problems.messages == []

    assert problems == []
