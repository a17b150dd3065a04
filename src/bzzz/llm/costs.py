"""The cost ledger: limits checked before a call is sent, every call booked on the event log.

Limits are this node's (its settings, its API key): a call is refused when what the node spent
today or this month, plus what its calls in flight may still cost, plus the worst case of the
new call would pass a limit. Booked calls travel the log as ``cost.recorded`` envelopes, so the
ledger (and the CostUsage read from it) is the same on every node.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from ulid import ULID

from bzzz import domain
from bzzz.config import CostSettings
from bzzz.errors import CostLimitExceeded, NetworkError
from bzzz.eventlog import EventLog
from bzzz.llm.pricing import NANOS_PER_USD, PriceTable
from bzzz.llm.types import TokenUsage
from bzzz.store.database import Database
from bzzz.store.llm_repository import LLMRepository, ModelSpend

logger = logging.getLogger(__name__)

_ids = itertools.count(1)
# Pauses between attempts to book a paid call: ~5 s, plus each attempt's own publish timeout.
BOOKING_DELAYS = (0.1, 0.4, 1.5, 3.0)


def to_nanos(usd: float) -> int:
    """USD → nano-USD."""
    return round(usd * NANOS_PER_USD)


def periods(at: datetime) -> tuple[str, str]:
    """The ledger's day (YYYY-MM-DD) and month (YYYY-MM) of a moment, in UTC."""
    at = at.astimezone(UTC)
    return at.strftime("%Y-%m-%d"), at.strftime("%Y-%m")


@dataclass(frozen=True, slots=True)
class _Booking:
    """A paid call's ``cost.recorded`` payload and the moment it was paid (the node's clock)."""

    at: datetime
    payload: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Reservation:
    """A call's worst-case cost, held against the limits while it is in flight."""

    id: int
    model: str
    estimate_nanos: int


def cost_usage(date: str, spends: list[ModelSpend]) -> dict[str, Any]:
    """The seed's CostUsage for one day or month."""
    prompt = sum(s.prompt_tokens for s in spends)
    completion = sum(s.completion_tokens for s in spends)
    nanos = sum(s.cost_nanos for s in spends)
    return {
        "date": date,
        "totalCost": nanos / NANOS_PER_USD,
        "costNanos": nanos,
        "apiCalls": sum(s.calls for s in spends),
        "tokens": {"prompt": prompt, "completion": completion, "total": prompt + completion},
        "models": {
            s.model: {
                "calls": s.calls,
                "cost": s.cost_nanos / NANOS_PER_USD,
                "tokens": s.prompt_tokens + s.completion_tokens,
            }
            for s in spends
        },
    }


class CostTracker:
    """Checks limits before calls, books calls after them, reads usage back from the ledger."""

    def __init__(
        self,
        db: Database,
        log: EventLog,
        settings: CostSettings,
        prices: PriceTable,
        clock: Callable[[], datetime] = domain.utcnow,
    ) -> None:
        self._db = db
        self._log = log
        self.settings = settings
        self.prices = prices
        self._clock = clock
        self._lock = asyncio.Lock()
        self._in_flight: dict[int, int] = {}
        self._spent_key: tuple[str, str] | None = None
        self._spent = [0, 0]
        # Calls the model answered but the log has not booked yet (it was unreachable).
        self._unbooked: list[_Booking] = []
        self.booking_delays: tuple[float, ...] = BOOKING_DELAYS

    @property
    def limits_nanos(self) -> dict[str, Any]:
        """The limits as the ledger's envelopes carry them."""
        return {
            "day": to_nanos(self.settings.daily_limit),
            "month": to_nanos(self.settings.monthly_limit),
            "warning_threshold": self.settings.warning_threshold,
        }

    def estimate(self, model: str, prompt_tokens: int, max_tokens: int) -> int:
        """The worst case of a call: its prompt plus a full-length answer."""
        return self.prices.cost_nanos(model, prompt_tokens, max_tokens)

    async def spent(self) -> tuple[int, int]:
        """What this node spent today and this month (nano-USD)."""
        day, month = periods(self._clock())
        if self._spent_key != (day, month):
            # Read once per day: only this process books calls for this node's id, so the
            # running total kept by record() stays exact after that.
            async with self._db.session() as session:
                totals = await LLMRepository(session).spent(self._log.node_id, day, month)
            self._spent_key, self._spent = (day, month), list(totals)
        return self._spent[0], self._spent[1]

    async def reserve(self, model: str, estimate_nanos: int, agent_id: str | None) -> Reservation:
        """Hold a call's worst case against the limits, or refuse it (COST_LIMIT_EXCEEDED)."""
        async with self._lock:
            day, month = await self.spent()
            held = sum(self._in_flight.values())
            for period, spent, limit in (
                ("day", day, self.limits_nanos["day"]),
                ("month", month, self.limits_nanos["month"]),
            ):
                if limit and spent + held + estimate_nanos > limit:
                    await self._refuse(period, spent + held, limit, model, estimate_nanos, agent_id)
            reservation = Reservation(next(_ids), model, estimate_nanos)
            self._in_flight[reservation.id] = estimate_nanos
            return reservation

    async def _refuse(
        self,
        period: str,
        spent: int,
        limit: int,
        model: str,
        estimate: int,
        agent_id: str | None,
    ) -> None:
        name = "daily" if period == "day" else "monthly"
        logger.warning(
            "refused a %s call: the %s limit of $%.4f would be passed", model, name, limit / 1e9
        )
        await self._log.emit(
            "cost.refused",
            "cost",
            self._log.node_id,
            {
                "period": period,
                "spent_nanos": spent,
                "limit_nanos": limit,
                "estimate_nanos": estimate,
                "model": model,
                "agent_id": agent_id,
            },
        )
        raise CostLimitExceeded(
            f"the {name} cost limit (${limit / NANOS_PER_USD:.4f}) would be passed by this call",
            details={
                "period": period,
                "limit_usd": limit / NANOS_PER_USD,
                "spent_usd": spent / NANOS_PER_USD,
                "estimate_usd": estimate / NANOS_PER_USD,
            },
        )

    def release(self, reservation: Reservation) -> None:
        """The call is over (booked or failed): stop holding its worst case."""
        self._in_flight.pop(reservation.id, None)

    async def record(
        self, model: str, usage: TokenUsage, agent_id: str | None, purpose: str
    ) -> int:
        """Book a call on the log; returns its cost (nano-USD).

        The model has answered, so the call is paid whatever the log does: it counts against
        this node's limits at once, and a booking the network does not take is retried with
        the same call id (the ledger keeps one row per call id) rather than given up.
        """
        cost = self.prices.cost_nanos(model, usage.prompt_tokens, usage.completion_tokens)
        booking = _Booking(
            self._log.clock.now(),
            {
                "call_id": f"call-{ULID()}",
                "agent_id": agent_id,
                "purpose": purpose[:64],
                "model": model[:128],
                "prompt_tokens": usage.prompt_tokens,
                "completion_tokens": usage.completion_tokens,
                "cost_nanos": cost,
                "limits": self.limits_nanos,
            },
        )
        try:
            await self._book_unbooked()
            await self._book(booking)
        finally:
            self._count(cost)
        return cost

    def _count(self, cost: int) -> None:
        if self._spent_key is not None and self._spent_key == periods(self._clock()):
            self._spent[0] += cost
            self._spent[1] += cost

    async def _emit(self, booking: _Booking) -> None:
        # Stamped with the call's time: a booking that took retries lands on the call's day.
        await self._log.emit(
            "cost.recorded", "cost", self._log.node_id, booking.payload, now=booking.at
        )

    async def _book(self, booking: _Booking) -> None:
        """Emit a booking, retrying for a bounded time; keep it for later when the log is down."""
        for delay in (*self.booking_delays, None):
            try:
                await self._emit(booking)
                return
            except NetworkError as exc:
                if delay is None:
                    logger.error(
                        "call %s ($%.6f) is not on the ledger yet (%s); it is counted against "
                        "this node's limits and booked with the next call",
                        booking.payload["call_id"],
                        booking.payload["cost_nanos"] / NANOS_PER_USD,
                        exc.message,
                    )
                    self._unbooked.append(booking)
                    return
                logger.warning(
                    "booking call %s failed (%s); retrying", booking.payload["call_id"], exc.message
                )
                await asyncio.sleep(delay)

    async def _book_unbooked(self) -> None:
        """Book what earlier calls could not, in order, until the log refuses again."""
        while self._unbooked:
            # Taken off first: two calls booking at once must not book (or drop) one twice.
            booking = self._unbooked.pop(0)
            try:
                await self._emit(booking)
            except NetworkError:
                self._unbooked.insert(0, booking)
                return

    async def history(self, days: int, *, node_only: bool = True) -> list[dict[str, Any]]:
        """The spend of each of the last ``days`` days (today included), oldest first."""
        today = self._clock().astimezone(UTC).date()
        first = today - timedelta(days=days - 1)
        node_id = self._log.node_id if node_only else None
        async with self._db.session() as session:
            totals = await LLMRepository(session).daily_totals(first.isoformat(), node_id)
        spent = {day: (calls, nanos) for day, calls, nanos in totals}
        shown = []
        for n in range(days):
            day = (first + timedelta(days=n)).isoformat()
            calls, nanos = spent.get(day, (0, 0))
            shown.append({"date": day, "apiCalls": calls, "totalCost": nanos / NANOS_PER_USD})
        return shown

    async def usage(self, *, node_only: bool = True) -> dict[str, Any]:
        """Today's and this month's CostUsage with the limits (this node's, or the network's)."""
        day, month = periods(self._clock())
        node_id = self._log.node_id if node_only else None
        async with self._db.session() as session:
            repo = LLMRepository(session)
            daily = cost_usage(day, await repo.usage("day", day, node_id))
            monthly = cost_usage(month, await repo.usage("month", month, node_id))
        return {
            "node_id": self._log.node_id,
            "scope": "node" if node_only else "network",
            "daily": daily,
            "monthly": monthly,
            "limits": {
                "dailyLimit": self.settings.daily_limit,
                "monthlyLimit": self.settings.monthly_limit,
                "warningThreshold": self.settings.warning_threshold,
            },
        }
