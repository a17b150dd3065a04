"""The console shows who was paged for an escalation, when, and who answered; a person
acknowledges there and the paging stops."""

from __future__ import annotations

import pytest
from access.support import mcp_client, ok

from bzzz.config import Settings
from bzzz.config.conversations import RotaConfig

from .conftest import Dashboard, Served

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]


@pytest.fixture
def rota(settings: Settings) -> None:
    """The project 'shop' pages its console desk, then its admins, a minute apart."""
    steps = [{"name": "desk", "console": True}]
    settings.escalation.rota = {"shop": RotaConfig.model_validate({"steps": steps})}
    settings.escalation.ack_timeout = 60


async def test_the_console_shows_the_paging_and_acknowledging_there_stops_it(
    rota: None, served: Served, dashboard: Dashboard
) -> None:
    team = await served.token("team", ["shop"])
    alice = await served.token("alice", ["shop"], roles=["human"])
    page = dashboard.page
    async with mcp_client(f"{served.url}/mcp", "stateless", team) as arch:
        await ok(
            arch, "bzzz_announce", {"agent_id": "arch", "role": "architect", "project": "shop"}
        )
        await ok(arch, "bzzz_announce", {"agent_id": "dev", "role": "developer", "project": "shop"})
        await ok(
            arch,
            "bzzz_thread",
            {"action": "create", "topic": "Checkout", "participants": ["dev"], "agent_id": "arch"},
        )
    await dashboard.sign_in(alice)
    served.clock.advance(601)
    [escalation_id] = await served.node.escalations.check_all()
    await served.node.paging.run_due()

    paged = page.locator(f'[data-paging="{escalation_id}"] [data-step="0"]')
    await paged.wait_for()
    assert "desk" in await paged.inner_text() and "console" in await paged.inner_text()
    await page.click(f'[data-ack="{escalation_id}"]')
    await page.locator(f'[data-paging="{escalation_id}"] [data-ack-by="alice"]').wait_for()
    served.clock.advance(600)
    await served.node.paging.run_due()
    # Resolved in the thread's view: the list says who resolved it.
    await page.click("[data-escalation]")
    await page.fill("[data-resolve] input[name=reason]", "rolled back")
    await page.click("[data-resolve] button[type=submit]")
    resolver = page.locator(f'[data-paging="{escalation_id}"] [data-resolved-by="human-alice"]')
    await resolver.wait_for()
    [shown] = await served.node.paging.attach(
        [e.to_json() for e in await served.node.escalations.list()]
    )

    assert [p["name"] for p in shown["paging"]["pages"]] == ["desk"]
    assert shown["paging"]["ack"]["by"] == "alice" and shown["paging"]["ack"]["via"] == "console"
    assert shown["paging"]["resolved_by"] == "human-alice"
    assert dashboard.problems.messages == []
