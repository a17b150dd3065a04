"""Project subjects on one in-memory log: layouts, filters, the projector's own refusal."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import pytest

from bzzz.config import load_settings
from bzzz.errors import NotServed
from bzzz.eventlog import Caller
from bzzz.network import subjects
from bzzz.network.base import BatchHandler, subject_matches
from bzzz.network.envelope import seal
from bzzz.network.memory import InMemoryBus
from bzzz.node.core import Node
from bzzz.principal import LOCAL
from bzzz.projects import ProjectSet
from bzzz.schemas import AnnounceInput

CALLER = Caller("s", LOCAL)


def test_subjects_carry_the_project_and_readers_match_both_layouts() -> None:
    assert subjects.subject("n", "msg", "a", "shop") == "bzzz.n.p.shop.msg.a"
    assert subjects.subject("n", "agent", "a", "") == "bzzz.n.p._.agent.a"
    assert subjects.subject("n", "agent", "a", "a.b") == "bzzz.n.p.a%2Eb.agent.a"
    assert subjects.subject("n", "node", "x") == "bzzz.n.node.x"
    assert subjects.subject("n", "msg", "a") == "bzzz.n.p._.msg.a"  # no project: every node's
    filters = subjects.kind_filters("n", "msg", "a")
    assert [subject_matches(f, "bzzz.n.p.shop.msg.a") for f in filters] == [False, True]
    assert [subject_matches(f, "bzzz.n.msg.a") for f in filters] == [True, False]
    assert subjects.kind_and_key("bzzz.n.p.shop.msg.a.b") == ("msg", "a.b")
    assert subjects.kind_and_key("bzzz.n.msg.a.b") == ("msg", "a.b")
    tokens = subjects.served_tokens(ProjectSet.of(["shop"]))
    assert subjects.serves_subject("n", "bzzz.n.p.shop.msg.a", tokens)
    assert subjects.serves_subject("n", "bzzz.n.p._.msg.a", tokens)
    assert not subjects.serves_subject("n", "bzzz.n.p.ops.msg.a", tokens)
    assert not subjects.serves_subject("n", "bzzz.n.msg.a", tokens)  # old layout: unknown
    assert subjects.serves_subject("n", "bzzz.n.admission.x", tokens)
    assert subjects.consumer_filters("n", ProjectSet.of(["*"])) == ["bzzz.n.>"]


class UnfilteredBus(InMemoryBus):
    """A log that ignores a consumer's filter: what the projector then applies is its own."""

    async def consume(
        self,
        durable: str,
        handler: BatchHandler,
        start_seq: int = 1,
        filters: Sequence[str] | None = None,
    ) -> None:
        await super().consume(durable, handler, start_seq)


def _settings(tmp_path: Path, projects: list[str]) -> object:
    return load_settings(
        environ={},
        overrides={"node": {"data_dir": str(tmp_path / "node")}, "bzzz": {"projects": projects}},
    )


async def test_the_projector_refuses_a_project_it_does_not_serve(tmp_path: Path) -> None:
    bus = UnfilteredBus()
    async with Node(_settings(tmp_path, ["p1"]), bus=bus) as node:  # type: ignore[arg-type]
        await node.agents.announce(CALLER, AnnounceInput(agent_id="a1", role="r", project="p1"))
        payload = {"agent_id": "a2", "role": "r", "project": "p2", "session_id": "x"}
        stray = seal(node.identity, "main", "agent.announced", "bzzz.main.p.p2.agent.a2", payload)
        seq = await bus.publish(stray.subject, stray.to_bytes(), stray.id)
        await node.projector.wait_for_sequence(seq, 10)
        assert node.projector.rejected["not_served"] == 1
        assert node.projector.directory.get("a2") is None
        assert node.projector.directory.get("a1") is not None
        with pytest.raises(NotServed):
            await node.agents.announce(CALLER, AnnounceInput(agent_id="a3", role="r", project="p2"))


async def test_a_filtered_consumer_skips_other_projects(tmp_path: Path) -> None:
    bus = InMemoryBus()
    async with Node(_settings(tmp_path, ["p1"]), bus=bus) as node:  # type: ignore[arg-type]
        assert bus.filters[node.projector.durable] == subjects.consumer_filters(
            "main", ProjectSet.of(["p1"])
        )
        await node.agents.announce(CALLER, AnnounceInput(agent_id="free", role="r"))
        assert node.projector.directory.get("free") is not None  # no project: every node's
        assert node.status()["projects"] == ["p1"]


async def test_old_layout_is_read_by_every_node_and_warned_of_by_a_named_one(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    bus = InMemoryBus()
    async with Node(_settings(tmp_path / "a", ["*"]), bus=bus) as star:  # type: ignore[arg-type]
        payload = {"agent_id": "old", "role": "r", "project": "p1", "session_id": "x"}
        old = seal(star.identity, "main", "agent.announced", "bzzz.main.agent.old", payload)
        seq = await bus.publish(old.subject, old.to_bytes(), old.id)
        await star.projector.wait_for_sequence(seq, 10)
        assert star.projector.directory.get("old") is not None  # the * node reads it
    caplog.set_level(logging.WARNING, logger="bzzz.projector")
    # The same data directory (the same identity, admitted) now serves p1 alone.
    async with Node(_settings(tmp_path / "a", ["p1"]), bus=bus):  # type: ignore[arg-type]
        pass
    warned = [r for r in caplog.records if "older subject layout" in r.getMessage()]
    assert len(warned) == 1
