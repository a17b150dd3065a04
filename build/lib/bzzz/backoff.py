"""Exponential backoff, the one formula every retry loop of the node uses."""

from __future__ import annotations

import random


def backoff(attempt: int, initial: float, maximum: float, *, jitter: bool = False) -> float:
    """Seconds before retry number ``attempt`` (0 = the first retry): initial·2^attempt, capped.

    With ``jitter`` the delay is drawn from its upper half, so many clients hit by one outage do
    not come back at the same instant.
    """
    delay = min(initial * float(2 ** min(max(attempt, 0), 30)), maximum)
    return delay * random.uniform(0.5, 1.0) if jitter else delay
