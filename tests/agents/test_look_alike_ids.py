"""Agent ids are unique regardless of case and Unicode look-alikes (NFKC, case-folded)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.config import Config

from bzzz.domain import canonical_agent_id
from bzzz.errors import InvalidParameters
from bzzz.eventlog import Caller
from bzzz.node.core import Node
from bzzz.schemas import AnnounceInput
from bzzz.store.database import MIGRATIONS


async def announce(node: Node, session: str, agent_id: str) -> dict[str, Any]:
    return await node.agents.announce(
        Caller(session), AnnounceInput(agent_id=agent_id, role="architect")
    )


async def stored_ids(node: Node) -> list[str]:
    async with node.db.session() as session:
        rows = await session.execute(sa.text("SELECT id FROM agents ORDER BY id"))
        return [r[0] for r in rows]


@pytest.mark.parametrize(
    ("one", "other"),
    [
        ("ISO-A", "iso-a"),
        ("Reviewer.001", "reviewer.001"),
        ("\uff29\uff33\uff2f-\uff21", "iso-a"),  # full-width I S O - A
        ("\ufb01le-bot", "file-bot"),  # the fi ligature (U+FB01)
        ("\u212aelvin", "kelvin"),  # KELVIN SIGN
        ("Stra\u00dfe", "strasse"),
    ],
)
def test_spellings_of_one_id_share_their_canonical_form(one: str, other: str) -> None:
    assert canonical_agent_id(one) == canonical_agent_id(other)


def test_different_ids_stay_different() -> None:
    assert canonical_agent_id("iso-a") != canonical_agent_id("iso-b")
    assert canonical_agent_id("a.b") != canonical_agent_id("a-b")


async def test_an_id_in_another_case_is_refused_while_the_agent_is_live(node: Node) -> None:
    await announce(node, "team-1", "ISO-A")

    for session in ("team-2", "team-1"):
        with pytest.raises(InvalidParameters, match="Agent ID already exists") as caught:
            await announce(node, session, "iso-a")
        assert caught.value.details["look_alike"] == "ISO-A"

    assert await stored_ids(node) == ["ISO-A"]
    assert node.agents.directory.get("iso-a") is None


async def test_the_same_spelling_re_announced_by_its_session_still_updates(node: Node) -> None:
    await announce(node, "team-1", "ISO-A")

    again = await announce(node, "team-1", "ISO-A")

    assert again["agent"]["id"] == "ISO-A"


async def test_another_spelling_is_free_once_the_agent_is_offline(node: Node) -> None:
    await announce(node, "team-1", "ISO-A")
    await node.agents.session_ended(Caller("team-1"))

    result = await announce(node, "team-2", "iso-a")

    assert result["agent"]["id"] == "iso-a"  # shown as given
    assert await stored_ids(node) == ["ISO-A", "iso-a"]
    with pytest.raises(InvalidParameters, match="Agent ID already exists"):
        await announce(node, "team-1", "ISO-A")


async def test_the_log_refuses_a_unicode_look_alike_from_any_node(node: Node) -> None:
    # The MCP schema admits ASCII ids only; another node's envelope may carry anything.
    await announce(node, "team-1", "iso-a")
    payload = {
        "agent_id": "\uff29\uff33\uff2f-\uff21",
        "role": "architect",
        "capabilities": [],
        "session_id": "peer-session",
        "max_tasks": 3,
        "metadata": {},
    }

    outcome = await node.log.emit("agent.announced", "agent", "look-alike", payload)

    assert outcome["ok"] is False and outcome["reason"] == "exists"
    assert await stored_ids(node) == ["iso-a"]


async def test_two_spellings_announced_at_once_leave_one_agent(node: Node) -> None:
    results = await asyncio.gather(
        announce(node, "team-1", "ISO-A"),
        announce(node, "team-2", "iso-a"),
        return_exceptions=True,
    )

    refused = [r for r in results if isinstance(r, InvalidParameters)]
    assert len(refused) == 1
    assert len(await stored_ids(node)) == 1


def _migrate(url: str, revision: str) -> None:
    engine = sa.create_engine(url)
    try:
        with engine.begin() as connection:
            config = Config()
            config.set_main_option("script_location", str(MIGRATIONS))
            config.attributes["connection"] = connection
            command.upgrade(config, revision)
    finally:
        engine.dispose()


def test_the_migration_fills_the_canonical_id_of_existing_agents(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'old.db'}"
    _migrate(url, "0004")
    engine = sa.create_engine(url)
    with engine.begin() as connection:
        connection.execute(
            sa.text(
                "INSERT INTO agents (id, role, capabilities, max_tasks, status, active_tasks,"
                " tasks_completed, tasks_failed, performance, node_id, session_id, created_at,"
                " last_activity, metadata) VALUES ('ISO-A', 'architect', '[]', 3, 'idle', 0, 0,"
                " 0, 0.9, 'node-a', 's', '2030-01-01 00:00:00', '2030-01-01 00:00:00', '{}')"
            )
        )
    engine.dispose()

    _migrate(url, "head")
    engine = sa.create_engine(url)
    with engine.connect() as connection:
        rows = connection.execute(sa.text("SELECT id, canonical_id FROM agents")).all()
    engine.dispose()

    assert [tuple(r) for r in rows] == [("ISO-A", "iso-a")]
