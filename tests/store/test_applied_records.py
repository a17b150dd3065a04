"""The record of an applied envelope keeps ids, codes and counts of its outcome, never content."""

from __future__ import annotations

import json

from bzzz.store.projection import recorded

DECISION = "We use PostgreSQL (canary-7c1)"
REASON = "refactoring the parser (canary-7c2)"


def test_a_consensus_outcome_is_recorded_without_the_decisions_text() -> None:
    outcome = {
        "ok": True,
        "delivered": ["bob"],
        "consensus": {
            "decision_message_id": "msg-01J",
            "decisions": [DECISION],
            "agreed_by": ["boss", "bob"],
            "confidence": 1.0,
            "type": "unanimous",
            "reached_at": "2026-12-06T08:00:00+00:00",
        },
    }
    kept = recorded(outcome)
    assert DECISION not in json.dumps(kept)
    assert kept["consensus"]["decision_message_id"] == "msg-01J"
    assert kept["consensus"]["agreed_by"] == ["boss", "bob"] and kept["delivered"] == ["bob"]
    assert outcome["consensus"]["decisions"] == [DECISION]  # the caller's outcome is untouched


def test_reservation_outcomes_are_recorded_without_paths_or_reason() -> None:
    held = {"id": "r-1", "agent_id": "a", "mode": "exclusive", "paths": ["src/x/**"]}
    made = {"ok": True, "reservation": held | {"reason": REASON}}
    renewed = {"ok": True, "renewed": [held | {"reason": REASON}]}
    conflict = {
        "ok": False,
        "reason": "conflict",
        "holder": held,
        "requested": "src/x/y.py",
        "overlaps": "src/x/**",
    }
    for outcome in (made, renewed, conflict):
        kept = json.dumps(recorded(outcome))
        assert REASON not in kept and "src/x" not in kept, kept
    assert recorded(made)["reservation"]["id"] == "r-1"
    assert recorded(renewed)["renewed"][0]["agent_id"] == "a"
    assert recorded(conflict)["reason"] == "conflict"  # a refusal's code stays
