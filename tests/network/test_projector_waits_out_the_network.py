"""A node serving named projects waits out a network that does not answer, then applies on.

Such a node meets gaps wherever other projects' envelopes lie and asks the network whether a
gap may be a purged envelope's. On a saturated cluster that question timed out, and the
timeout ended the node's projector for good (the 1M-agent harness run): the node served on,
applying nothing. Now the question is asked again until the network answers.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bzzz.config import Settings, load_settings
from bzzz.errors import NetworkError
from bzzz.eventlog import Caller
from bzzz.network import restate
from bzzz.network.memory import InMemoryBus
from bzzz.node.core import Node
from bzzz.principal import LOCAL
from bzzz.schemas import AnnounceInput

WAIT = 10.0


class SlowNetwork(InMemoryBus):
    """Does not say where a subject's envelopes end, ``unanswered`` times in a row."""

    def __init__(self) -> None:
        super().__init__()
        self.unanswered = 0
        self.asked_in_vain = 0

    async def last_sequence(self, subject: str | None = None) -> int:
        if subject is not None and self.unanswered:
            self.unanswered -= 1
            self.asked_in_vain += 1
            raise NetworkError("the network did not say where its log ends (TimeoutError())")
        return await super().last_sequence(subject)


def _settings(tmp_path: Path, name: str, projects: list[str]) -> Settings:
    return load_settings(
        environ={},
        overrides={
            "node": {"data_dir": str(tmp_path / name)},
            "bzzz": {"projects": projects},
            "conversation": {"escalation_rules": []},
        },
    )


async def test_a_timeout_reading_the_gaps_delays_the_projector_and_ends_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(restate, "RETRY", 0.01)
    bus = SlowNetwork()
    caller = Caller("session", LOCAL)
    async with (
        Node(_settings(tmp_path, "every", ["*"]), bus=bus) as every,
        Node(_settings(tmp_path, "p1", ["p1"]), bus=bus) as p1,
    ):
        bus.unanswered = 3
        for project in ("p2", "p1"):  # p2's envelope is a gap in what the p1 node consumes
            agent = AnnounceInput(agent_id=f"lead-{project}", role="dev", project=project)
            await every.agents.announce(caller, agent)
        await p1.projector.wait_for_sequence(await bus.last_sequence(), WAIT)

        assert bus.asked_in_vain == 3 and bus.unanswered == 0
        assert p1.projector.rejected["stand_ins_retried"] == 3
        assert p1.agents.directory.get("lead-p1") is not None
        assert p1.agents.directory.get("lead-p2") is None
        # Still consuming: what comes next is applied too.
        more = AnnounceInput(agent_id="next-p1", role="dev", project="p1")
        await every.agents.announce(caller, more)
        await p1.projector.wait_for_sequence(await bus.last_sequence(), WAIT)
        assert p1.agents.directory.get("next-p1") is not None
