"""A circuit breaker: after a run of failed attempts, stop calling the endpoint for a while."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from enum import StrEnum

from bzzz.errors import OpenAIError

logger = logging.getLogger(__name__)


class BreakerState(StrEnum):
    """Closed: calls flow. Open: calls refused. Half-open: one trial call decides."""

    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


class CircuitBreaker:
    """Counts failed attempts in a row; ``threshold`` of them open it for ``cooldown`` seconds."""

    def __init__(
        self, threshold: int, cooldown: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.threshold = threshold
        self.cooldown = cooldown
        self._clock = clock
        self.state = BreakerState.CLOSED
        self.failures = 0
        self._opened_at = 0.0
        self._trial_running = False

    def check(self) -> None:
        """Raise OPENAI_ERROR while open; let one trial through once the cooldown is over."""
        if self.state is BreakerState.CLOSED:
            return
        remaining = self._opened_at + self.cooldown - self._clock()
        if self.state is BreakerState.OPEN and remaining <= 0:
            self.state = BreakerState.HALF_OPEN
            self._trial_running = False
        if self.state is BreakerState.HALF_OPEN and not self._trial_running:
            self._trial_running = True
            return
        raise OpenAIError(
            f"the model endpoint failed {self.failures} times in a row; calls are paused "
            f"for {max(remaining, 0):.1f}s more",
            details={"circuit": str(self.state), "retry_after": round(max(remaining, 0), 3)},
        )

    def success(self) -> None:
        """A call went through: close."""
        if self.state is not BreakerState.CLOSED:
            logger.info("model endpoint answers again; circuit closed")
        self.state = BreakerState.CLOSED
        self.failures = 0
        self._trial_running = False

    def failure(self) -> None:
        """An attempt failed (429, 5xx, lost connection): count it, open at the threshold."""
        self.failures += 1
        self._trial_running = False
        if self.state is BreakerState.HALF_OPEN or self.failures >= self.threshold:
            if self.state is not BreakerState.OPEN:
                logger.warning(
                    "model endpoint failed %d times in a row; pausing calls for %.1fs",
                    self.failures,
                    self.cooldown,
                )
            self.state = BreakerState.OPEN
            self._opened_at = self._clock()
