"""Threads replayed from the signed log: its envelopes in log order, and the thread as it stood.

A thread's envelopes are those on ``bzzz.<network>.thread.<id>`` (created, joined, left,
status, escalated, escalation actions, summaries) and ``slurp.<id>``, and the posts of its
members (``msg.<agent>``) that name it; posts that retention or erasure purged are met as the
stand-ins the purging node re-stated (``retention.restated`` on ``tomb.*``). Each is read
back from the network and verified again here (its signature recomputed), so a tampered copy
on the stream shows as not verified; it is never applied.

``thread_as_of`` applies what verifies up to a point of the log, with the store's own appliers,
to a scratch store (``store/scratch.py``): the members' agent envelopes, retention's and
erasure's runs and the assignments of tasks the thread's posts update come along, so the
appliers meet the state they met on the live node. Access is the caller's business: this
module reads the log for whoever was allowed to ask.

A replay keeps checkpoints: the scratch store's image at every ``CHECKPOINT_EVERY``-th envelope
of the thread (sealed under the network key, in memory, ``CHECKPOINT_BYTES`` at most across
threads). A later read starts from the newest checkpoint at or before its point: it reads the
log only beyond the checkpoint's sequence (``Bus.read_kind``'s ``after_seq``), so it fetches,
verifies and applies only what lies beyond it. A checkpoint carries the log's
``removed_count`` when the read that made it began; once anything left the log since
(retention, erasure: a post purged, its stand-in re-stated before it), it is dropped, so a
checkpoint never shows content the log no longer holds.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import ValidationError
from sqlalchemy.ext.asyncio import AsyncSession

from bzzz.domain import TASK_UPDATE_TYPES
from bzzz.network import restate
from bzzz.network.base import Bus, BusMessage
from bzzz.network.envelope import Envelope, EnvelopeRejected, open_envelope, unseal
from bzzz.network.sealing import Keyring, SealError
from bzzz.store.projection import ProjectionLimits
from bzzz.store.scratch import Stage, scratch_store

THREAD_KINDS = ("thread", "slurp")
# Network-wide envelopes that change a thread's messages (tombstones): applied in the replay.
RETENTION_KIND = "retention"
# What a stand-in row says was removed.
REMOVED = "the post's content (the stand-in keeps what the thread's state needs)"

# Looks up the log sequences of envelopes by id (the live store's applied envelopes).
SequencesOf = Callable[[list[str]], Awaitable[dict[str, int]]]
# A checkpoint every this many envelopes of a thread: a read replays at most this many of the
# thread's envelopes (and what they draw in) beyond the checkpoint it starts from.
CHECKPOINT_EVERY = 100
# What the checkpoints of every thread hold at most (sealed images), the least recently read
# threads' dropped first.
CHECKPOINT_BYTES = 64 << 20
# The checkpoints one read makes at most (the marks nearest its point): a first read of a long
# thread does not image the store at every mark.
MAX_NEW_CHECKPOINTS = 8

Applied = list[tuple[Envelope, int]]
# What one envelope id a checkpoint's mark holds costs, about (a ULID string and its set slot).
ID_BYTES = 128


@dataclass(frozen=True, slots=True)
class Entry:
    """One envelope of a thread as the log holds it, or the stand-in of a purged one."""

    seq: int
    envelope_id: str | None
    type: str | None
    time: str | None
    origin: str | None
    signed_by: str | None
    verified: bool
    problem: str | None = None
    # For a stand-in: why and by whom the original was replaced.
    stand_in: dict[str, Any] | None = None
    # The opened envelope, when it verified (what a replay applies).
    envelope: Envelope | None = None

    def to_json(self) -> dict[str, Any]:
        """As `bzzz thread replay --json` and the REST route show it."""
        return {
            "seq": self.seq,
            "envelope_id": self.envelope_id,
            "type": self.type,
            "time": self.time,
            "origin": self.origin,
            "signed_by": self.signed_by,
            "verified": self.verified,
            "problem": self.problem,
            "stand_in": self.stand_in,
        }


@dataclass(frozen=True, slots=True)
class Point:
    """Where a replay stopped: the last sequence applied and that envelope's time."""

    seq: int
    time: str


def _claimed(data: bytes, keyring: Keyring | None) -> dict[str, Any] | None:
    """What an envelope claims to be, without trusting it (its payload opened if it can be)."""
    try:
        fields = json.loads(data)
    except ValueError:
        return None
    if not isinstance(fields, dict):
        return None
    try:
        envelope = Envelope.model_validate(fields)
    except ValidationError:
        return fields
    claimed: dict[str, Any] = fields
    if keyring is not None and envelope.sealed:
        with contextlib.suppress(SealError):
            claimed = dict(fields, payload=unseal(envelope, keyring).payload)
    return claimed


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


@dataclass(frozen=True, slots=True)
class Mark:
    """What a checkpoint at ``seq`` covers: a read that starts from it reads the log only
    beyond ``seq`` and applies only what ``applied`` lacks."""

    seq: int
    removed: int  # the log's removed_count when the read that made it began
    count: int  # the thread's entries up to ``seq`` (the marks beyond it count on from it)
    members: frozenset[str]  # everyone in the thread (their agents up to ``seq`` are applied)
    known: frozenset[str]  # ids of the thread's entries up to ``seq``
    applied: frozenset[str]  # ids of every envelope applied up to ``seq``
    latest: datetime  # the latest time of an envelope of the thread up to ``seq``
    last: Point  # the thread's last envelope up to ``seq``


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A thread's scratch store as it stood at ``mark.seq``, and what that covers."""

    mark: Mark
    image: bytes | str  # sealed under the network key when the node seals content

    @property
    def size(self) -> int:
        """Bytes held (an id the mark holds counted as ID_BYTES)."""
        return len(self.image) + ID_BYTES * (len(self.mark.applied) + len(self.mark.known))


class Checkpoints:
    """Sealed images of threads' scratch stores, by thread and sequence, bounded in bytes."""

    def __init__(self, keyring: Keyring | None, budget: int = CHECKPOINT_BYTES) -> None:
        self._keyring = keyring
        self._budget = budget
        self._held = 0
        self._threads: OrderedDict[str, dict[int, Checkpoint]] = OrderedDict()
        # Checkpoints are kept from the worker thread a scratch store is built on while reads
        # on the event loop look for one.
        self._lock = threading.Lock()

    def newest(
        self, thread_id: str, removed: int, fits: Callable[[Mark], bool]
    ) -> tuple[Mark, bytes] | None:
        """The newest checkpoint that ``fits``, opened, made while the log had let go of as
        much as it has now (``removed``): those made before a removal (retention, erasure)
        are dropped, as they may show what the log no longer holds."""
        with self._lock:
            return self._newest(thread_id, removed, fits)

    def _newest(
        self, thread_id: str, removed: int, fits: Callable[[Mark], bool]
    ) -> tuple[Mark, bytes] | None:
        kept = self._threads.get(thread_id)
        if kept is None:
            return None
        self._threads.move_to_end(thread_id)
        for seq in sorted(kept, reverse=True):
            point = kept[seq]
            if point.mark.removed == removed and not fits(point.mark):
                continue
            image = self._open(thread_id, point) if point.mark.removed == removed else None
            if image is not None:
                return point.mark, image
            self._held -= point.size
            del kept[seq]
        return None

    def keep(self, thread_id: str, mark: Mark, image: bytes) -> None:
        """Hold ``image`` as the thread's checkpoint at ``mark``."""
        aad = _checkpoint_aad(thread_id, mark.seq)
        held = self._keyring.seal(image, aad) if self._keyring is not None else image
        point = Checkpoint(mark, held)
        if point.size > self._budget:
            return
        with self._lock:
            self._keep(thread_id, point)

    def _keep(self, thread_id: str, point: Checkpoint) -> None:
        mark = point.mark
        kept = self._threads.setdefault(thread_id, {})
        self._threads.move_to_end(thread_id)
        old = kept.get(mark.seq)
        self._held += point.size - (old.size if old is not None else 0)
        kept[mark.seq] = point
        while self._held > self._budget and self._threads:
            _, dropped = self._threads.popitem(last=False)
            self._held -= sum(p.size for p in dropped.values())

    @property
    def held(self) -> int:
        """Bytes the checkpoints hold."""
        return self._held

    def marks(self, thread_id: str) -> list[int]:
        """The sequences the thread's checkpoints stand at, in order."""
        with self._lock:
            return sorted(self._threads.get(thread_id, {}))

    def _open(self, thread_id: str, point: Checkpoint) -> bytes | None:
        if isinstance(point.image, bytes):
            return point.image
        if self._keyring is None:
            return None
        try:
            return self._keyring.open(point.image, _checkpoint_aad(thread_id, point.mark.seq))
        except SealError:
            return None


def _checkpoint_aad(thread_id: str, seq: int) -> bytes:
    return f"bzzz-replay-checkpoint:{thread_id}:{seq}".encode()


class ThreadLog:
    """Reads one thread's envelopes back from the log and replays them."""

    def __init__(
        self,
        bus: Bus,
        network: str,
        *,
        trusted: frozenset[str] | None = None,
        keyring: Keyring | None = None,
        node_id: str = "replay",
        limits: ProjectionLimits | None = None,
        sequences_of: SequencesOf | None = None,
    ) -> None:
        self._bus = bus
        self._network = network
        self._trusted = trusted
        self._keyring = keyring
        self._node_id = node_id
        self._limits = limits or ProjectionLimits(max_active_threads=1_000_000, max_agents=10**9)
        self._sequences_of = sequences_of
        self.checkpoints = Checkpoints(keyring)

    # --- reading and verifying ---------------------------------------------------------------

    def _entry(self, msg: BusMessage) -> Entry:
        try:
            env = open_envelope(msg.data, self._network, self._trusted, keyring=self._keyring)
        except EnvelopeRejected as exc:
            claimed = _claimed(msg.data, self._keyring) or {}
            return Entry(
                msg.seq,
                _text(claimed.get("id")),
                _text(claimed.get("type")),
                _text(claimed.get("ts")),
                _text(claimed.get("origin")),
                _text(claimed.get("origin_key")),
                verified=False,
                problem=exc.reason,
            )
        opened = None if env.sealed else env
        problem = "sealed under a key this node lacks" if env.sealed else None
        return Entry(
            msg.seq, env.id, env.type, env.ts, env.origin, env.origin_key, True, problem,
            envelope=opened,
        )  # fmt: skip

    async def entries(self, thread_id: str) -> list[Entry]:
        """Every envelope of the thread on the log, and stand-ins of purged posts, in log
        order; empty when the log holds nothing of it."""
        return await self._entries(thread_id)

    async def _entries(
        self,
        thread_id: str,
        *,
        after: int | None = None,
        before: int | None = None,
        members: frozenset[str] = frozenset(),
    ) -> list[Entry]:
        """The thread's entries above ``after`` (its own envelopes: all of them beyond it;
        its members' posts and stand-ins: below ``before`` too); ``members`` are known to be
        in it already."""
        found: list[Entry] = []
        for kind in THREAD_KINDS:
            msgs = await self._bus.read_kind(kind, thread_id, after_seq=after)
            found.extend(self._entry(msg) for msg in msgs)
        if not found and after is None:
            return []
        for member in sorted(members | _members(found)):
            for msg in await self._bus.read_kind("msg", member, before_seq=before, after_seq=after):
                entry = self._entry(msg)
                if _names_thread(entry, msg.data, thread_id, self._keyring):
                    found.append(entry)
        held = {entry.seq for entry in found}
        for entry in await self._stand_ins(thread_id, after):
            inside = (after is None or entry.seq > after) and (before is None or entry.seq < before)
            if inside and entry.seq not in held:
                found.append(entry)
        return sorted(found, key=lambda entry: entry.seq)

    async def _stand_ins(self, thread_id: str, after: int | None = None) -> list[Entry]:
        """The stand-ins re-stated for the thread's purged posts, at the posts' sequences
        (re-stated after ``after``: those of posts beyond it are, as a post is re-stated after
        it was posted)."""
        found: list[Entry] = []
        for msg in await self._bus.read_kind(restate.KIND, after_seq=after):
            holder = self._entry(msg)
            env = holder.envelope
            if env is None or env.type != restate.TYPE:
                continue
            entries = env.payload.get("entries")
            for item in entries if isinstance(entries, list) else []:
                entry = _stand_in(item, holder, thread_id, self._network)
                if entry is not None:
                    found.append(entry)
        return found

    # --- replaying ---------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def thread_as_of(
        self, thread_id: str, as_of: int | datetime
    ) -> AsyncIterator[tuple[AsyncSession, Point] | None]:
        """A scratch store holding the thread as the log had it at ``as_of`` (a sequence, or
        a time: the log up to the thread's last envelope stamped at or before it), with
        where the replay stopped; None when the thread did not exist yet.

        It starts from the newest checkpoint at or before the point, reading the log only
        beyond it, and keeps one at the marks it passes (every CHECKPOINT_EVERY-th entry of
        the thread)."""
        # Read before the log: a removal while this read runs leaves its checkpoints stale.
        removed = await self._bus.removed_count()
        build: _Build | None = None
        start = self.checkpoints.newest(thread_id, removed, lambda mark: _fits(mark, as_of))
        if start is not None:
            build = await self._from_checkpoint(thread_id, as_of, *start)
        if build is None:
            build = await self._from_nothing(thread_id, as_of, removed)
        if build is None:
            yield None
            return
        async with scratch_store(
            build.final, self._node_id, self._limits, base=build.base, stages=build.stages
        ) as session:
            yield session, build.point

    async def _from_nothing(
        self, thread_id: str, as_of: int | datetime, removed: int
    ) -> _Build | None:
        """A replay of the whole thread up to its point, keeping checkpoints at the marks
        nearest the point; None when the thread was not there yet."""
        entries = await self.entries(thread_id)
        point = _cut(entries, as_of)
        if point is None:
            return None
        plan = _Plan(entries, point.seq)
        plan.agents = await self._member_agents(_members(entries), point.seq)
        plan.assigned = await self._assigned(entries, point.seq)
        plan.runs = await self._retention_runs(point.seq, as_of)
        members = frozenset(_members(entries))
        marks = [(i, m) for i, m in _marks(entries, 0) if m <= point.seq]
        stages: list[Stage] = []
        done: frozenset[str] = frozenset()
        # The marks it keeps: at most MAX_NEW_CHECKPOINTS, the nearest to the point.
        for count, seq in marks[-MAX_NEW_CHECKPOINTS:]:
            applied = await plan.upto(seq, self._assignments)
            upto = [e for e in entries[:count] if e.envelope is not None]
            if not upto:
                continue
            mark = Mark(
                seq, removed, count, members,
                frozenset(e.envelope_id for e in entries[:count] if e.envelope_id),
                frozenset(_ids(applied)), max(e.envelope.timestamp for e in upto if e.envelope),
                Point(upto[-1].seq, upto[-1].time or ""),
            )  # fmt: skip
            stages.append((_beyond(applied, done), self._keeper(thread_id, mark)))
            done = mark.applied
        final = _once(sorted(plan.everything(), key=lambda pair: pair[1]))
        return _Build(point, None, stages, _beyond(final, done))

    async def _from_checkpoint(
        self, thread_id: str, as_of: int | datetime, start: Mark, base: bytes
    ) -> _Build | None:
        """A replay from the checkpoint ``start``: the log is read only beyond it. None when
        the point lies before what the checkpoint covers (a replay from nothing then)."""
        before = as_of + 1 if isinstance(as_of, int) else None
        tail = await self._entries(thread_id, after=start.seq, before=before, members=start.members)
        point = _cut_beyond(tail, as_of, start)
        if point is None:
            return None
        members = start.members | _members(tail)
        known = start.known | {e.envelope_id for e in tail if e.envelope_id}
        thread = [(e.envelope, e.seq) for e in tail if e.envelope and e.seq <= point.seq]
        agents = await self._member_agents(start.members, point.seq, after=start.seq)
        agents += await self._member_agents(members - start.members, point.seq)
        wanted = await self._assignments(tail, point.seq, known)
        assigned = await self._fetched(wanted)
        runs = await self._retention_runs(point.seq, as_of, after=start.seq)
        everything = _once(sorted([*thread, *agents, *assigned, *runs], key=lambda p: p[1]))
        stages: list[Stage] = []
        done = start.applied
        marks = [(i, m) for i, m in _marks(tail, start.count) if m <= point.seq]
        if marks:
            # One new checkpoint: the mark nearest the point.
            count, seq = marks[-1]
            upto = [e for e in tail[: count - start.count] if e.envelope is not None]
            wanted_then = set(await self._assignments(tail, seq, known))
            applied = [
                pair for pair in everything
                if pair[1] <= seq and (pair not in assigned or pair[1] in wanted_then)
            ]  # fmt: skip
            last = upto[-1] if upto else None
            latest = max([start.latest, *(e.envelope.timestamp for e in upto if e.envelope)])
            mark = Mark(
                seq, start.removed, count, members,
                start.known | {e.envelope_id for e in tail if e.envelope_id and e.seq <= seq},
                done | _ids(applied), latest,
                Point(last.seq, last.time or "") if last else start.last,
            )  # fmt: skip
            stages.append((_beyond(applied, done), self._keeper(thread_id, mark)))
            done = mark.applied
        return _Build(point, base, stages, _beyond(everything, done))

    def _keeper(self, thread_id: str, mark: Mark) -> Callable[[bytes], None]:
        def keep(image: bytes) -> None:
            self.checkpoints.keep(thread_id, mark, image)

        return keep

    async def _member_agents(
        self, members: Iterable[str], upto: int, *, after: int | None = None
    ) -> Applied:
        """The agent envelopes of ``members`` up to ``upto`` (beyond ``after``)."""
        msgs: list[BusMessage] = []
        for member in sorted(members):
            msgs.extend(
                await self._bus.read_kind("agent", member, before_seq=upto + 1, after_seq=after)
            )
        return [(e.envelope, e.seq) for e in map(self._entry, msgs) if e.envelope is not None]

    async def _assigned(self, entries: list[Entry], upto: int) -> Applied:
        """The posts that assigned the tasks the thread's posts (up to ``upto``) update."""
        return await self._fetched(await self._assignments(entries, upto))

    async def _fetched(self, seqs: Iterable[int]) -> Applied:
        msgs = [await self._bus.get(seq) for seq in seqs]
        opened = (self._entry(msg) for msg in msgs if msg is not None)
        return [(e.envelope, e.seq) for e in opened if e.envelope is not None]

    async def _retention_runs(
        self, cut: int, as_of: int | datetime, *, after: int | None = None
    ) -> Applied:
        """The network's retention and erasure runs up to ``as_of`` (beyond ``after``): they
        bury posts' content (after the thread's last envelope too, when they ran before the
        point asked for)."""
        if isinstance(as_of, int):
            runs = await self._bus.read_kind(RETENTION_KIND, before_seq=as_of + 1, after_seq=after)
            return [(e.envelope, e.seq) for e in map(self._entry, runs) if e.envelope]
        found = []
        for msg in await self._bus.read_kind(RETENTION_KIND, after_seq=after):
            env = self._entry(msg).envelope
            if env is not None and (msg.seq <= cut or env.timestamp <= as_of):
                found.append((env, msg.seq))
        return found

    async def _assignments(
        self, entries: list[Entry], upto: int, known: frozenset[str] | None = None
    ) -> list[int]:
        """Sequences of the posts that assigned tasks the thread's posts update (but for the
        ids ``known`` as the thread's own: all of ``entries`` when not given)."""
        if self._sequences_of is None:
            return []
        ids = set()
        for entry in entries:
            env = entry.envelope
            if env is None or env.type != "message.posted" or entry.seq > upto:
                continue
            task_id = env.payload.get("task_id")
            if env.payload.get("message_type") in TASK_UPDATE_TYPES and isinstance(task_id, str):
                # A task's id is task-<the assigning envelope's id>-<recipient index>.
                ids.add(task_id.removeprefix("task-").rpartition("-")[0])
        if known is None:
            known = frozenset(e.envelope_id for e in entries if e.envelope_id)
        wanted = sorted(i for i in ids if i and i not in known)
        if not wanted:
            return []
        return [seq for seq in (await self._sequences_of(wanted)).values() if seq <= upto]


def _members(entries: Iterable[Entry]) -> set[str]:
    """Every agent that was ever in the thread (from its verified envelopes)."""
    found: set[str] = set()
    for entry in entries:
        env = entry.envelope
        if env is None:
            continue
        if env.type == "thread.created":
            names = [env.payload.get("creator"), *(env.payload.get("participants") or [])]
            found.update(n for n in names if isinstance(n, str))
        elif env.type == "thread.joined" and isinstance(env.payload.get("agent_id"), str):
            found.add(env.payload["agent_id"])
    return found


def _names_thread(entry: Entry, data: bytes, thread_id: str, keyring: Keyring | None) -> bool:
    """Whether a post belongs to the thread (a tampered one by what it claims)."""
    if entry.envelope is not None:
        return entry.envelope.payload.get("thread_id") == thread_id
    payload = (_claimed(data, keyring) or {}).get("payload")
    return isinstance(payload, dict) and payload.get("thread_id") == thread_id


def _stand_in(item: Any, holder: Entry, thread_id: str, network: str) -> Entry | None:
    """The entry of one re-stated post of this thread (None: another thread's, malformed)."""
    seq = item.get("seq") if isinstance(item, dict) else None
    if not isinstance(seq, int) or not isinstance(item.get("envelope"), dict):
        return None
    try:
        env = Envelope.model_validate(item["envelope"])
    except ValidationError:
        return None
    if env.network != network or env.payload.get("thread_id") != thread_id:
        return None
    reason = env.payload.get("restated")
    shown = {
        "reason": reason if isinstance(reason, str) else "retention",
        "removed": REMOVED,
        "restated_by": holder.origin,
        "restated_in": holder.envelope_id,
        "restated_at_seq": holder.seq,
    }
    # The original's signature went with it: the node that re-stated it vouches for it.
    return Entry(
        seq, env.id, env.type, env.ts, env.origin, holder.signed_by, holder.verified,
        "stand-in of a purged envelope", shown, env,
    )  # fmt: skip


def _cut(entries: list[Entry], as_of: int | datetime) -> Point | None:
    """The last sequence a replay to ``as_of`` applies; None when the thread is not there yet."""
    created = [e for e in entries if e.envelope is not None and e.type == "thread.created"]
    if not created:
        return None
    if isinstance(as_of, int):
        if created[0].seq > as_of:
            return None
        last = [e for e in entries if e.seq <= as_of and e.envelope is not None][-1]
        return Point(as_of, last.time or "")
    point: Point | None = None
    for entry in entries:
        if entry.envelope is None:
            continue
        # A prefix of the log: the first envelope stamped after the time ends it (a node with
        # a clock behind cannot pull a later change in front of an earlier one).
        if entry.envelope.timestamp > as_of:
            break
        point = Point(entry.seq, entry.envelope.ts)
    if point is None or point.seq < created[0].seq:
        return None
    return point


def _once(applied: list[tuple[Envelope, int]]) -> list[tuple[Envelope, int]]:
    """One of each envelope id (a post may be both the thread's and a task's assignment)."""
    seen: set[str] = set()
    kept = []
    for env, seq in applied:
        if env.id not in seen:
            seen.add(env.id)
            kept.append((env, seq))
    return kept


Assignments = Callable[[list[Entry], int], Awaitable[list[int]]]


class _Plan:
    """What a replay to ``point`` applies, and the part of it a replay to an earlier mark
    applies (the same envelopes a replay from nothing to that mark would)."""

    def __init__(self, entries: list[Entry], point: int) -> None:
        self.entries = entries
        self.point = point
        self.agents: Applied = []
        self.assigned: Applied = []
        self.runs: Applied = []

    async def upto(self, mark: int, assignments: Assignments) -> Applied:
        """What a replay to the sequence ``mark`` applies, in log order."""
        wanted = set(await assignments(self.entries, mark))
        found = [(e.envelope, e.seq) for e in self.entries if e.envelope and e.seq <= mark]
        found += [pair for pair in self.agents if pair[1] <= mark]
        found += [pair for pair in self.assigned if pair[1] in wanted]
        found += [pair for pair in self.runs if pair[1] <= mark]
        return _once(sorted(found, key=lambda pair: pair[1]))

    def everything(self) -> Applied:
        """What the replay to the point applies (retention runs past it included, for a time
        that came after the thread's last envelope)."""
        found = [(e.envelope, e.seq) for e in self.entries if e.envelope and e.seq <= self.point]
        return [*found, *self.agents, *self.assigned, *self.runs]


@dataclass(frozen=True, slots=True)
class _Build:
    """What a scratch store for a read is built from: a checkpoint's image (or nothing),
    stages that keep new checkpoints, and the rest up to the point."""

    point: Point
    base: bytes | None
    stages: list[Stage]
    final: Applied


def _marks(entries: list[Entry], before: int) -> list[tuple[int, int]]:
    """Where a replay keeps checkpoints among ``entries`` (that follow ``before`` of the
    thread's entries): at every CHECKPOINT_EVERY-th entry of the thread, as (how many entries
    up to it, its sequence)."""
    return [
        (before + i + 1, entry.seq)
        for i, entry in enumerate(entries)
        if (before + i + 1) % CHECKPOINT_EVERY == 0
    ]


def _fits(mark: Mark, as_of: int | datetime) -> bool:
    """Whether a replay to ``as_of`` passes ``mark`` (for a time: every envelope of the thread
    up to the mark is stamped at or before it, so the replay's prefix reaches past it)."""
    return mark.seq <= as_of if isinstance(as_of, int) else mark.latest <= as_of


def _cut_beyond(tail: list[Entry], as_of: int | datetime, start: Mark) -> Point | None:
    """``_cut`` for a replay from ``start``, given the thread's entries beyond it; None when
    the point lies before the mark (no start from it then)."""
    shown = [e for e in tail if e.envelope is not None]
    if isinstance(as_of, int):
        last = [e for e in shown if e.seq <= as_of]
        return Point(as_of, last[-1].time or "") if last else Point(as_of, start.last.time)
    point = start.last
    for entry in shown:
        assert entry.envelope is not None
        if entry.envelope.timestamp > as_of:
            break
        point = Point(entry.seq, entry.envelope.ts)
    return point if point.seq >= start.seq else None


def _ids(applied: Applied) -> set[str]:
    return {env.id for env, _ in applied}


def _beyond(applied: Applied, done: AbstractSet[str]) -> Applied:
    """``applied`` without what a checkpoint already holds."""
    return [pair for pair in applied if pair[0].id not in done]
