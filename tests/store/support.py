"""The main flows of a node, and a snapshot of what they left in the store."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import select

from bzzz.eventlog import Caller
from bzzz.network.base import Stored
from bzzz.network.memory import InMemoryBus
from bzzz.node.core import Node
from bzzz.schemas import AnnounceInput, PostInput, SubscribeInput, ThreadInput
from bzzz.store.database import Database
from bzzz.store.models import Base

# Tables that only say how this node got there (when it applied what), not what the log means.
BOOKKEEPING = frozenset({"applied_envelopes"})
# Tables of this node's own: its subscriptions, and its audit chain (a node audits what it saw,
# e.g. a newcomer's envelopes it dropped before the newcomer was admitted).
NODE_LOCAL = frozenset(
    {"subscription_events", "webhook_deliveries", "slurp_submissions", "audit_records"}
)
# Columns the webhook dispatcher changes in the background as it attempts deliveries.
VOLATILE = {
    "webhook_deliveries": ("status", "attempts", "next_attempt_at", "last_error", "finished_at")
}


@dataclass(slots=True)
class Flows:
    """Ids the flows produced, for the test to look at."""

    subscription_id: str
    webhook_subscription_id: str
    done_task: str
    open_task: str
    thread_id: str
    question_id: str


class RecordingBus(InMemoryBus):
    """An in-memory log that remembers what was published, to publish it again."""

    def __init__(self) -> None:
        super().__init__()
        self.published: list[tuple[str, bytes]] = []

    async def store(self, subject: str, data: bytes, msg_id: str) -> Stored:
        self.published.append((subject, data))
        return await super().store(subject, data, msg_id)


def closed_port_url() -> str:
    """A local URL nothing listens on: deliveries to it stay pending."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/hook"


async def run_main_flows(node: Node, webhook_url: str | None = None) -> Flows:
    """Announce, look up, assign and finish tasks, talk in a thread, subscribe."""
    webhook_url = webhook_url or closed_port_url()
    boss, dev, rev = Caller("s-boss"), Caller("s-dev"), Caller("s-rev")
    events = await node.subscriptions.subscribe(
        Caller("watcher"),
        SubscribeInput(event_types=["agent_announcement", "task_assignment", "thread_created"]),
    )
    hooked = await node.subscriptions.subscribe(
        Caller("watcher"),
        SubscribeInput(event_types=["task_assignment"], callback_webhook=webhook_url),
    )
    await node.agents.announce(boss, AnnounceInput(agent_id="boss", role="architect"))
    await node.agents.announce(
        dev,
        AnnounceInput(agent_id="dev", role="developer", capabilities=["python"], project="api"),
    )
    await node.agents.announce(rev, AnnounceInput(agent_id="rev", role="reviewer", max_tasks=1))

    first = await node.conversations.post(
        boss,
        PostInput(
            target_address="bzzz://*:developer@api",
            message_type="task_assignment",
            content={"description": "build", "task_type": "code"},
            priority="high",
        ),
    )
    done = first["tasks"]["dev"]
    await node.conversations.post(
        dev,
        PostInput(
            target_address="bzzz://boss",
            message_type="task_progress",
            content={"task_id": done, "percent": 50},
        ),
    )
    await node.conversations.post(
        dev,
        PostInput(
            target_address="bzzz://boss",
            message_type="task_complete",
            content={"task_id": done, "result": {"pr": 7}},
        ),
    )
    second = await node.conversations.post(
        boss,
        PostInput(target_address="bzzz://rev", message_type="task_assignment", content={}),
    )
    # rev is at max_tasks: refused, and the refusal is part of the state too.
    await node.conversations.post(
        boss,
        PostInput(target_address="bzzz://rev", message_type="task_assignment", content={}),
    )

    created = await node.conversations.thread(
        boss, ThreadInput(action="create", participants=["dev"], topic="API design")
    )
    thread_id = created["thread_id"]
    await node.conversations.thread(rev, ThreadInput(action="join", thread_id=thread_id))
    question = await node.conversations.post(
        dev,
        PostInput(
            target_address="bzzz://*",
            message_type="question",
            content={"text": "Which protocol do we use?"},
            thread_id=thread_id,
        ),
    )
    await node.conversations.post(
        boss,
        PostInput(
            target_address="bzzz://*",
            message_type="decision",
            content={"text": "We use REST for the public API."},
            thread_id=thread_id,
            reply_to=question["message_id"],
        ),
    )
    await node.conversations.thread(dev, ThreadInput(action="summarize", thread_id=thread_id))
    await node.conversations.thread(rev, ThreadInput(action="leave", thread_id=thread_id))
    return Flows(
        subscription_id=events["subscription_id"],
        webhook_subscription_id=hooked["subscription_id"],
        done_task=done,
        open_task=second["tasks"]["rev"],
        thread_id=thread_id,
        question_id=question["message_id"],
    )


async def snapshot(node: Node, skip: frozenset[str] = BOOKKEEPING) -> dict[str, list[Any]]:
    """Every row of every table (but ``skip``), in primary-key order."""
    tables: dict[str, list[Any]] = {}
    async with node.db.session() as session:
        for table in Base.metadata.sorted_tables:
            if table.name in skip:
                continue
            columns = [c for c in table.columns if c.name not in VOLATILE.get(table.name, ())]
            query = select(*columns).order_by(*table.primary_key.columns)
            tables[table.name] = [tuple(row) for row in await session.execute(query)]
    return tables


def message_row(message_id: str, **fields: Any) -> dict[str, Any]:
    """A messages-table row as the projection stages it (``fields`` override)."""
    return {
        "id": message_id,
        "sender": "alice",
        "target_address": "bzzz://bob",
        "message_type": "text",
        "content": {"text": "hello"},
        "priority": "medium",
        "thread_id": None,
        "reply_to": None,
        "recipients": ["bob"],
        "posted_at": datetime(2026, 11, 30, 21, 0, tzinfo=UTC),
    } | fields


@contextlib.asynccontextmanager
async def sqlite_store(path: Path) -> AsyncIterator[Database]:
    """An opened (migrated) SQLite store in ``path``, closed afterwards."""
    database = Database(f"sqlite+aiosqlite:///{path}")
    await database.open()
    try:
        yield database
    finally:
        await database.close()
