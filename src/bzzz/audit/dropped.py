"""Envelopes the projector dropped, on the trail: who sent what, where in the log, and why."""

from __future__ import annotations

from collections.abc import Callable

from bzzz.audit.records import Action, digest, stamp
from bzzz.audit.trail import AuditTrail
from bzzz.projector import Dropped

ACTION = "log:dropped"


def drop_recorder(trail: AuditTrail) -> Callable[[Dropped], None]:
    """A projector drop listener that records each dropped envelope on ``trail``."""

    def record(dropped: Dropped) -> None:
        params = {
            "seq": dropped.seq,
            "envelope_id": dropped.envelope_id,
            "type": dropped.type,
            "origin": dropped.origin,
            "reason": dropped.reason,
        }
        trail.record(
            Action(
                at=stamp(trail.clock.now()),
                # The node the envelope claims (its signature checked out when it is named).
                principal=f"node:{dropped.origin or 'unknown'}",
                session="log",
                action=f"{ACTION} {dropped.type or 'envelope'}"[:128],
                outcome=dropped.reason.upper(),
                digest=digest(params),
                target=dropped.envelope_id,
            )
        )

    return record
