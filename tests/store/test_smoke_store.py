"""The store opens and migrates on both databases."""

from bzzz.eventlog import LOCAL_CALLER, Caller
from bzzz.node.core import Node
from bzzz.schemas import AnnounceInput, LookupInput


async def test_announced_agent_is_found_on_both_databases(store_node: Node) -> None:
    await store_node.agents.announce(
        Caller("s1"), AnnounceInput(agent_id="architect-001", role="architect")
    )
    found = await store_node.agents.lookup(
        LOCAL_CALLER, LookupInput(semantic_address="bzzz://*:architect@*")
    )
    assert [m["id"] for m in found["matches"]] == ["architect-001"]
