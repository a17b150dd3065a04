"""Repeated log lines logged once, then counted: one line per minute says how many followed.

A node that rejects a stream of forged envelopes, hears an untrusted node's heartbeats or keeps
failing a webhook would otherwise log one WARNING per event. Warnings are alike when they come
from the same logger with the same message template (``"rejected envelope at seq %d: %s"``),
whatever the arguments. The first one of a run is logged as it is; the others within the window
are counted, and when the window ends one line reports the last of them and the count.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

WINDOW = 60.0
SUMMARY = "bzzz_summary"


@dataclass(slots=True)
class _Run:
    start: float
    count: int = 0
    last: logging.LogRecord | None = None


class RepeatSummary(logging.Filter):
    """A handler filter that passes the first of like lines (INFO and up) and counts the rest."""

    def __init__(
        self,
        handler: logging.Handler,
        window: float = WINDOW,
        clock: Callable[[], float] = time.monotonic,
        schedule: Callable[[float, Callable[[], None]], None] | None = None,
        level: int = logging.INFO,
    ) -> None:
        super().__init__()
        # INFO too: a failing webhook's retries are INFO lines, as many as the warnings.
        self._level = level
        self._handler = handler
        self._window = window
        self._clock = clock
        self._schedule = schedule or _timer
        self._runs: dict[tuple[str, object], _Run] = {}
        self._lock = threading.Lock()
        self._armed = False

    def filter(self, record: logging.LogRecord) -> bool:
        """True to log the record; False when it is counted into its run's summary."""
        if record.levelno < self._level or getattr(record, SUMMARY, False):
            return True
        key = (record.name, record.msg)
        now = self._clock()
        with self._lock:
            run = self._runs.get(key)
            if run is None or now - run.start >= self._window:
                ended = run
                self._runs[key] = _Run(start=now)
            else:
                run.count += 1
                run.last = record
                self._arm(self._window - (now - run.start))
                return False
        if ended is not None:
            self._report(ended)
        return True

    def flush(self) -> None:
        """Report every run whose window has ended; forget the runs that went quiet."""
        now = self._clock()
        due = []
        with self._lock:
            self._armed = False
            for key, run in list(self._runs.items()):
                if now - run.start < self._window:
                    continue
                if run.count:
                    due.append(run)
                    self._runs[key] = _Run(start=now)
                else:
                    del self._runs[key]
            if any(run.count for run in self._runs.values()):
                self._arm(self._window)
        for run in due:
            self._report(run)

    def _arm(self, delay: float) -> None:
        if not self._armed:
            self._armed = True
            self._schedule(max(delay, 0.0), self.flush)

    def _report(self, run: _Run) -> None:
        if not run.count or run.last is None:
            return
        last = run.last
        summary = logging.makeLogRecord(last.__dict__)
        summary.msg = "%s (and %d more like it in the last %d s)"
        summary.args = (last.getMessage(), run.count, round(self._window))
        setattr(summary, SUMMARY, True)
        self._handler.handle(summary)


def _timer(delay: float, action: Callable[[], None]) -> None:
    timer = threading.Timer(delay, action)
    timer.daemon = True  # a summary due at exit is not worth holding the process for
    timer.start()


def install(handler: logging.Handler) -> RepeatSummary:
    """Summarize repeated warnings on ``handler``."""
    summary = RepeatSummary(handler)
    handler.addFilter(summary)
    return summary
