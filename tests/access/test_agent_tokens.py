"""Agent tokens: a credential that is one agent, on every session, stored on both databases.

`bzzz token create NAME --agent AGENT_ID --project P` makes a token whose principal announces
that id alone; every call with it acts as that agent, whichever client, session or node, and
every token made for the agent (a new one after a revoke) holds the same agent.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest

from bzzz.access.keys import principal_key
from bzzz.access.tokens import TokenRegistry
from bzzz.errors import InvalidParameters, PermissionDenied
from bzzz.eventlog import Caller
from bzzz.network.forward import WirePrincipal
from bzzz.node.core import Node
from bzzz.principal import ALL, LOCAL, Principal, Scope
from bzzz.schemas import AnnounceInput, GetInput, PostInput, ThreadInput
from bzzz.store.database import Database


async def agent_token(
    node: Node, agent: str, project: str = "shop", scope: Scope = Scope.WRITE
) -> Principal:
    """The principal of a new token for ``agent``."""
    record, secret = await node.access.create_token(
        LOCAL, agent, [project], [ALL], scope, None, agent=agent
    )
    who = await node.access.authenticate(f"Bearer {secret}")
    assert who is not None and who.agent == agent == record.agent
    return who


def stateless(who: Principal) -> Caller:
    """A call of the SDK's default client with this credential (no session, no handle)."""
    return Caller(principal_key(who), who)


def in_session(who: Principal, session: str) -> Caller:
    """A call in a legacy MCP session opened with this credential."""
    return Caller(f"mcp-{session}", who)


@pytest.mark.parametrize(
    ("projects", "scope", "agent", "field"),
    [
        (["shop", "docs"], Scope.WRITE, "alice", "project"),
        ([ALL], Scope.WRITE, "alice", "project"),
        (["shop"], Scope.ADMIN, "alice", "scope"),
        (["shop"], Scope.WRITE, "alice smith", "agent"),
        (["shop"], Scope.WRITE, "x" * 129, "agent"),
    ],
)
async def test_an_agent_token_is_one_agent_of_one_project_below_admin(
    node: Node, projects: list[str], scope: Scope, agent: str, field: str
) -> None:
    before = len(node.tokens)
    with pytest.raises(InvalidParameters) as refused:
        await node.access.create_token(LOCAL, "t", projects, [ALL], scope, None, agent=agent)
    assert refused.value.details["field"] == field
    assert len(node.tokens) == before  # a refusal changes nothing


async def test_an_agent_token_announces_its_own_id_and_refuses_another_with_the_fix(
    node: Node,
) -> None:
    alice = await agent_token(node, "alice")
    with pytest.raises(PermissionDenied) as refused:
        await node.agents.announce(
            stateless(alice), AnnounceInput(agent_id="mallory", role="developer")
        )
    made = await node.agents.announce(
        stateless(alice), AnnounceInput(agent_id="alice", role="developer")
    )

    assert "'alice'" in refused.value.message and "--agent mallory" in refused.value.message
    assert refused.value.details["missing"] == "agent:mallory"
    assert node.agents.directory.get("mallory") is None
    assert made["agent"]["project"] == "shop"  # the token's one project by default


async def test_every_call_with_an_agent_token_acts_as_its_agent_on_any_session(
    node: Node,
) -> None:
    alice = await agent_token(node, "alice")
    bob = await agent_token(node, "bob")
    # Announced in a legacy session (it lives as long as the session), the agent is the
    # token's: a stateless call, or another session, acts as it with no handle.
    await node.agents.announce(
        in_session(alice, "s1"), AnnounceInput(agent_id="alice", role="developer")
    )
    await node.agents.announce(stateless(bob), AnnounceInput(agent_id="bob", role="reviewer"))
    posted = await node.conversations.post(
        stateless(alice),
        PostInput(target_address="bzzz://bob", message_type="text", content={"text": "hi"}),
    )
    thread = await node.conversations.thread(
        in_session(alice, "s2"), ThreadInput(action="create", participants=["bob"], topic="t")
    )
    inbox = await node.agents.get(stateless(bob), GetInput(address="bzzz://bob/inbox"))
    own_inbox = await node.agents.get(stateless(alice), GetInput(address="bzzz://alice/inbox"))
    await node.agents.session_ended(Caller("mcp-s1"))

    assert posted["delivery_results"]["recipients"] == ["bob"]
    assert "alice" in thread["result"]["participants"]
    assert [m["sender"] for m in inbox["content"]["messages"]] == ["alice"]
    assert own_inbox["content"]["messages"] == []
    assert node.agents.directory.get("bob").session_id == principal_key(bob)  # type: ignore[union-attr]
    # The legacy session held alice: it ended, and she went offline with it.
    assert not node.agents.directory.get("alice").online  # type: ignore[union-attr]


async def test_a_new_token_for_the_same_agent_holds_it_and_the_revoked_one_is_refused(
    node: Node,
) -> None:
    first = await agent_token(node, "alice")
    await node.agents.announce(stateless(first), AnnounceInput(agent_id="alice", role="dev"))
    await node.access.revoke_token(LOCAL, first.id.removeprefix("token:"))
    second = await agent_token(node, "alice")
    again = await node.agents.announce(
        stateless(second), AnnounceInput(agent_id="alice", role="dev")
    )
    acting = await node.agents.agents_of(stateless(second))
    # Another principal of the project cannot announce the id while the agent is online.
    teammate = await agent_token(node, "bob")

    assert again["agent"]["id"] == "alice"
    assert [a.id for a in acting] == ["alice"]
    assert principal_key(first) == principal_key(second) != principal_key(teammate)
    assert first.id != second.id


async def test_an_agent_tokens_agent_is_not_acted_as_by_a_principal_of_its_project(
    node: Node,
) -> None:
    alice = await agent_token(node, "alice")
    await node.agents.announce(stateless(alice), AnnounceInput(agent_id="alice", role="dev"))
    record, secret = await node.access.create_token(
        LOCAL, "carol", ["shop"], [ALL], Scope.WRITE, None
    )
    carol = await node.access.authenticate(f"Bearer {secret}")
    assert carol is not None

    with pytest.raises(InvalidParameters, match="already exists"):
        await node.agents.announce(stateless(carol), AnnounceInput(agent_id="alice", role="dev"))
    with pytest.raises(PermissionDenied):
        await node.agents.get(stateless(carol), GetInput(address="bzzz://alice/inbox"))
    assert await node.agents.agents_of(stateless(carol)) == []
    assert record.agent is None


async def test_the_token_list_and_whoami_show_the_agent(node: Node) -> None:
    await agent_token(node, "alice", scope=Scope.READ)
    listed = node.access.list_tokens(LOCAL)
    shown = listed[-1].to_json(listed[-1].created_at + timedelta(seconds=1))
    who = listed[-1].principal().to_json()

    assert shown["agent"] == "alice" and shown["scope"] == "read"
    assert who["agent"] == "alice"


async def test_an_agent_token_is_stored_and_read_back_on_both_databases(
    store_node: Node, database_url: str
) -> None:
    await agent_token(store_node, "alice")
    await store_node.access.create_token(LOCAL, "plain", ["shop"], [ALL], Scope.WRITE, None)
    loaded = TokenRegistry()
    db = Database(database_url)
    await db.open()
    try:
        await loaded.load(db)
    finally:
        await db.close()

    assert {r.name: r.agent for r in loaded.all()} == {"alice": "alice", "plain": None}


@pytest.mark.parametrize(
    "change",
    [
        lambda p: p | {"agent_id": "alice smith"},
        lambda p: p | {"agent_id": 7},
        lambda p: p | {"agent_id": "alice", "scope": "admin"},
    ],
    ids=["bad id", "not text", "admin"],
)
async def test_a_token_envelope_with_a_bad_agent_binding_is_not_applied(
    node: Node, change: Callable[[dict[str, object]], dict[str, object]]
) -> None:
    payload = {
        "token_id": "tok-forged",
        "name": "forged",
        "secret_hash": "0" * 64,
        "projects": ["shop"],
        "roles": [ALL],
        "scope": "write",
        "created_by": "local",
        "expires_at": None,
    }
    outcome = await node.log.emit("token.created", "token", "tok-forged", change(payload))

    assert outcome["ok"] is False
    assert node.tokens.get("tok-forged") is None


async def test_a_forwarded_call_keeps_the_agent_binding(node: Node) -> None:
    alice = await agent_token(node, "alice")
    wire = WirePrincipal.of(alice)
    again = WirePrincipal.model_validate_json(wire.model_dump_json()).principal()

    assert again == alice and again.agent == "alice"
    with pytest.raises(PermissionDenied):
        node.agents.project_of_announce(again, AnnounceInput(agent_id="mallory", role="dev"))
