"""Paged reads of the long lists (an inbox, tasks, activity, a thread's messages).

A page is at most ``limit`` entries next to a cursor: ``before`` an entry (older ones) or
``after`` it (newer ones), or the newest entries without a cursor. Every list is ordered by a
key that grows with time; the cursor is an entry's id, resolved to its key, so a page never
skips or repeats an entry when new ones arrive while a client reads.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from sqlalchemy import Select, select, tuple_
from sqlalchemy.ext.asyncio import AsyncSession

from bzzz import domain
from bzzz.errors import InvalidParameters
from bzzz.store.models import ActivityRow, InboxRow, MessageRow, TaskRow
from bzzz.store.rows import message_from_row, task_from_row

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Cursor:
    """Where a page starts: before or after the entry with this id (neither: the newest)."""

    before: str | None = None
    after: str | None = None


@dataclass(slots=True)
class Page(Generic[T]):
    """Entries newest first, and whether more remain past them in the direction read."""

    entries: list[T]
    ids: list[str]
    has_more: bool

    def info(self) -> dict[str, Any]:
        """What a client needs to read on: more remain? the ids to pass as before / after."""
        return {
            "has_more": self.has_more,
            "oldest": self.ids[-1] if self.ids else None,
            "newest": self.ids[0] if self.ids else None,
        }


def _unknown(name: str, value: str) -> InvalidParameters:
    return InvalidParameters(
        f"{name} '{value[:64]}' is not an entry of this list",
        details={"field": name},
    )


class PageReader:
    """Paged reads inside one session."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def _rows(
        self,
        query: Select[Any],
        key: Sequence[Any],
        at: tuple[Any, ...] | None,
        older: bool,
        limit: int,
    ) -> tuple[list[Any], bool]:
        """Rows next to ``at`` (older or newer), newest first, and whether more remain."""
        column = tuple_(*key) if len(key) > 1 else key[0]
        value = (tuple_(*at) if len(at) > 1 else at[0]) if at is not None else None
        if older:
            if value is not None:
                query = query.where(column < value)
            order = [k.desc() for k in key]
        else:
            query = query.where(column > value)
            order = [k.asc() for k in key]
        rows = list(await self.session.scalars(query.order_by(*order).limit(limit + 1)))
        has_more = len(rows) > limit
        rows = rows[:limit]
        return (rows if older else rows[::-1]), has_more

    @staticmethod
    def _direction(cursor: Cursor) -> tuple[str | None, bool]:
        if cursor.before is not None and cursor.after is not None:
            raise InvalidParameters(
                "give before or after, not both", details={"fields": ["before", "after"]}
            )
        return (cursor.after, False) if cursor.after is not None else (cursor.before, True)

    async def inbox(self, agent_id: str, limit: int, cursor: Cursor) -> Page[domain.Message]:
        """An agent's inbox, newest first."""
        ref, older = self._direction(cursor)
        at = None
        if ref is not None:
            posted = await self.session.scalar(
                select(InboxRow.posted_at).where(
                    InboxRow.agent_id == agent_id, InboxRow.message_id == ref
                )
            )
            if posted is None:
                raise _unknown("after" if not older else "before", ref)
            at = (posted, ref)
        query = (
            select(MessageRow)
            .join(InboxRow, InboxRow.message_id == MessageRow.id)
            .where(InboxRow.agent_id == agent_id)
        )
        rows, more = await self._rows(query, [InboxRow.posted_at, MessageRow.id], at, older, limit)
        return Page([message_from_row(r) for r in rows], [r.id for r in rows], more)

    async def tasks(self, agent_id: str, limit: int, cursor: Cursor) -> Page[domain.Task]:
        """An agent's tasks, newest first."""
        ref, older = self._direction(cursor)
        at = None
        if ref is not None:
            started = await self.session.scalar(
                select(TaskRow.start_time).where(TaskRow.agent_id == agent_id, TaskRow.id == ref)
            )
            if started is None:
                raise _unknown("after" if not older else "before", ref)
            at = (started, ref)
        query = select(TaskRow).where(TaskRow.agent_id == agent_id)
        rows, more = await self._rows(query, [TaskRow.start_time, TaskRow.id], at, older, limit)
        return Page([task_from_row(r) for r in rows], [r.id for r in rows], more)

    async def activity(self, agent_id: str, limit: int, cursor: Cursor) -> Page[domain.Activity]:
        """An agent's activity, newest first (ids are the entries' numbers, as text)."""
        ref, older = self._direction(cursor)
        at = None
        if ref is not None:
            if not ref.isdigit():
                raise _unknown("after" if not older else "before", ref)
            at = (int(ref),)
        query = select(ActivityRow).where(ActivityRow.agent_id == agent_id)
        rows, more = await self._rows(query, [ActivityRow.id], at, older, limit)
        entries = [domain.Activity(r.kind, r.summary, r.ref, r.at) for r in rows]
        return Page(entries, [str(r.id) for r in rows], more)

    async def thread_messages(
        self, thread_id: str, limit: int, cursor: Cursor
    ) -> Page[domain.Message]:
        """A thread's messages, newest first (message ids grow with time)."""
        ref, older = self._direction(cursor)
        at = None
        if ref is not None:
            found = await self.session.scalar(
                select(MessageRow.id).where(MessageRow.thread_id == thread_id, MessageRow.id == ref)
            )
            if found is None:
                raise _unknown("after" if not older else "before", ref)
            at = (ref,)
        query = select(MessageRow).where(MessageRow.thread_id == thread_id)
        rows, more = await self._rows(query, [MessageRow.id], at, older, limit)
        return Page([message_from_row(r) for r in rows], [r.id for r in rows], more)
