"""A project's knowledge: kept through the log, ranked by full-text relevance, never shared.

Runs on SQLite (the node's FTS5 index) and on PostgreSQL (its own full-text search).
"""

from __future__ import annotations

from bzzz.llm.knowledge import KnowledgeBase, query_words
from bzzz.llm.memory import Episode, MemoryStore
from bzzz.node.core import Node


async def test_the_most_relevant_entries_of_the_project_come_first_and_no_other_projects(
    store_node: Node,
) -> None:
    knowledge = KnowledgeBase(store_node.db, store_node.log)
    assert await knowledge.record(
        "shop",
        "slurp-1",
        [
            ("decision", "Payments retry with exponential backoff and idempotency keys"),
            ("insight", "The catalogue page is slow because images are not cached"),
            ("decision", "Orders are stored in PostgreSQL with one writer"),
        ],
    )
    await knowledge.record("garden", "slurp-2", [("decision", "Payments go through the till")])

    found = await knowledge.relevant("shop", "How should payments be retried?", limit=5)
    assert found[0].text.startswith("Payments retry")
    assert all(k.project == "shop" for k in found)
    assert "Payments go through the till" not in [k.text for k in found]
    cached = await knowledge.relevant("shop", "caching images on the catalogue", limit=1)
    assert [k.kind for k in cached] == ["insight"]
    assert await knowledge.relevant("nowhere", "payments retried", limit=5) == []
    knowledge.close()


async def test_recording_a_source_again_keeps_each_entry_once(store_node: Node) -> None:
    knowledge = KnowledgeBase(store_node.db, store_node.log)
    entries = [("decision", "Replicate the stream three times")]
    await knowledge.record("shop", "slurp-1", entries)
    await knowledge.record("shop", "slurp-1", entries)

    found = await knowledge.relevant("shop", "stream replicate", limit=5)
    assert len(found) == 1
    knowledge.close()


async def test_an_episode_summary_becomes_knowledge_of_its_project(store_node: Node) -> None:
    memory = MemoryStore(store_node.db, store_node.log)
    knowledge = KnowledgeBase(store_node.db, store_node.log)
    episode = Episode(["arch-1", "boss"], "queue choice", "JetStream fits the event log", "done")
    await memory.remember("arch-1", "shop", episode)

    [found] = await knowledge.relevant("shop", "Which event log fits?", limit=5)
    assert (found.kind, found.text) == ("episode", "queue choice: JetStream fits the event log")
    assert await knowledge.relevant("garden", "Which event log fits?", limit=5) == []
    knowledge.close()


def test_a_query_keeps_the_distinct_content_words() -> None:
    assert query_words("Which JetStream replicas should the log use? The LOG!") == [
        "jetstream",
        "replicas",
        "log",
    ]
