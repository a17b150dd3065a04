"""A thread as it happened, in Chromium at 375 and 1366 px: the transcript interleaves the
thread's join, escalation raised (priority "high", as its action was configured) and resolved
(by whom, why), decision, stance and leave with its messages in log order; the history slider
stops at the actions too; the escalations list shows the priority by name; a task assigned while
the page is open reaches Live events (a dashboard open a while, and a second stream opened).
Set ``BZZZ_UI_SHOTS`` to a folder to keep a screenshot of the transcript at each width."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from playwright.async_api import Browser

from bzzz.clock import ManualClock
from bzzz.config import EscalationRuleConfig, Settings
from bzzz.conversations.monitor import ThreadMonitor
from bzzz.eventlog import Caller
from bzzz.events.webhooks import WebhookDispatcher
from bzzz.network.memory import InMemoryBus
from bzzz.principal import Scope
from bzzz.schemas import AnnounceInput, PostInput, ThreadInput

from .conftest import Served, _idle, _no_dispatch, open_tab, serve

# The session's event loop: the Chromium they share (conftest.browser) lives in it.
pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

WIDTHS = [375, 1366]
HIGH = {
    "name": "stuck",
    "conditions": [{"type": "no_progress", "threshold": True, "timeframe": 600}],
    "actions": [{"type": "notify_human", "target": "project_manager", "priority": "high"}],
}
# What happened, in order, as the transcript's items say it (data-kind of each item).
HAPPENED = ["created", "message", "joined", "escalated", "resolved", "decision", "stance", "left"]


@pytest_asyncio.fixture(loop_scope="session")
async def served(
    settings: Settings, memory_bus: InMemoryBus, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Served]:
    """A node needing credentials whose 'stuck' rule's action is configured "high"."""
    monkeypatch.setattr(ThreadMonitor, "run", _idle)
    monkeypatch.setattr(WebhookDispatcher, "run", _no_dispatch)
    settings.auth.required = True
    settings.conversation.default_timeout = 10**7
    settings.conversation.escalation_rules = [EscalationRuleConfig.model_validate(HIGH)]
    async with serve(settings, memory_bus, ManualClock()) as running:
        yield running


async def _as(served: Served, agent: str, **post: Any) -> str:
    posted = await served.node.conversations.post(Caller(f"s-{agent}"), PostInput(**post))
    message_id: str = posted["message_id"]
    return message_id


async def _thread(served: Served, agent: str, action: str, **params: Any) -> dict[str, Any]:
    return await served.node.conversations.thread(
        Caller(f"s-{agent}"), ThreadInput(action=action, **params)
    )


async def _history(served: Served) -> str:
    """A thread of arch and dev that qa joins and leaves, escalated and resolved by arch, with
    a decision dev agrees with; its id."""
    node = served.node
    for agent in ("arch", "dev", "qa"):
        await node.agents.announce(
            Caller(f"s-{agent}"), AnnounceInput(agent_id=agent, role=agent, project="shop")
        )
    thread_id: str = (
        await _thread(served, "arch", "create", topic="Queue choice", participants=["dev"])
    )["thread_id"]
    said = {"thread_id": thread_id, "message_type": "text"}
    await _as(served, "dev", **said, content={"text": "Which queue?"})
    await _thread(served, "qa", "join", thread_id=thread_id)
    served.clock.advance(601)
    assert await node.escalations.check_all()
    await _thread(served, "arch", "resolve", thread_id=thread_id, reason="we pick NATS")
    decision = await _as(
        served, "arch", thread_id=thread_id, message_type="decision", content={"text": "NATS."}
    )
    await _as(served, "dev", **said, content={"text": "Yes"}, reply_to=decision, stance="agree")
    await _thread(served, "qa", "leave", thread_id=thread_id)
    return thread_id


KINDS = "(items) => items.map((i) => i.dataset.kind)"


@pytest.mark.parametrize("width", WIDTHS)
async def test_the_transcript_shows_what_happened_between_the_messages_and_the_slider_walks_it(
    served: Served, browser: Browser, width: int
) -> None:
    lead = await served.token("shop-lead", ["shop"], scope=Scope.ADMIN)
    thread_id = await _history(served)
    async with open_tab(browser, f"{served.url}/ui", width) as board:
        page = board.page
        await board.sign_in(lead)
        await page.click("[data-tab=threads]")
        await page.click(f'[data-thread="{thread_id}"]')
        view = page.locator(f'[data-thread-view="{thread_id}"]')
        await view.locator('#messages [data-kind="left"]').wait_for()
        kinds = await view.locator("#messages > li").evaluate_all(KINDS)
        escalated = await view.locator('#messages [data-kind="escalated"]').inner_text()
        resolved = await view.locator('#messages [data-kind="resolved"]').inner_text()
        texts = await view.locator("#messages > li").all_inner_texts()
        if os.environ.get("BZZZ_UI_SHOTS"):
            shot = Path(os.environ["BZZZ_UI_SHOTS"]) / f"timeline-{width}.png"
            await page.screenshot(path=str(shot), full_page=True)

        # Back to the stop of qa's join: the transcript as it stood then, actions and all.
        slider = view.locator("#time-slider")
        stops = int(await slider.get_attribute("max") or 0) + 1
        joined = await view.locator('#messages [data-kind="joined"]').get_attribute("data-seq")
        index = await page.evaluate(
            "async ([id, seq]) => { const r = await fetch(`/api/v1/threads/${id}/timeline`,"
            " { headers: { Authorization: `Bearer ${sessionStorage.getItem('bzzz.token')}` } });"
            " const seqs = [...new Set((await r.json()).entries.filter((e) => e.verified)"
            ".map((e) => e.seq))]; return seqs.indexOf(Number(seq)); }",
            [thread_id, joined],
        )
        await slider.fill(str(index))
        await view.locator("#time-label", has_text="as of").wait_for()
        await page.wait_for_function(
            "() => !document.querySelector('#messages [data-kind=\"escalated\"]')"
        )
        then = await view.locator("#messages > li").evaluate_all(KINDS)
        await view.locator("#time-slider").fill(str(stops - 1))
        await view.locator('#messages [data-kind="left"]').wait_for()

        # The escalations list names the priority as it was configured.
        await page.click("[data-tab=console]")
        row = page.locator("#console tr", has=page.locator("[data-escalation]"))
        priority = await row.locator('td[data-label="Priority"]').inner_text()
        assert board.problems.messages == []

    assert kinds == HAPPENED
    assert "priority high" in escalated and "stuck" in escalated
    assert "arch" in resolved and "we pick NATS" in resolved and "escalation esc-" in resolved
    assert not [t for t in texts if "[object" in t or "undefined" in t]
    assert "Which queue?" in texts[1] and "NATS." in texts[5] and "Yes" in texts[6]
    assert stops == len(HAPPENED)
    assert then == HAPPENED[:3]
    assert priority == "high"


@pytest.mark.parametrize("width", WIDTHS)
async def test_a_task_assigned_while_the_page_is_open_reaches_live_events(
    served: Served, browser: Browser, width: int
) -> None:
    # The lead's dashboard has been open a while (its stream holds many events), and a second
    # stream opens (another tab): both are woken by the same commits from then on.
    lead = await served.token("lead", ["shop", "web"], scope=Scope.READ)
    node = served.node
    await node.agents.announce(
        Caller("s-boss"), AnnounceInput(agent_id="boss", role="lead", project="shop")
    )
    await node.agents.announce(
        Caller("s-dev"), AnnounceInput(agent_id="dev", role="dev", project="shop", max_tasks=500)
    )
    async with (
        open_tab(browser, f"{served.url}/ui", width) as first,
        open_tab(browser, f"{served.url}/ui", width) as second,
    ):
        await first.sign_in(lead)
        for n in range(230):
            await node.agents.announce(
                Caller(f"s-w{n}"), AnnounceInput(agent_id=f"w{n}", role="dev", project="web")
            )
        await first.page.locator("#events li", has_text="w229").wait_for()
        await second.sign_in(lead)
        await _as(
            served, "boss", target_address="bzzz://dev", message_type="task_assignment",
            content={"type": "review", "description": "Review the retry policy"},
        )  # fmt: skip
        for board in (first, second):
            await board.page.locator("#events li", has_text="task_assignment").wait_for()
        shown = await first.page.locator("#events li", has_text="task_assignment").inner_text()
        assert first.problems.messages == [] and second.problems.messages == []

    assert "dev" in shown
