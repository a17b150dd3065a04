"""Visible progress: a streaming task's partial text reaches its assigner, at most once a second.

The first piece is posted at once; later pieces wait until ``interval`` seconds have passed
since the last post (pieces in between are only gathered). A post that fails is logged and the
work goes on: progress is a courtesy, the final result is what counts.

A task's progress is its last ``task_progress`` post, so what stays true of the task once said
(the thread where it is worked on) is repeated in every later post: a partial text streamed
after the review opened must not erase where the review is.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from bzzz.errors import BzzzError

logger = logging.getLogger(__name__)

PARTIAL_CHARS = 4_000
# Fields of a post that stay true for the rest of the task.
LASTING = ("thread_id",)
Poster = Callable[[dict[str, Any]], Awaitable[None]]


class ProgressReporter:
    """Turns streamed pieces into ``task_progress`` contents, throttled."""

    def __init__(
        self,
        task_id: str,
        post: Poster,
        interval: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._task_id = task_id
        self._post = post
        self._interval = interval
        self._clock = clock
        self._last: float | None = None
        self._lasting: dict[str, Any] = {}
        self.text = ""
        self.posted = 0

    async def on_delta(self, piece: str) -> None:
        """Gather a streamed piece; post the text so far when the interval allows."""
        self.text += piece
        now = self._clock()
        if self._last is not None and now - self._last < self._interval:
            return
        await self.send({"status": "working", "partial_text": self.text[-PARTIAL_CHARS:]})

    def restart(self) -> None:
        """A new model call begins: its text replaces the last one's."""
        self.text = ""

    async def send(self, extra: dict[str, Any]) -> None:
        """Post one ``task_progress`` (the task id and ``extra``); the next waits its turn."""
        self._last = self._clock()
        self._lasting |= {k: extra[k] for k in LASTING if k in extra}
        content = {"task_id": self._task_id, "chars": len(self.text)} | self._lasting | extra
        try:
            await self._post(content)
            self.posted += 1
        except BzzzError as exc:
            logger.info("progress of task %s not posted: %s", self._task_id, exc.message)
