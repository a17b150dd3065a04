"""The one backoff formula: doubling from the initial delay, capped, optionally jittered."""

from __future__ import annotations

from bzzz.backoff import backoff


def test_delays_double_from_the_initial_one_up_to_the_cap() -> None:
    assert [backoff(n, 0.5, 5.0) for n in range(6)] == [0.5, 1.0, 2.0, 4.0, 5.0, 5.0]
    assert backoff(-3, 0.5, 5.0) == 0.5
    assert backoff(10_000, 0.5, 5.0) == 5.0


def test_jitter_stays_in_the_upper_half_of_the_delay() -> None:
    drawn = [backoff(3, 1.0, 60.0, jitter=True) for _ in range(200)]
    assert all(4.0 <= d <= 8.0 for d in drawn)
    assert len(set(drawn)) > 1
