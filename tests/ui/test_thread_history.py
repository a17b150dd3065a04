"""The thread view's time slider: moved back to before the decision, the dashboard shows the
thread as it stood then (replayed from the signed log), and at the right end it is live again."""

from __future__ import annotations

import pytest

from bzzz.eventlog import LOCAL_CALLER, Caller
from bzzz.principal import Scope
from bzzz.schemas import AnnounceInput, PostInput, ThreadInput

from .conftest import Dashboard, Served

# The session's event loop: the Chromium they share (conftest.browser) lives in it.
pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]


async def _say(served: Served, agent: str, thread_id: str, text: str, **extra: str) -> str:
    posted = await served.node.conversations.post(
        Caller(f"s-{agent}"),
        PostInput(message_type=extra.pop("kind", "text"), content={"text": text},
                  thread_id=thread_id, **extra),
    )  # fmt: skip
    message_id: str = posted["message_id"]
    return message_id


async def test_the_time_slider_moved_before_the_decision_shows_the_thread_as_it_stood(
    served: Served, dashboard: Dashboard
) -> None:
    admin = await served.token("shop-admin", ["shop"], scope=Scope.ADMIN)
    for agent in ("arch", "dev"):
        await served.node.agents.announce(
            Caller(f"s-{agent}"), AnnounceInput(agent_id=agent, role=agent, project="shop")
        )
    created = await served.node.conversations.thread(
        Caller("s-arch"), ThreadInput(action="create", topic="Queue choice", participants=["dev"])
    )
    thread_id = created["thread_id"]
    decision = await _say(served, "arch", thread_id, "We take NATS.", kind="decision")
    await _say(served, "dev", thread_id, "Agreed.", reply_to=decision, stance="agree")
    stops = [e for e in await served.node.agents.thread_envelopes(LOCAL_CALLER, thread_id)]
    at_decision = next(i for i, e in enumerate(stops) if e["type"] == "message.posted")

    await dashboard.sign_in(admin)
    page = dashboard.page
    await page.click("[data-tab=threads]")
    await page.click(f'[data-thread="{thread_id}"]')
    view = page.locator(f'[data-thread-view="{thread_id}"]')
    await view.locator(".badge", has_text="completed").wait_for()
    slider = view.locator("#time-slider")
    assert await slider.get_attribute("max") == str(len(stops) - 1)
    assert await slider.input_value() == str(len(stops) - 1)
    live_messages = await view.locator(".message").count()

    await slider.fill(str(at_decision))
    await page.locator(f'[data-thread-view="{thread_id}"] .section-head .badge',
                       has_text="active").wait_for()  # fmt: skip
    then_messages = await view.locator(".message").all_inner_texts()
    label = await view.locator("#time-label").inner_text()

    await view.locator("#time-slider").fill(str(len(stops) - 1))
    await view.locator(".section-head .badge", has_text="completed").wait_for()
    # The badge comes with the thread's read, its messages with the timeline's, a moment later.
    await view.locator(".message", has_text="Agreed.").wait_for()
    back = await view.locator(".message").count()

    assert live_messages == 2
    assert len(then_messages) == 1 and "We take NATS." in then_messages[0]
    assert label.startswith("as of ") and f"#{stops[at_decision]['seq']}" in label
    assert back == 2
