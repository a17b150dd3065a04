"""Path reservations (``[reservations]``): when their holders hear they are about to end."""

from __future__ import annotations

from pydantic import Field

from bzzz.config.base import _Section


class ReservationSettings(_Section):
    """Path reservations on this node."""

    expiring_notice: float = Field(
        60.0,
        ge=0,
        le=3600,
        description=(
            "seconds before a reservation's end its holder gets a reservation_expiring event "
            "(0: none)"
        ),
    )
    sweep_seconds: float = Field(
        30.0,
        gt=0,
        le=3600,
        description="how often the node looks for expired and soon-ending reservations",
    )
