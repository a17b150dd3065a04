"""The applier of ``agent.inbox_read``, and the reads of what an agent has not read yet.

An agent's read mark lives in its row's metadata (``inbox_read``): ``until``, a time at or
before which every message of its inbox is read, and ``ids``, the messages after ``until``
read one by one (a hook shows the newest unread few and marks those; older unread ones stay
unread). Each mark moves ``until`` past the messages read in a row, so ``ids`` stays short;
past ``MAX_READ_IDS`` the oldest ids are folded into ``until`` (their older unread
neighbours with them). Announcing the agent again keeps the mark
(``bzzz.store.agent_projection.KEPT_METADATA``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import Session

from bzzz import domain
from bzzz.network import subjects
from bzzz.network.envelope import Envelope
from bzzz.store.agent_projection import INBOX_READ
from bzzz.store.models import AgentRow, InboxRow, MessageRow
from bzzz.store.projection import (
    ID_LENGTH,
    NAME_LENGTH,
    Applied,
    Applier,
    ProjectionLimits,
    _strict_json,
    _text,
)
from bzzz.store.rows import message_from_row

INBOX_READ_TYPE = "agent.inbox_read"
# Messages one mark names at most; read ids a mark keeps past ``until`` at most.
MAX_MARK = 200
MAX_READ_IDS = 1000


def read_mark(metadata: dict[str, Any]) -> tuple[datetime | None, set[str]]:
    """An agent's read mark from its metadata: (until, ids read after it)."""
    mark = metadata.get(INBOX_READ)
    if not isinstance(mark, dict):
        return None, set()
    until = mark.get("until")
    ids = mark.get("ids")
    when = _parsed(until) if isinstance(until, str) else None
    return when, {i for i in ids if isinstance(i, str)} if isinstance(ids, list) else set()


def _parsed(stamp: str) -> datetime | None:
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return None


def _ids(value: Any) -> list[str]:
    if not isinstance(value, list) or not 1 <= len(value) <= MAX_MARK:
        raise TypeError(f"message_ids must be a list of 1 to {MAX_MARK} ids")
    return [_text(v, ID_LENGTH, "message_ids") for v in value]


def _after(agent_id: str, until: datetime | None) -> Any:
    query = select(InboxRow.message_id, InboxRow.posted_at).where(InboxRow.agent_id == agent_id)
    if until is not None:
        query = query.where(InboxRow.posted_at > until)
    return query


def apply_inbox_read(session: Session, env: Envelope, limits: ProjectionLimits) -> Applied:
    """Mark messages of an agent's inbox read, and move its mark past those read in a row."""
    p = env.payload
    agent_id = _text(p["agent_id"], NAME_LENGTH, "agent_id")
    named = _ids(p["message_ids"])
    row = session.get(AgentRow, agent_id)
    # Only on the agent's project's subject: a node serving another project marks nothing.
    if row is None or not subjects.on_project(env.network, env.subject, row.project):
        return Applied({"ok": False, "reason": "no such agent"})
    until, ids = read_mark(row.metadata_ or {})
    found = session.execute(_after(agent_id, until).where(InboxRow.message_id.in_(named)))
    marked = [str(message_id) for message_id, _ in found]
    ids.update(marked)
    # Oldest first: ``until`` moves over every message read in a row.
    pending = session.execute(
        _after(agent_id, until)
        .order_by(InboxRow.posted_at, InboxRow.message_id)
        .limit(len(ids) + 1)
    )
    for message_id, posted_at in pending:
        if message_id not in ids:
            break
        until = posted_at
        ids.discard(message_id)
    if len(ids) > MAX_READ_IDS:
        kept = session.execute(
            _after(agent_id, until)
            .where(InboxRow.message_id.in_(ids))
            .order_by(InboxRow.posted_at.desc(), InboxRow.message_id.desc())
            .limit(MAX_READ_IDS + 1)
        ).all()
        until = kept[-1][1]
        ids = {str(message_id) for message_id, _ in kept[:-1]}
    mark = {"until": domain.iso(until) if until else None, "ids": sorted(ids)}
    row.metadata_ = dict(row.metadata_ or {}) | {INBOX_READ: mark}
    return Applied({"ok": True, "marked": marked})


INBOX_APPLIERS: dict[str, Applier] = {INBOX_READ_TYPE: _strict_json(apply_inbox_read)}


async def unread_page(
    session: AsyncSession, agent_id: str, metadata: dict[str, Any], limit: int, unread: bool
) -> tuple[list[dict[str, Any]], int]:
    """The newest ``limit`` messages of an agent's inbox (only unread ones if ``unread``),
    each with ``read``; and how many unread ones it holds in all."""
    until, ids = read_mark(metadata)
    query = (
        select(MessageRow)
        .join(InboxRow, InboxRow.message_id == MessageRow.id)
        .where(InboxRow.agent_id == agent_id)
    )
    unread_only = query
    if until is not None:
        unread_only = unread_only.where(InboxRow.posted_at > until)
    if ids:
        unread_only = unread_only.where(MessageRow.id.not_in(ids))
    shown = unread_only if unread else query
    order = (InboxRow.posted_at.desc(), MessageRow.id.desc())
    rows = (await session.scalars(shown.order_by(*order).limit(limit))).all()
    counted = select(func.count()).select_from(unread_only.subquery())
    total = int((await session.scalar(counted)) or 0)
    messages = []
    for row in rows:
        message = message_from_row(row)
        read = (until is not None and message.posted_at <= until) or message.id in ids
        messages.append((message, read))
    return [_shown(m, read) for m, read in messages], total


def _shown(message: domain.Message, read: bool) -> dict[str, Any]:
    from bzzz.agents.views import message_info

    return message_info(message) | {"read": read}
