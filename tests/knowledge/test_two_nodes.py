"""A thread's consensus on one node is a fact on another node serving its project (a real
nats-server, two stores), forwarded by a node that does not serve it, refused to another
project's token everywhere."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from admitted import admit
from e2e.support import eventually

from bzzz.config import Settings, load_settings
from bzzz.errors import PermissionDenied
from bzzz.eventlog import Caller
from bzzz.node.core import Node
from bzzz.principal import Scope, principal
from bzzz.schemas import AnnounceInput, GetInput, PostInput, ThreadInput

pytestmark = pytest.mark.integration

KNOWLEDGE = "bzzz://*@shop/knowledge"
TEAM = Caller("team", principal("token:team", "token", ["shop"], ["*"], Scope.WRITE, "team"))
OUTSIDER = Caller("outsider", principal("token:o", "token", ["other"], ["*"], Scope.WRITE, "o"))


def _settings(tmp_path: Path, name: str, nats_url: str, projects: str) -> Settings:
    return load_settings(
        environ={},
        overrides={
            "node": {"data_dir": str(tmp_path / name)},
            "bzzz": {"nats_url": [nats_url], "heartbeat_interval": 0.5, "projects": [projects]},
        },
    )


def _as(agent_id: str) -> Caller:
    return Caller(f"session-{agent_id}", TEAM.principal)


async def _agree_on_a_decision(node: Node) -> tuple[str, str]:
    for agent in ("arch", "dev", "rev"):
        params = AnnounceInput(agent_id=agent, role="developer", project="shop")
        await node.agents.announce(_as(agent), params)
    created = await node.conversations.thread(
        _as("arch"), ThreadInput(action="create", participants=["dev", "rev"], topic="Refunds")
    )
    thread_id = created["thread_id"]

    async def say(agent: str, content: dict[str, Any], **extra: Any) -> dict[str, Any]:
        params = PostInput(
            message_type=extra.pop("kind", "text"), content=content, thread_id=thread_id, **extra
        )
        return await node.conversations.post(_as(agent), params)

    decision = await say(
        "arch",
        {
            "text": "Refunds never carry idempotency keys; checkout retries do.",
            "fact": {"subject": "refunds", "relation": "carry", "object": "no idempotency key"},
        },
        kind="decision",
    )
    await say("dev", {"text": "Yes."}, reply_to=decision["message_id"], stance="agree")
    done = await say("rev", {"text": "Agreed."}, reply_to=decision["message_id"], stance="agree")
    assert done["consensus"]
    return thread_id, decision["message_id"]


async def _facts(node: Node, caller: Caller, **fields: Any) -> list[dict[str, Any]]:
    got = await node.front.get(caller, GetInput(address=KNOWLEDGE, **fields))
    return list(got["content"]["facts"])


async def test_a_consensus_fact_is_read_on_another_node_and_forwarded_by_a_third(
    tmp_path: Path, nats_url: str
) -> None:
    a = Node(_settings(tmp_path, "a", nats_url, "shop"))
    b = Node(_settings(tmp_path, "b", nats_url, "shop"))
    c = Node(_settings(tmp_path, "c", nats_url, "other"))
    async with a, b, c:
        await admit(a, b, c)
        thread_id, decision_id = await _agree_on_a_decision(a)

        [fact] = await eventually(lambda: _facts(b, TEAM, about="Refunds"), bool, within=20)
        assert (fact["subject"], fact["relation"], fact["object"]) == (
            "refunds",
            "carry",
            "no idempotency key",
        )
        assert fact["statement"] == "Refunds never carry idempotency keys; checkout retries do."
        assert fact["source"] == {
            "thread": thread_id,
            "message": decision_id,
            "agents": ["arch", "dev", "rev"],
        }
        assert fact["status"] == "agreed" and fact["origin"] == "consensus"
        # The same answer from the node that stated it, and through one that does not serve
        # the project (forwarded), ranked the same.
        asked = {"q": "idempotency refunds"}
        assert await _facts(a, TEAM, **asked) == await _facts(b, TEAM, **asked)
        assert await _facts(c, TEAM, **asked) == await _facts(b, TEAM, **asked) == [fact]
        async with c.db.session() as session:
            assert not (await session.execute(_count_facts())).scalar()

        for node in (a, b, c):
            with pytest.raises(PermissionDenied):
                await _facts(node, OUTSIDER, about="refunds")


def _count_facts() -> Any:
    from sqlalchemy import func, select

    from bzzz.store.models import FactRow

    return select(func.count()).select_from(FactRow)
