"""`bzzz reservations list [--json]`: the live reservations of the data directory's store."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from access.support import bzzz_cli, cli_env

from bzzz.config import load_settings
from bzzz.eventlog import Caller
from bzzz.network.memory import InMemoryBus
from bzzz.node.core import Node
from bzzz.reservations.schemas import ReserveInput
from bzzz.schemas import AnnounceInput

pytestmark = pytest.mark.integration


async def test_the_cli_lists_live_reservations_as_a_table_and_as_json(
    data_dir: Path, clean_env: dict[str, str]
) -> None:
    settings = load_settings(environ={}, overrides={"node": {"data_dir": str(data_dir)}})
    env = cli_env(clean_env, data_dir)
    async with Node(settings, bus=InMemoryBus()) as node:
        dev = Caller("dev-session")
        await node.agents.announce(dev, AnnounceInput(agent_id="dev-7", role="dev", project="shop"))
        made = await node.reservations.reserve(
            dev, ReserveInput(paths=["src/api/**", "README.md"], reason="routes refactor")
        )
        shown = await asyncio.to_thread(bzzz_cli, env, "reservations", "list", "--json")
        table = await asyncio.to_thread(bzzz_cli, env, "reservations", "list")
        other = await asyncio.to_thread(
            bzzz_cli, env, "reservations", "list", "--project", "blog", "--json"
        )

    assert shown.returncode == 0, shown.stderr
    [listed] = json.loads(shown.stdout)["reservations"]
    assert listed == made["reservation"]
    assert table.returncode == 0, table.stderr
    token = str(made["reservation"]["fencing_token"])
    for text in (made["reservation"]["id"], "dev-7", "src/api/**", "README.md", "exclusive", token):
        assert text in table.stdout
    assert json.loads(other.stdout) == {"reservations": []}
