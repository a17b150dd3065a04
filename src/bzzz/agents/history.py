"""A thread as bzzz_get shows it, from the live store or as it stood at a point of the log.

``thread_view`` shapes a thread read from a store; ``thread_then`` reads it from the scratch
store a ``ThreadHistory`` (``conversations/replay.py``, given by the node) builds from the log,
so the answer ``as_of`` has the shape of today's answer, plus where the replay stopped.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from typing import Any, Protocol

from sqlalchemy.ext.asyncio import AsyncSession

from bzzz import domain
from bzzz.agents.views import thread_info
from bzzz.domain import iso
from bzzz.errors import InvalidParameters, ThreadNotFound
from bzzz.schemas import GetInput
from bzzz.store.pages import Cursor, PageReader
from bzzz.store.repository import Repository


class ReplayPoint(Protocol):
    """Where a replay stopped."""

    @property
    def seq(self) -> int:
        """The last log sequence applied."""
        ...

    @property
    def time(self) -> str:
        """The time of the thread's last envelope applied."""
        ...


class Replayed(Protocol):
    """One envelope of a thread as the log holds it."""

    def to_json(self) -> dict[str, Any]:
        """Sequence, time, type, origin, signer, whether it verifies, stand-in."""
        ...


class ThreadHistory(Protocol):
    """Reads one thread's envelopes back from the log; builds the thread as it stood."""

    async def entries(self, thread_id: str) -> Sequence[Replayed]:
        """The thread's envelopes in log order, each verified again."""
        ...

    def thread_as_of(
        self, thread_id: str, as_of: int | datetime
    ) -> AbstractAsyncContextManager[tuple[AsyncSession, ReplayPoint] | None]:
        """The store and where the replay stopped; None when the thread was not there yet."""
        ...


ThreadView = Callable[[Repository, domain.Thread, GetInput], Awaitable[dict[str, Any]]]


async def thread_view(repo: Repository, thread: domain.Thread, params: GetInput) -> dict[str, Any]:
    """A thread with a page of its messages (oldest first) and their stances."""
    page = await PageReader(repo.session).thread_messages(
        thread.id, params.max_history, Cursor(params.before, params.after)
    )
    messages = page.entries[::-1]  # oldest first, as a conversation reads
    info = thread_info(thread, messages, await repo.reactions(thread.id, page.ids))
    return {"thread": info, "last_updated": info["last_activity"], "page": page.info()}


def _requested(as_of: int | datetime) -> int | str:
    return as_of if isinstance(as_of, int) else iso(as_of) or ""


async def thread_then(
    history: ThreadHistory | None, thread_id: str, params: GetInput, view: ThreadView
) -> dict[str, Any]:
    """The thread as it stood at ``params.as_of`` (the caller may read the thread today)."""
    assert params.as_of is not None
    if history is None:
        raise InvalidParameters("this node does not replay threads (as_of)")
    async with history.thread_as_of(thread_id, params.as_of) as replayed:
        thread = None
        if replayed is not None:
            session, point = replayed
            repo = Repository(session)
            thread = await repo.thread(thread_id)
        if replayed is None or thread is None:
            raise ThreadNotFound(
                f"thread '{thread_id}' did not exist at {_requested(params.as_of)}",
                details={"thread_id": thread_id, "as_of": _requested(params.as_of)},
            )
        content = await view(repo, thread, params)
    content["as_of"] = {
        "requested": _requested(params.as_of),
        "sequence": point.seq,
        "time": point.time,
    }
    return content
