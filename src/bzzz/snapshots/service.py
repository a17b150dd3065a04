"""Snapshots of a node's state: written every ``snapshots.every`` envelopes, loaded at a start.

A snapshot is the node's projected state as of one log sequence (``store/snapshot.py``),
signed by the node and sealed under the network key (``network/snapshots.py``), kept in the
network's object store under the set of projects the node serves (``*``, or ``ops,shop``): a
project's rows on a node depend on the whole set it serves (a post of another project touches
its agents' activity, network-wide envelopes act on its rows in log order), so a snapshot is
exact only for the set it was taken on, and a node loads the one of its own set.

- Writing: after every ``snapshots.every`` envelopes applied and at most once every
  ``snapshots.min_seconds``, in the background (the dump reads one consistent state beside the
  projector's writes and never holds them up), unless another node of the same set wrote one
  in the meantime; and on demand (``write``: an admin of every
  project it covers, the CLI's ``bzzz snapshot``).
- Loading (``bootstrap``, before the projector starts): only on an empty store. The log's
  admission envelopes give the admitted set now, and its ``keys.added`` envelopes (from nodes
  admitted at their point of the log) the keys the rows were sealed under; the snapshot must be
  this network's and this set's, signed by its writer, the writer admitted, its hash and seal
  intact, and it no bigger than ``snapshots.max_bytes`` (checked from the object store's
  metadata before any of it is read). A refused one is logged, counted (``refused``) and the
  node replays the whole log.
  Loaded, the store resumes where a restart would, after the snapshot's sequence: everything,
  network-wide kinds included, is in the snapshot up to it and in the log after it.
"""

from __future__ import annotations

import asyncio
import logging
import time
import zlib
from collections import Counter
from typing import Any

from bzzz.config import SnapshotSettings
from bzzz.errors import BzzzError, InvalidParameters, NetworkError, PermissionDenied
from bzzz.network import admission
from bzzz.network.admission import Admission
from bzzz.network.base import Bus, BusMessage
from bzzz.network.envelope import Envelope, EnvelopeRejected, open_envelope
from bzzz.network.identity import NodeIdentity
from bzzz.network.sealing import KEY_ADDED, KEYS_KIND, Keyring, key_from_payload
from bzzz.network.snapshots import (
    Hint,
    Snapshot,
    SnapshotRefused,
    SnapshotStore,
    object_name,
    open_snapshot,
    seal_snapshot,
)
from bzzz.principal import Principal, Scope
from bzzz.projector import Projector
from bzzz.store import snapshot as rows
from bzzz.store.database import Database, StoreError
from bzzz.store.repository import Repository

logger = logging.getLogger(__name__)

REPLAY = "replay"  # the whole log, from its start
SNAPSHOT = "snapshot"  # a snapshot, then the log after it
STORE = "store"  # the node's own store (a restart), then the log after it


class SnapshotService:
    """This node's snapshots: the one it started from, and the ones it writes."""

    def __init__(
        self,
        db: Database,
        bus: Bus,
        store: SnapshotStore,
        projector: Projector,
        identity: NodeIdentity,
        settings: SnapshotSettings,
        *,
        network: str,
        keyring: Keyring | None,
        trusted: frozenset[str] | None = None,
    ) -> None:
        self._db = db
        self._bus = bus
        self._store = store
        self._projector = projector
        self._identity = identity
        self.settings = settings
        self._keyring = keyring
        self._trusted = trusted
        self.network = network
        self.covers = str(projector.projects)
        self.name = object_name(self.covers)
        # Where this node started from, and how many envelopes it applied to catch up.
        self.start = REPLAY
        self.start_sequence = 0
        self.replayed: int | None = None
        self.refused: Counter[str] = Counter()
        self.written = 0
        self.skipped = 0  # turns left out: another node of the set had written one since
        self.last: dict[str, Any] | None = None
        self.loaded: dict[str, Any] | None = None  # the snapshot this node started from
        self.failures = 0
        self._pending = 0  # envelopes applied since the last snapshot written or seen
        self._base = 0  # the sequence of that snapshot
        self._last_at = time.monotonic()  # when this node last wrote, saw or loaded one
        self._due = asyncio.Event()
        self._writing = asyncio.Lock()
        self._wrote = asyncio.Condition()
        projector.add_applied_listener(self._on_applied)

    # --- loading -----------------------------------------------------------------------------

    async def bootstrap(self) -> None:
        """Load the newest snapshot of this node's projects into an empty store (see above)."""
        async with self._db.session() as session:
            stored = await Repository(session).max_applied_seq()
        if stored:
            self.start, self.start_sequence = STORE, stored
            return
        if not self.settings.load:
            return
        fetching = time.perf_counter()
        try:
            data = await self._store.get(self.name, self.settings.max_bytes)
        except SnapshotRefused as exc:
            # Too big (from its metadata, nothing of it read) or not what it says it is.
            self._refuse(exc)
            return
        except NetworkError as exc:
            # The object store is beside the log, not part of it: without it, replay.
            self.failures += 1
            logger.warning("could not read the snapshots (%s): replaying the whole log", exc)
            return
        if data is None:
            logger.info("no snapshot of projects %s yet: replaying the log", self.covers)
            return
        began = time.perf_counter()
        fetched = began - fetching
        try:
            snapshot = await self._verified(data)
            verified = time.perf_counter()
            loaded = await self._loaded(snapshot)
        except SnapshotRefused as exc:
            self._refuse(exc)
            return
        self.start, self.start_sequence = SNAPSHOT, snapshot.sequence
        self._base = snapshot.sequence
        self.loaded = {
            "writer": snapshot.writer,
            "rows": loaded,
            "bytes": len(data),
            "fetch_s": round(fetched, 3),
            "verify_s": round(verified - began, 3),
            "load_s": round(time.perf_counter() - verified, 3),
        }
        logger.info(
            "loaded the snapshot of projects %s at sequence %d by %s (%d rows)",
            self.covers,
            snapshot.sequence,
            snapshot.writer,
            loaded,
        )

    def _refuse(self, exc: SnapshotRefused) -> None:
        self.refused[exc.reason] += 1
        logger.warning(
            "refused the snapshot of projects %s (%s): replaying the whole log",
            self.covers,
            exc.reason,
        )

    async def _verified(self, data: bytes) -> Snapshot:
        admitted = await self._learn_from_log()
        snapshot = await asyncio.to_thread(
            open_snapshot, data, self.network, self.covers, self._keyring, admitted.is_member
        )
        if snapshot.sequence > await self._bus.last_sequence():
            raise SnapshotRefused("beyond_log")  # of a log since reset
        return snapshot

    async def _loaded(self, snapshot: Snapshot) -> int:
        # One transaction: a dump that does not read back leaves the store empty.
        try:
            return await rows.load(self._db, snapshot.packed, snapshot.sequence)
        except (ValueError, zlib.error) as exc:
            logger.warning(
                "the snapshot of projects %s is no dump of this store: %s", self.covers, exc
            )
            raise SnapshotRefused("malformed") from exc
        except StoreError as exc:
            raise SnapshotRefused("not_loaded") from exc

    async def _learn_from_log(self) -> Admission:
        """The admitted set now, and the keys the log added, both in log order.

        A key counts where the projector would take it: from a node admitted at that point.
        """
        found = await self._bus.read_kind(admission.KIND) + await self._bus.read_kind(KEYS_KIND)
        admitted = self._projector.admission.fresh()
        for msg in sorted(found, key=lambda m: m.seq):
            env = self._opened(msg)
            if env is None or admitted.check(env) is not None:
                continue
            admitted.step(env)
            if env.type == KEY_ADDED and self._keyring is not None and not env.sealed:
                try:
                    self._keyring.add(key_from_payload(env.payload))
                except (KeyError, TypeError, ValueError):
                    logger.warning("envelope %s carries no usable key; ignored", env.id)
        return admitted

    def _opened(self, msg: BusMessage) -> Envelope | None:
        try:
            return open_envelope(msg.data, self.network, self._trusted, keyring=self._keyring)
        except EnvelopeRejected:
            return None

    def caught_up(self) -> None:
        """The node caught up with the log: what it applied to get there is what it replayed."""
        self.replayed = self._projector.applied_count

    # --- writing -----------------------------------------------------------------------------

    def _on_applied(self, envelopes: Any) -> None:
        self._pending += len(envelopes)
        if self.settings.every and self._pending >= self.settings.every:
            self._due.set()

    async def run(self) -> None:
        """Write a snapshot whenever ``snapshots.every`` envelopes were applied. Runs until
        cancelled; a failed write is logged and tried again after the next ``every``."""
        while True:
            await self._due.wait()
            # A dump costs what the state holds: at a high rate of envelopes, wait it out.
            rest = self._last_at + self.settings.min_seconds - time.monotonic()
            if rest > 0:
                await asyncio.sleep(rest)
            self._due.clear()
            try:
                await self._write_if_due()
            except BzzzError as exc:
                self.failures += 1
                logger.warning("could not write the snapshot of %s: %s", self.covers, exc)
            except Exception:
                # A snapshot is an optimisation beside the log: whatever failed here, the node
                # goes on serving, and the next `every` envelopes try again.
                self.failures += 1
                logger.exception("could not write the snapshot of %s", self.covers)

    async def _write_if_due(self) -> None:
        hint = await self._store.hint(self.name)
        if hint is not None and hint.sequence > self._base and hint.writer != self.node_id:
            # Another node of this set wrote one since: count again from there.
            self._base, self._pending = hint.sequence, 0
            self._last_at = time.monotonic()
            async with self._wrote:
                self.skipped += 1
                self._wrote.notify_all()
            return
        await self._write()

    @property
    def node_id(self) -> str:
        """The writing node."""
        return self._identity.node_id

    async def write(self, by: Principal, project: str | None = None) -> dict[str, Any]:
        """Write a snapshot now (an admin of every project it covers); what was written."""
        by.require(Scope.ADMIN, "writing a snapshot")
        served = self._projector.projects
        if project is not None and not (served.every or project in served.names):
            raise InvalidParameters(
                f"this node does not serve project {project!r} (it serves {self.covers})",
                details={"project": project, "served": self.covers},
            )
        if not (by.all_projects if served.every else all(map(by.is_admin_of, served.names))):
            raise PermissionDenied(
                f"a snapshot holds every project this node serves ({self.covers}): "
                "it needs an admin of each",
                details={"missing": f"project:{self.covers}"},
            )
        return await self._write()

    async def _write(self) -> dict[str, Any]:
        async with self._writing:
            began = time.perf_counter()
            pending = self._pending
            dumped = await rows.dump(self._db)
            data = await asyncio.to_thread(
                seal_snapshot,
                self._identity,
                self.network,
                self.covers,
                dumped.sequence,
                dumped.packed,
                dumped.rows,
                self._keyring,
            )
            if len(data) > self.settings.max_bytes:
                # No node with this limit would load it: a new node replays the log instead.
                raise NetworkError(
                    f"the snapshot of projects {self.covers} is {len(data)} bytes, past "
                    f"snapshots.max_bytes ({self.settings.max_bytes}): not stored",
                    details={"bytes": len(data), "max_bytes": self.settings.max_bytes},
                )
            await self._store.put(self.name, data, Hint(dumped.sequence, self.node_id))
            self._base, self._pending = dumped.sequence, max(0, self._pending - pending)
            self._last_at = time.monotonic()
            async with self._wrote:
                self.written += 1
                self._wrote.notify_all()
            self.last = {
                "covers": self.covers,
                "sequence": dumped.sequence,
                "rows": dumped.rows,
                "bytes": len(data),
                "seconds": round(time.perf_counter() - began, 3),
            }
            logger.info(
                "wrote the snapshot of projects %s at sequence %d (%d rows, %d bytes)",
                self.covers,
                dumped.sequence,
                dumped.rows,
                len(data),
            )
            return dict(self.last)

    async def wait_written(self, count: int, within: float, *, skipped: int = 0) -> None:
        """Wait until this node has written ``count`` snapshots and left out ``skipped`` turns
        (tests, benches)."""
        async with asyncio.timeout(within), self._wrote:
            await self._wrote.wait_for(lambda: self.written >= count and self.skipped >= skipped)

    # --- status ------------------------------------------------------------------------------

    def started(self) -> dict[str, Any]:
        """Where this node started from: ``{"start": "snapshot", "sequence": N, "replayed": K}``,
        ``{"start": "replay", "replayed": K}`` or ``{"start": "store", …}`` after a restart."""
        shown: dict[str, Any] = {"start": self.start}
        if self.start != REPLAY:
            shown["sequence"] = self.start_sequence
        replayed = self.replayed
        shown["replayed"] = self._projector.applied_count if replayed is None else replayed
        return shown

    def status(self) -> dict[str, Any]:
        """For /healthz: per served project where it started; what was written and refused."""
        started = self.started()
        served = self._projector.projects
        return {
            "covers": self.covers,
            "projects": {name: started for name in (["*"] if served.every else served.names)},
            "loaded": self.loaded,
            "every": self.settings.every,
            "written": self.written,
            "skipped": self.skipped,
            "last_written": self.last,
            "refused": dict(self.refused),
            "failures": self.failures,
        }
