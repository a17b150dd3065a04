"""Repeated warnings: the first is logged, the rest counted into one line per minute."""

from __future__ import annotations

import logging
from collections.abc import Callable

import pytest

from bzzz.logsummary import RepeatSummary


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Recorder(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@pytest.fixture
def setup() -> tuple[logging.Logger, Recorder, Clock, RepeatSummary, list[float]]:
    clock = Clock()
    handler = Recorder()
    scheduled: list[float] = []

    def schedule(delay: float, _action: Callable[[], None]) -> None:
        scheduled.append(delay)

    summary = RepeatSummary(handler, window=60.0, clock=clock, schedule=schedule)
    handler.addFilter(summary)
    logger = logging.getLogger("bzzz.test.logsummary")
    logger.handlers[:] = [handler]
    logger.propagate = False
    logger.setLevel(logging.DEBUG)
    return logger, handler, clock, summary, scheduled


def test_a_run_of_like_warnings_is_one_line_then_a_count(setup: tuple) -> None:
    logger, handler, clock, summary, scheduled = setup
    for seq in range(80):
        clock.now = seq * 0.1
        logger.warning("rejected envelope at seq %d: %s", seq, "untrusted")

    assert handler.lines == ["rejected envelope at seq 0: untrusted"]
    assert scheduled == [pytest.approx(60.0 - 0.1)]

    clock.now = 60.0
    summary.flush()

    assert handler.lines == [
        "rejected envelope at seq 0: untrusted",
        "rejected envelope at seq 79: untrusted (and 79 more like it in the last 60 s)",
    ]


def test_other_messages_and_lower_levels_pass_untouched(setup: tuple) -> None:
    logger, handler, _clock, _summary, _scheduled = setup
    logger.warning("rejected envelope at seq %d: %s", 1, "x")
    logger.warning("rejected the heartbeat of %s: %s", "node-a", "untrusted")
    logger.warning("rejected envelope at seq %d: %s", 2, "x")
    for _ in range(3):
        logger.debug("applied a batch")

    assert handler.lines == [
        "rejected envelope at seq 1: x",
        "rejected the heartbeat of node-a: untrusted",
        "applied a batch",
        "applied a batch",
        "applied a batch",
    ]


def test_a_failing_webhooks_retries_at_info_are_counted_too(setup: tuple) -> None:
    logger, handler, clock, summary, _scheduled = setup
    for attempt in range(10):
        logger.info("webhook delivery %d failed (%s); retry at %s", 4, "refused", attempt)
    clock.now = 60.0
    summary.flush()

    assert handler.lines == [
        "webhook delivery 4 failed (refused); retry at 0",
        "webhook delivery 4 failed (refused); retry at 9 (and 9 more like it in the last 60 s)",
    ]


def test_after_a_quiet_minute_the_next_warning_is_logged_in_full(setup: tuple) -> None:
    logger, handler, clock, summary, _scheduled = setup
    logger.warning("webhook %s failed", "a")
    clock.now = 61.0
    summary.flush()  # nothing was counted: the run is forgotten, no summary line
    logger.warning("webhook %s failed", "b")

    assert handler.lines == ["webhook a failed", "webhook b failed"]


def test_a_steady_stream_gives_one_line_per_minute(setup: tuple) -> None:
    logger, handler, clock, summary, _scheduled = setup
    for second in range(0, 180, 2):
        clock.now = float(second)
        if second and second % 60 == 0:
            summary.flush()
        logger.warning("rejected the heartbeat of %s: %s", "node-x", "untrusted")
    clock.now = 180.0
    summary.flush()

    assert len(handler.lines) == 4  # the first, then one count per minute
    # Every warning is accounted for: 1 logged + 29 + 30 + 30 = 90 in three minutes.
    assert [line.split("(and ")[-1] for line in handler.lines[1:]] == [
        "29 more like it in the last 60 s)",
        "30 more like it in the last 60 s)",
        "30 more like it in the last 60 s)",
    ]
