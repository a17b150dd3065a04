"""A replaying node applies the stand-ins of purged envelopes at their original sequences.

The log's purges leave gaps in its sequence numbers. When the projector meets a gap it has not
seen covered yet, it reads the network's ``retention.restated`` envelopes (each signed by the
node that purged, and opened like any envelope) and applies the stand-ins that fall in the gap
in their original order, so the state it reaches is the state of the nodes that applied the
originals. Stand-ins are read only when a gap is met, and only those past what the store has
applied are kept: a node that is up to date holds none.

It lives beside the log, not in ``retention/``: the projector reads it, and the retention
service (which writes the stand-ins) only names their envelope type and kind from here.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Sequence

from pydantic import ValidationError

from bzzz.backoff import backoff
from bzzz.errors import NetworkError
from bzzz.network import admission
from bzzz.network.admission import Admission
from bzzz.network.base import Bus, BusMessage
from bzzz.network.envelope import Envelope, EnvelopeRejected, open_envelope
from bzzz.network.sealing import Keyring

logger = logging.getLogger(__name__)

KIND = "tomb"
TYPE = "retention.restated"
# A batch whose gaps the network cannot account for yet is read again (bzzz.backoff).
RETRY = 0.5
RETRY_MAX = 10.0


class StandIns:
    """The stand-ins a node still has to apply, by original sequence."""

    def __init__(
        self,
        bus: Bus,
        network: str,
        trusted: frozenset[str] | None,
        keyring: Keyring | None = None,
        admitted: Admission | None = None,
        *,
        filtered: bool = False,
        counters: Counter[str] | None = None,
    ) -> None:
        self._bus = bus
        # Where the reads made again are counted (the projector's: ``stand_ins_retried``).
        self._counters: Counter[str] = Counter() if counters is None else counters
        # A node serving named projects meets gaps wherever other projects' envelopes lie:
        # it reads the holders again only when the log holds one it has not read.
        self._filtered = filtered
        self._newest_holder = 0
        # The holders are sealed like any content envelope: opened with the network's keys.
        self._keyring = keyring
        self._network = network
        self._trusted = trusted
        # Holders count only from nodes admitted where the log holds them (a forged holder
        # would put envelopes of its choosing in the purged places).
        self._admission = admitted or Admission()
        self._by_seq: dict[int, Envelope] = {}
        # Every purge below this sequence was re-stated before it happened, so what was read
        # at that point covers every gap below it.
        self._horizon = 0
        self.loaded = 0

    async def fill(
        self, applied: int, messages: Sequence[BusMessage]
    ) -> list[tuple[Envelope, int]]:
        """The stand-ins for the gaps of a batch that follows sequence ``applied``."""
        gaps = _gaps(applied, messages)
        if not gaps:
            return []
        if max(high for _, high in gaps) > self._horizon:
            await self._read_holders(applied)
        found: list[tuple[Envelope, int]] = []
        for low, high in gaps:
            for seq in range(low, high + 1):
                envelope = self._by_seq.pop(seq, None)
                if envelope is not None:
                    found.append((envelope, seq))
        return found

    async def _read_holders(self, applied: int) -> None:
        """Read the holders again if the log may hold new ones, the network asked until it
        answers: a node cannot apply past a gap it cannot account for, and must not stop
        consuming for a network slow for a while (a saturated server that did not answer in
        time), so a NetworkError is waited out, the node staying where it is."""
        attempt = 0
        while True:
            try:
                if await self._holders_changed():
                    await self._load(applied)
                return
            except NetworkError as exc:
                self._counters["stand_ins_retried"] += 1
                delay = backoff(attempt, RETRY, RETRY_MAX)
                logger.warning("%s; reading the log's gaps again in %.1f s", exc.message, delay)
                await asyncio.sleep(delay)
                attempt += 1

    async def _holders_changed(self) -> bool:
        """Whether holders may have been added since the last read (always, unfiltered).

        Every purge is re-stated before it happens: when the newest holder is one already
        read, no gap past the horizon is a purged envelope's.
        """
        if not self._filtered:
            return True
        newest = await self._bus.last_sequence(f"bzzz.{self._network}.{KIND}.>")
        return newest > self._newest_holder

    async def _load(self, applied: int) -> None:
        # Taken before the read: a holder stored meanwhile is newer and read next time. Kept
        # only once everything is read: a read the network did not answer is made again.
        newest_holder = self._newest_holder
        if self._filtered:
            newest_holder = await self._bus.last_sequence(f"bzzz.{self._network}.{KIND}.>")
        horizon = await self._bus.last_sequence()
        read = [*await self._bus.read_kind(admission.KIND), *await self._bus.read_kind(KIND)]
        self._newest_holder, self._horizon = newest_holder, horizon
        # The admitted set is replayed beside the holders, so each is judged by the set of
        # its own place in the log.
        state = self._admission.fresh()
        for msg in sorted(read, key=lambda m: m.seq):
            try:
                holder = open_envelope(
                    msg.data, self._network, self._trusted, keyring=self._keyring
                )
            except EnvelopeRejected as exc:
                logger.warning("ignored restated envelopes at seq %d: %s", msg.seq, exc.reason)
                continue
            if state.check(holder) is not None:
                if holder.type not in admission.TYPES:
                    logger.warning("ignored restated envelopes at seq %d: not_admitted", msg.seq)
                continue
            if holder.type in admission.TYPES:
                state.step(holder)
            elif holder.sealed:
                logger.warning("cannot open restated envelopes at seq %d: no key", msg.seq)
            elif holder.type == TYPE:
                self._take(holder, applied)

    def _take(self, holder: Envelope, applied: int) -> None:
        entries = holder.payload.get("entries")
        for entry in entries if isinstance(entries, list) else []:
            seq = entry.get("seq") if isinstance(entry, dict) else None
            if not isinstance(seq, int) or seq <= applied or seq in self._by_seq:
                continue
            try:
                envelope = Envelope.model_validate(entry["envelope"])
            except (ValidationError, KeyError, TypeError):
                logger.warning("a restated envelope for seq %d is malformed", seq)
                continue
            if envelope.network == self._network:
                self._by_seq[seq] = envelope
                self.loaded += 1


def _gaps(applied: int, messages: Sequence[BusMessage]) -> list[tuple[int, int]]:
    """The missing sequence ranges (inclusive) before and between a batch's messages."""
    gaps = []
    previous = applied
    for msg in messages:
        if msg.seq > previous + 1:
            gaps.append((previous + 1, msg.seq - 1))
        previous = max(previous, msg.seq)
    return gaps
