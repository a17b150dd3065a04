"""The projector: consumes the network's log, verifies each envelope, applies it to the store.

The origin of an envelope waits here (``submit``) until its own projection applied it, so a
client always reads its own writes. A node serving named projects consumes only the
network-wide subjects and its projects' (``network.subjects.consumer_filters``), and refuses
to apply any other project's envelope that reaches it all the same (counted ``not_served``).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections import Counter
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any

from bzzz import domain
from bzzz.errors import NetworkError
from bzzz.network import admission, subjects
from bzzz.network.admission import Admission
from bzzz.network.base import Bus, BusMessage, Stored
from bzzz.network.envelope import (
    Envelope,
    EnvelopeRejected,
    open_envelope,
    open_own,
    sealed_key_id,
    unseal,
)
from bzzz.network.restate import StandIns
from bzzz.network.sealing import (
    KEY_ADDED,
    KeyMissing,
    Keyring,
    SealError,
    key_from_payload,
    missing_key_message,
)
from bzzz.projects import ALL_PROJECTS, ProjectSet
from bzzz.store.batch import BatchContext, BatchResult, apply_batch, prepare
from bzzz.store.database import Database, StoreError, WriterBusy
from bzzz.store.directory import AgentDirectory
from bzzz.store.node_projection import admission_outcomes
from bzzz.store.projection import Outcome, ProjectionLimits
from bzzz.store.repository import Repository
from bzzz.store.subscriptions import SubscriptionIndex

logger = logging.getLogger(__name__)

# From this many envelopes a batch is verified on two threads; below, a thread hop costs more.
PARALLEL_VERIFY_AT = 64
# Batches up to this size are written on the event loop when the database thread is idle:
# one envelope's transaction costs less than the two thread hops around it.
SMALL_BATCH = 8
# How long an envelope applied while the network stores it keeps its transaction open for
# the network's answer; past that it is rolled back and the consumer applies the envelope.
AHEAD_WAIT = 0.05

_Verified = tuple[list[tuple[Envelope, int]], Sequence[BusMessage]]
EventListener = Callable[[Sequence[tuple[domain.Subscription, domain.Event]]], Awaitable[None]]
# Sees every envelope's outcome after its batch committed (hosted agents find their tasks here).
OutcomeListener = Callable[[dict[str, Outcome]], None]


@dataclass(frozen=True, slots=True)
class Dropped:
    """An envelope the projector did not apply: where, why, and what it claimed to be."""

    seq: int
    reason: str  # bad_signature, untrusted, not_admitted, …
    envelope_id: str | None
    type: str | None = None
    origin: str | None = None


# Sees each dropped envelope (the node audits them).
DropListener = Callable[[Dropped], None]
# The agents a commit changed, and the envelopes it applied.
AgentListener = Callable[[list[domain.Agent], list[Envelope]], None]


class _NotNext(Exception):
    """The network did not store an envelope as the log's next one (or did not answer)."""


def _acknowledged_at(publishing: asyncio.Future[Stored], seq: int) -> bool:
    """The log stored these very bytes at ``seq`` (a duplicate's entry may be others; a
    project partition's sequence is not the log's)."""
    if not publishing.done() or publishing.cancelled() or publishing.exception() is not None:
        return False
    stored = publishing.result()
    return stored.seq == seq and not stored.duplicate and stored.stream is None


class Projector:
    """Applies the log to the store and answers origins waiting for their envelopes."""

    def __init__(
        self,
        db: Database,
        bus: Bus,
        *,
        network: str,
        node_id: str,
        limits: ProjectionLimits,
        apply_timeout: float = 15.0,
        trusted: frozenset[str] | None = None,
        admitted: Admission | None = None,
        keyring: Keyring | None = None,
        projects: ProjectSet = ALL_PROJECTS,
    ) -> None:
        self._db = db
        # The projects this node serves: its consumer's filter, and what it applies.
        self.projects = projects
        self._tokens = subjects.served_tokens(projects)
        # Opens sealed payloads; learns rotated keys from the log (keys.added), in log order.
        self.keyring = keyring
        # Set when the log holds content this node cannot open: the projector stops there.
        self.fatal: KeyMissing | None = None
        self._bus = bus
        self._network = network
        self._node_id = node_id
        self._limits = limits
        self._apply_timeout = apply_timeout
        self._trusted = trusted
        # The network's admitted nodes as of the applied sequence (kept in log order).
        self.admission = admitted or Admission()
        # The exact bytes of envelopes this node published and still waits for.
        # (Sealed here: opening them again would only decrypt what this node just sealed.)
        self._sealed: dict[bytes, Envelope] = {}
        self._waiting: dict[str, asyncio.Future[Outcome]] = {}
        self._subscriptions: SubscriptionIndex | None = None
        self._listeners: list[EventListener] = []
        self._applied_listeners: list[Callable[[Sequence[Envelope]], None]] = []
        self._outcome_listeners: list[OutcomeListener] = []
        self._drop_listeners: list[DropListener] = []
        self._agent_listeners: list[AgentListener] = []
        self._applied_seq = 0
        self._received_seq = 0  # the newest sequence the consumer has handed over
        self._progress = asyncio.Condition()
        # Held while envelopes are applied and settled, by the consumer or by an origin.
        self._applying = asyncio.Lock()
        self._origins: set[asyncio.Future[None]] = set()  # origins applying their envelopes
        self.directory = AgentDirectory()
        # Stand-ins of envelopes retention or erasure purged from the log (met as gaps).
        self.rejected: Counter[str] = Counter()
        self.stand_ins = StandIns(
            bus,
            network,
            trusted,
            keyring,
            self.admission,
            filtered=self._tokens is not None,
            counters=self.rejected,
        )
        self.applied_count = 0

    @property
    def durable(self) -> str:
        """This node's durable consumer name."""
        return f"node_{self._node_id.replace('-', '_')}"

    @property
    def applied_sequence(self) -> int:
        """The highest log sequence applied so far."""
        return self._applied_seq

    def add_listener(self, listener: EventListener) -> None:
        """Call ``listener`` after each commit with the (subscription, event) pairs it matched."""
        self._listeners.append(listener)

    def add_applied_listener(self, listener: Callable[[Sequence[Envelope]], None]) -> None:
        """Call ``listener`` after each commit with the envelopes it applied (metrics, benches)."""
        self._applied_listeners.append(listener)

    def add_agent_listener(self, listener: AgentListener) -> None:
        """Call ``listener`` after each commit with the agents it changed and its envelopes."""
        self._agent_listeners.append(listener)

    def add_outcome_listener(self, listener: OutcomeListener) -> None:
        """Call ``listener`` after each commit with the outcomes of the batch's envelopes."""
        self._outcome_listeners.append(listener)

    def add_drop_listener(self, listener: DropListener) -> None:
        """Call ``listener`` with each envelope dropped (rejected, or from an unadmitted node)."""
        self._drop_listeners.append(listener)

    def _dropped(self, dropped: Dropped) -> None:
        self.rejected[dropped.reason] += 1
        self._answer_rejected(dropped.envelope_id, dropped.reason)
        for listener in self._drop_listeners:
            try:
                listener(dropped)
            except Exception:
                # Like the other listeners, auditing a drop must never stop the log.
                logger.exception("drop listener failed")

    def remove_outcome_listener(self, listener: OutcomeListener) -> None:
        """Stop calling ``listener``."""
        if listener in self._outcome_listeners:
            self._outcome_listeners.remove(listener)

    async def load_directory(self) -> None:
        """Fill the agent directory from the store (before consuming the log)."""
        async with self._db.session() as session:
            self.directory.load(await Repository(session).all_agents())

    async def restore(self) -> None:
        """Resume after the newest envelope the store has applied (a restart); 0 when new."""
        async with self._db.session() as session:
            stored = await Repository(session).max_applied_seq()
        last = await self._bus.last_sequence()
        if stored > last:
            # The log was reset under a kept store: replay all of it (ids keep it idempotent).
            logger.warning(
                "the store has applied up to sequence %d but the log ends at %d; replaying the log",
                stored,
                last,
            )
            stored = 0
        elif stored:
            async with self._db.session() as session:
                self.admission.restore(await admission_outcomes(session))
        self._applied_seq = max(self._applied_seq, stored)

    async def run(self) -> None:
        """Consume the log from just after what the store has applied, until cancelled.

        Two stages: signatures of the next batch are verified while the database thread
        writes the previous one (verification releases the GIL, so both cores work when a
        node catches up). Where consumption resumes comes from the store, never from acks, so
        acknowledging a batch before it is written loses nothing.
        """
        verified: asyncio.Queue[_Verified] = asyncio.Queue(maxsize=2)

        async def verify(messages: Sequence[BusMessage]) -> None:
            if messages:
                self._received_seq = max(self._received_seq, messages[-1].seq)
            # What this node applied as soon as the network stored it needs no second look.
            fresh = [msg for msg in messages if msg.seq > self._applied_seq]
            if fresh:
                await verified.put((await self._verify(fresh), messages))

        filters = self.filters
        if filters is not None:
            await self._warn_of_old_layout()
        try:
            async with asyncio.TaskGroup() as group:
                group.create_task(self._write_verified(verified), name="bzzz-projector-write")
                await self._bus.consume(self.durable, verify, self._applied_seq + 1, filters)
        except ExceptionGroup:
            if self.fatal is not None:
                raise self.fatal from None
            raise

    @property
    def filters(self) -> list[str] | None:
        """This node's consumer filter subjects; None when it serves every project."""
        if self._tokens is None:
            return None
        return subjects.consumer_filters(self._network, self.projects)

    async def log_end(self) -> int:
        """The newest sequence this node consumes (the whole log's when it serves every project)."""
        filters = self.filters
        if filters is None:
            return await self._bus.last_sequence()
        return max([await self._bus.last_sequence(f) for f in filters], default=0)

    async def _warn_of_old_layout(self) -> None:
        for subject in subjects.legacy_filters(self._network):
            if await self._bus.last_sequence(subject):
                logger.warning(
                    "the log holds project content on the older subject layout (%s): this node "
                    "serves projects %s and cannot tell which project those envelopes belong "
                    "to, so it does not apply them; a node serving '*' does",
                    subject,
                    self.projects,
                )
                return

    def _served(self, opened: list[tuple[Envelope, int]]) -> list[tuple[Envelope, int]]:
        """Only envelopes of what this node serves (its consumer's filter already chose them)."""
        if self._tokens is None:
            return opened
        kept = []
        for env, seq in opened:
            if subjects.serves_subject(self._network, env.subject, self._tokens):
                kept.append((env, seq))
            else:
                self.rejected["not_served"] += 1
                logger.debug("not applied: %s at seq %d is not a served project's", env.id, seq)
        return kept

    async def _write_verified(self, verified: asyncio.Queue[_Verified]) -> None:
        while True:
            opened, messages = await verified.get()
            await self._write(opened, messages)

    async def wait_for_sequence(self, seq: int, within: float) -> None:
        """Wait until the log is applied up to ``seq`` (start-up catch-up, tests).

        Raises KeyMissing at once if the log holds content this node cannot open.
        """
        await self.wait_until(lambda: self._applied_seq >= seq, within)

    async def wait_until(self, predicate: Callable[[], bool], within: float) -> None:
        """Wait until ``predicate`` holds after some batch applied (tests, start-up)."""
        async with asyncio.timeout(within), self._progress:
            await self._progress.wait_for(lambda: self.fatal is not None or predicate())
        if self.fatal is not None:
            raise self.fatal

    async def submit(self, envelope: Envelope) -> Outcome:
        """Publish an envelope and return its outcome once this node has applied it."""
        future: asyncio.Future[Outcome] = asyncio.get_running_loop().create_future()
        self._waiting[envelope.id] = future
        data = envelope.to_bytes()
        self._sealed[data] = envelope
        try:
            # A lone origin applies its envelope itself; concurrent ones leave theirs to the
            # consumer, which applies many in one transaction.
            ahead = self._bus.logs_directly(envelope.subject) and self._db.writes_here
            if ahead and self._alone() and self._idle():
                await self._shielded(self._submit_ahead(envelope, data))
            else:
                stored = await self._bus.store(envelope.subject, data, envelope.id)
                if not future.done() and self._alone() and self._stored_next(stored):
                    await self._shielded(self._apply_stored(data, stored.seq))
            async with asyncio.timeout(self._apply_timeout):
                return await future
        except TimeoutError as exc:
            raise NetworkError(
                "the network stored the change but this node has not applied it yet; "
                "read again shortly",
                details={"envelope_id": envelope.id},
            ) from exc
        finally:
            self._waiting.pop(envelope.id, None)
            self._sealed.pop(data, None)

    async def _shielded(self, work: Coroutine[Any, Any, None]) -> None:
        # Once begun, a transaction must also be settled (directory, progress, listeners),
        # even if the caller gives up waiting; a stopping node waits for it (settle_origins).
        task = asyncio.ensure_future(work)
        self._origins.add(task)
        task.add_done_callback(self._origins.discard)
        await asyncio.shield(task)

    async def settle_origins(self, within: float) -> None:
        """Wait (at most ``within`` s) for envelopes origins are applying (a stopping node)."""
        if self._origins:
            await asyncio.wait(set(self._origins), timeout=within)

    def _alone(self) -> bool:
        """No other envelope of this node is on its way."""
        return len(self._waiting) == 1

    def _idle(self) -> bool:
        """Nothing is being applied, and the consumer holds nothing it has not applied."""
        return not self._applying.locked() and self._received_seq <= self._applied_seq

    async def _submit_ahead(self, envelope: Envelope, data: bytes) -> None:
        """Publish the envelope and apply it while the network stores it (SQLite).

        The store's transaction stays open until the network acknowledges the envelope and
        commits only if the log holds it at the sequence after the last one applied: then
        nothing before it is missing here and the outcome is the one the consumer would
        reach. Any other answer (another envelope came first, a duplicate, no answer within
        AHEAD_WAIT) rolls it back and the consumer applies it in its turn. Both run on the
        event loop while nats-server syncs the envelope to disk.
        """
        publishing = asyncio.ensure_future(self._bus.store(envelope.subject, data, envelope.id))
        try:
            async with self._applying:
                # Let the publish reach the socket (the task, then nats-py's flusher) before
                # the loop turns to the store.
                await asyncio.sleep(0)
                await asyncio.sleep(0)
                await self._apply_ahead(data, publishing)
            await publishing
        finally:
            if not publishing.done():
                publishing.cancel()

    async def _apply_ahead(self, data: bytes, publishing: asyncio.Future[Stored]) -> None:
        expected = self._applied_seq + 1
        envelope = self._own(data)
        if envelope is None:
            return
        opened = await self._unsealed([(envelope, expected)])
        await prepare(self._db, [envelope for envelope, _ in opened])
        ctx = self._context()
        try:
            with self._db.transaction_here() as session:
                result = apply_batch(session, opened, ctx)
                await asyncio.wait({publishing}, timeout=AHEAD_WAIT)
                if not _acknowledged_at(publishing, expected):
                    raise _NotNext
        except (_NotNext, WriterBusy):
            return  # rolled back: the consumer applies it in its turn
        except Exception:
            # Rolled back; the consumer applies it (envelope by envelope if need be) and the
            # publish goes on: whatever went wrong here must not cost the post.
            logger.warning("could not apply envelope %s ahead; the log will", opened[0][0].id)
            return
        await self._settle(result, ctx, opened, expected)

    async def _apply_stored(self, data: bytes, seq: int) -> None:
        """Apply this node's envelope as soon as the network stored it next in the log.

        If the log holds it at the sequence right after the last one applied, nothing before
        it is missing here, and applying it now reaches the outcome the consumer would reach
        once the log delivers it (the consumer then skips it). Otherwise the consumer applies
        it in its turn.
        """
        async with self._applying:
            envelope = self._own(data) if seq == self._applied_seq + 1 else None
            if envelope is None:
                return
            try:
                await self._apply(await self._unsealed([(envelope, seq)]), seq)
            except StoreError:
                # Stored in the log all the same: the consumer applies it in its turn.
                logger.warning("could not apply envelope %s at once; the log will", envelope.id)

    def _own(self, data: bytes) -> Envelope | None:
        """This node's envelope as the consumer would read it; None when the consumer must.

        None also for one the consumer would drop (this node is not admitted) and for an
        admission envelope: what it does is decided in log order, and the consumer decides it
        exactly once, whereas applying ahead may roll back.
        """
        try:
            envelope = open_own(self._sealed.get(data), self._trusted) or open_envelope(
                data, self._network, self._trusted, sealed_here=True, keyring=self.keyring
            )
        except EnvelopeRejected:
            return None  # the consumer rejects it and answers the origin
        if envelope.type in admission.TYPES or self.admission.check(envelope):
            return None
        return envelope

    def _stored_next(self, stored: Stored) -> bool:
        # A duplicate's sequence is another entry's: its bytes may differ from these; a
        # partition's is not the log's (the servers copy it into the log in their turn).
        return (
            not stored.duplicate
            and stored.stream is None
            and stored.seq == self._applied_seq + 1
            and not self._applying.locked()
        )

    # --- applying ----------------------------------------------------------------------------

    async def _verify(self, messages: Sequence[BusMessage]) -> list[tuple[Envelope, int]]:
        """Parse and verify a batch: on the loop when small, else on two worker threads."""
        if len(messages) < PARALLEL_VERIFY_AT:
            return self._collect(messages, [self._check(msg) for msg in messages])
        half = len(messages) // 2
        parts = await asyncio.gather(
            asyncio.to_thread(self._check_all, messages[:half]),
            asyncio.to_thread(self._check_all, messages[half:]),
        )
        return self._collect(messages, [result for part in parts for result in part])

    def _check_all(self, messages: Sequence[BusMessage]) -> list[Envelope | EnvelopeRejected]:
        return [self._check(msg) for msg in messages]

    def _check(self, msg: BusMessage) -> Envelope | EnvelopeRejected:
        # Runs on worker threads too: touches nothing shared.
        try:
            # Bytes this node signed and is waiting for are authentic as they are.
            own = self._sealed.get(msg.data)
            return open_own(own, self._trusted) or open_envelope(
                msg.data,
                self._network,
                self._trusted,
                sealed_here=own is not None,
                keyring=self.keyring,
            )
        except EnvelopeRejected as exc:
            return exc

    def _collect(
        self, messages: Sequence[BusMessage], results: list[Envelope | EnvelopeRejected]
    ) -> list[tuple[Envelope, int]]:
        opened = []
        for msg, result in zip(messages, results, strict=True):
            if isinstance(result, EnvelopeRejected):
                logger.warning("rejected envelope at seq %d: %s", msg.seq, result.reason)
                self._dropped(Dropped(msg.seq, result.reason, _envelope_id(msg.data)))
            else:
                opened.append((result, msg.seq))
        return opened

    def _answer_rejected(self, envelope_id: str | None, reason: str) -> None:
        # If this node is waiting for the envelope, tell it now instead of timing out.
        future = self._waiting.get(envelope_id) if envelope_id is not None else None
        if future is not None and not future.done():
            future.set_result({"ok": False, "reason": f"the network rejected it ({reason})"})

    def _admit(
        self, opened: list[tuple[Envelope, int]]
    ) -> tuple[list[tuple[Envelope, int]], dict[str, Outcome]]:
        """Drop what admitted nodes did not send, and decide admissions, in log order.

        Runs in the write stage (which holds ``_applying``): only there is the admitted set
        exactly the one of the sequence before each envelope.
        """
        kept: list[tuple[Envelope, int]] = []
        decided: dict[str, Outcome] = {}
        for env, seq in opened:
            reason = self.admission.check(env)
            if reason is not None:
                logger.warning(
                    "dropped %s envelope at seq %d from %s: %s", env.type, seq, env.origin, reason
                )
                self._dropped(Dropped(seq, reason, env.id, env.type, env.origin))
                continue
            change = self.admission.step(env)
            if change is not None:
                decided[env.id] = change.outcome
                self._log_change(env, change.outcome)
            kept.append((env, seq))
        return kept, decided

    def _log_change(self, env: Envelope, outcome: Outcome) -> None:
        if not outcome.get("ok"):
            logger.info("admission envelope %s refused: %s", env.id, outcome.get("reason"))
        elif "admitted" in outcome:
            logger.info("node %s admitted by %s", outcome["node_id"], env.origin)
        else:
            logger.warning("node %s removed by %s", outcome["node_id"], env.origin)

    async def _write(
        self, opened: list[tuple[Envelope, int]], messages: Sequence[BusMessage]
    ) -> None:
        last_seq = messages[-1].seq if messages else 0
        async with self._applying:
            # What this node applied as soon as the network stored it is in the store already.
            opened = [(env, seq) for env, seq in opened if seq > self._applied_seq]
            filled = await self.stand_ins.fill(self._applied_seq, messages)
            if filled:
                # Purged envelopes' stand-ins, in their places: replay reaches the same state.
                opened = sorted([*opened, *filled], key=lambda pair: pair[1])
            opened, decided = self._admit(self._served(opened))
            opened = await self._unsealed(opened)
            if opened:
                await self._apply(opened, last_seq, decided)
            else:
                await self._advance(last_seq)

    async def _unsealed(self, opened: list[tuple[Envelope, int]]) -> list[tuple[Envelope, int]]:
        """Open what the verify stage could not, learning rotated keys in log order.

        A key the log adds (``keys.added``) opens the envelopes after it, in this batch and
        later ones. Content under a key this node never learns stops the projector
        (``fatal``): applying the log without it would leave this node's store apart from
        every other node's.
        """
        result = []
        for env, seq in opened:
            if env.sealed:
                try:
                    if self.keyring is None:
                        raise SealError("unknown_key", sealed_key_id(env))
                    env = unseal(env, self.keyring)
                except SealError as exc:
                    await self._stop_on_missing_key(exc, seq)
            if env.type == KEY_ADDED:
                self._learn(env)
            result.append((env, seq))
        return result

    async def _stop_on_missing_key(self, exc: SealError, seq: int) -> None:
        message = missing_key_message(exc.key_id, self.keyring)
        logger.error("%s (log sequence %d)", message, seq)
        self.fatal = KeyMissing(message, details={"key_id": exc.key_id, "seq": seq})
        async with self._progress:
            self._progress.notify_all()
        raise self.fatal

    def _learn(self, env: Envelope) -> None:
        if self.keyring is None:
            return
        try:
            key = key_from_payload(env.payload)
        except (KeyError, TypeError, ValueError):
            logger.warning("envelope %s carries no usable key; ignored", env.id)
            return
        self.keyring.add(key)

    def _context(self, decided: dict[str, Outcome] | None = None) -> BatchContext:
        return BatchContext(
            self._node_id,
            self._limits,
            self._subscriptions,
            self.directory.online_count,
            admission=decided or {},
        )

    async def _apply(
        self,
        opened: list[tuple[Envelope, int]],
        last_seq: int,
        decided: dict[str, Outcome] | None = None,
    ) -> None:
        """Apply envelopes in one transaction, then settle (the caller holds ``_applying``)."""
        await prepare(self._db, [env for env, _ in opened])
        ctx = self._context(decided)
        small = len(opened) <= SMALL_BATCH
        try:
            result: BatchResult = await self._db.write(
                lambda session: apply_batch(session, opened, ctx), small=small
            )
        except (StoreError, KeyError, TypeError, ValueError, AttributeError):
            logger.warning("a batch failed as a whole; applying it envelope by envelope")
            ctx = BatchContext(self._node_id, self._limits, None, admission=ctx.admission)
            result = await self._db.write(
                lambda session: apply_batch(session, opened, ctx, isolate=True), small=small
            )
        await self._settle(result, ctx, opened, last_seq)

    async def _settle(
        self,
        result: BatchResult,
        ctx: BatchContext,
        opened: list[tuple[Envelope, int]],
        last_seq: int,
    ) -> None:
        """After a commit: directory, counters, listeners, progress, the waiting origins."""
        self._subscriptions = ctx.subscriptions
        self.rejected.update(result.counters)
        self.rejected["replayed"] += sum(1 for i in result.replayed if i not in self._waiting)
        for agent in result.agents:
            self.directory.put(agent)
        self.directory.touch(result.seen)
        self.applied_count += len(opened)
        for agent_listener in self._agent_listeners if result.agents else ():
            try:
                agent_listener(result.agents, [env for env, _ in opened])
            except Exception:
                # Like the other listeners (the agent directory's writer): never stop the log.
                logger.exception("agent listener failed")
        for applied in self._applied_listeners:
            try:
                applied([env for env, _ in opened])
            except Exception:
                # A listener (metrics, a benchmark, recovery) must never stop the log.
                logger.exception("applied-envelope listener failed")
        await self._advance(last_seq)
        for env_id, outcome in result.outcomes.items():
            future = self._waiting.get(env_id)
            if future is not None and not future.done():
                future.set_result(outcome)
        for outcome_listener in self._outcome_listeners:
            try:
                outcome_listener(result.outcomes)
            except Exception:
                # Like event listeners, an outcome listener must never stop the log.
                logger.exception("outcome listener failed")
        if result.matched:
            await self._notify(result.matched)

    async def _advance(self, seq: int) -> None:
        async with self._progress:
            self._applied_seq = max(self._applied_seq, seq)
            self._progress.notify_all()

    async def _notify(self, matched: list[tuple[domain.Subscription, domain.Event]]) -> None:
        for listener in self._listeners:
            try:
                await listener(matched)
            except Exception:
                # A listener (MCP notification, webhook wake-up) must never stop the log.
                logger.exception("event listener failed")

    def stats(self) -> dict[str, Any]:
        """Counters for /metrics and health."""
        return {
            "applied": self.applied_count,
            "applied_sequence": self._applied_seq,
            "rejected": dict(self.rejected),
            "projects": str(self.projects),
            # Counts only: /healthz is open (`bzzz node list` names the nodes).
            "admission": {
                "enforced": self.admission.enforce,
                "admitted": len(self.admission.members),
            },
        }


def _envelope_id(data: bytes) -> str | None:
    """The id field of wire bytes that did not open as an envelope, if they have one."""
    try:
        envelope_id = json.loads(data).get("id")
    except (ValueError, AttributeError):
        return None
    return envelope_id if isinstance(envelope_id, str) else None
