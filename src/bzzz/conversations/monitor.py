"""The thread monitor: a periodic sweep owned by the node's lifecycle.

Each sweep closes idle threads, evaluates the escalation rules on every watched thread, generates
SLURP events a consensus is still owed, carries out due escalation actions (retries included),
submits due SLURP events and pages the rota steps that are due (``conversations.paging``).
Between sweeps it sleeps ``escalation.monitor_interval`` seconds, or less when a new escalation
or consensus wakes it, or when the pager's next step or retry falls due (then only actions,
SLURP submissions and pages run).
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass

from bzzz import domain
from bzzz.conversations.consensus import ConsensusService
from bzzz.conversations.escalation import EscalationService
from bzzz.conversations.lifecycle import ThreadLifecycle
from bzzz.conversations.paging import Pager
from bzzz.errors import BzzzError

logger = logging.getLogger(__name__)


@dataclass(slots=True)
class SweepReport:
    """What one sweep did, and how long it took."""

    closed: int
    fired: int
    actions: int
    slurp: int
    seconds: float


class ThreadMonitor:
    """Runs sweeps until stopped."""

    def __init__(
        self,
        lifecycle: ThreadLifecycle,
        escalations: EscalationService,
        consensus: ConsensusService,
        interval: float,
        wakeup: asyncio.Event,
        pager: Pager | None = None,
    ) -> None:
        self._pager = pager
        # When the pager's next step or retry is due (monotonic): the monitor wakes for it.
        self._page_due: float | None = None
        self._lifecycle = lifecycle
        self._escalations = escalations
        self._consensus = consensus
        self._interval = interval
        self._wakeup = wakeup
        self._stopping = False
        self.sweeps = 0

    async def sweep(self) -> SweepReport:
        """One full round: idle threads, rules, actions, SLURP submissions."""
        started = time.perf_counter()
        closed = await self._lifecycle.close_idle()
        fired = await self._escalations.check_all()
        await self._consensus.generate_missing()
        actions, slurp = await self.follow_up()
        self.sweeps += 1
        return SweepReport(len(closed), len(fired), actions, slurp, time.perf_counter() - started)

    async def follow_up(self) -> tuple[int, int]:
        """Due escalation actions, pages and SLURP submissions only."""
        actions = await self._escalations.run_actions()
        slurp = await self._consensus.submit_due()
        if self._pager is not None:
            due = await self._pager.run_due()
            wait = None if due is None else (due - domain.utcnow()).total_seconds()
            self._page_due = None if wait is None else time.monotonic() + max(0.2, wait)
        return actions, slurp

    def stop(self) -> None:
        """Finish the current round and leave run()."""
        self._stopping = True
        self._wakeup.set()

    async def run(self) -> None:
        """Sweep every interval; follow up at once when woken."""
        next_sweep = time.monotonic()
        while not self._stopping:
            self._wakeup.clear()
            full = time.monotonic() >= next_sweep
            self._page_due = None
            try:
                if full:
                    await self.sweep()
                    next_sweep = time.monotonic() + self._interval
                else:
                    await self.follow_up()
            except BzzzError as exc:
                # The log or the database is away for now; the next round tries again.
                logger.warning("thread monitor round failed: %s", exc.message)
            await self._wait(min(next_sweep, self._page_due or next_sweep))

    async def _wait(self, until: float) -> None:
        if self._stopping:
            return
        try:
            async with asyncio.timeout(max(0.0, until - time.monotonic())):
                await self._wakeup.wait()
        except TimeoutError:
            pass
