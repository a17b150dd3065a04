"""Time as the services see it: a Protocol so that tests drive time-based rules without waiting."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Protocol

from bzzz.domain import utcnow


class Clock(Protocol):
    """Tells the time (aware, UTC)."""

    def now(self) -> datetime:
        """Now."""
        ...


class SystemClock:
    """The wall clock."""

    def now(self) -> datetime:
        """Now, from the system."""
        return utcnow()


class ManualClock:
    """A clock that moves only when told to (tests, benchmarks)."""

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or utcnow()

    def now(self) -> datetime:
        """The time last set."""
        return self._now

    def advance(self, seconds: float) -> datetime:
        """Move forward by ``seconds``; returns the new time."""
        self._now += timedelta(seconds=seconds)
        return self._now
