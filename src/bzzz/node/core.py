"""The Node: starts the services, runs them, stops them (the composition root).

Beside it in ``node/``: ``wiring.py`` (how the services are built and joined), ``slots.py``
(the slot a process holds in the data directory, the node's secrets), ``network.py`` (the
allow-list of origins, admission), ``admin.py`` (the CLI's admission commands),
``forward.py`` (the front door), ``status.py`` (``/healthz``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from enum import StrEnum
from types import TracebackType
from typing import IO, Any

from bzzz.clock import Clock, SystemClock
from bzzz.config import Settings
from bzzz.errors import BzzzError
from bzzz.federation.service import FederationService
from bzzz.network.base import Bus
from bzzz.network.embedded import EmbeddedNats
from bzzz.network.sealing import KeyMissing
from bzzz.node.network import (
    join_admitted,
)
from bzzz.node.status import node_status
from bzzz.node.wiring import Wiring
from bzzz.projects import AgentProjects
from bzzz.whoosh.registrar import registrar_for

logger = logging.getLogger(__name__)


class NodeState(StrEnum):
    """Where a node is in its life."""

    NEW = "new"
    STARTING = "starting"
    RUNNING = "running"
    STOPPING = "stopping"
    STOPPED = "stopped"
    FAILED = "failed"


class Node(Wiring):
    """A BZZZ node: identity, event log, store, projector, services and background work."""

    def __init__(
        self,
        settings: Settings,
        *,
        bus: Bus | None = None,
        catch_up_timeout: float = 600.0,
        address: str | None = None,
        clock: Clock | None = None,
        tool: bool = False,
        agent_projects: AgentProjects | None = None,
    ) -> None:
        self.settings = settings
        # Where an agent this node does not hold lives (the network's agent directory).
        self._agent_projects = agent_projects
        # A CLI command's node: it joins the network to read and write the log, and neither
        # hosts agents nor beats as a peer.
        self.tool = tool
        # What peers see as this node's address: the configured URL, else what serves it.
        self.address = settings.bzzz.node_url or address or "local"
        # Time as thread rules, idle timeouts and retries see it (tests move it by hand).
        self.clock: Clock = clock or SystemClock()
        self.state = NodeState.NEW
        self._bus_override = bus
        self._catch_up_timeout = catch_up_timeout
        self._tasks: list[asyncio.Task[None]] = []
        self._embedded: EmbeddedNats | None = None
        self._slot_lock: IO[bytes] | None = None
        self.slot = 0
        self.failure: BaseException | None = None

    async def __aenter__(self) -> Node:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    async def start(self) -> None:
        """Build everything, catch up with the log, announce the node."""
        if self.state is not NodeState.NEW:
            raise RuntimeError(f"node cannot start from state {self.state}")
        self.state = NodeState.STARTING
        try:
            await self._build()
            await self.snapshots.bootstrap()  # a new store starts from a snapshot if any
            await self.projector.load_directory()
            await self.tokens.load(self.db)
            await self.projector.restore()
            await self._run_background()
            await self._federate()
            await self._catch_up()
            self.snapshots.caught_up()
            await join_admitted(self.settings, self.slot, self.log)
            if not self.tool:
                await self._go_online()
        except BaseException:
            self.state = NodeState.FAILED
            await self._teardown()
            raise
        self.state = NodeState.RUNNING
        logger.info(
            "node %s running on network %s (slot %d)", self.node_id, self.network, self.slot
        )

    async def _go_online(self) -> None:
        """Sweep threads, release a previous run's agents, beat, start the hosted agents."""
        # Only once caught up: a sweep over a half-applied log would take threads that are
        # busy further on for idle ones, and close them.
        self._spawn("monitor", self.monitor.run())
        # Sessions of a previous run are gone: their subscriptions end before their agents
        # go offline, so the offline events are not fanned out to them.
        await self.subscriptions.end_all("node restarted")
        stale = await self.agents.release_stale()
        if stale:
            logger.info("took %d agents of a previous run offline", stale)
        await self.log.emit("node.status", "node", self.node_id, {"status": "online"})
        await self.peers.beat()
        self._spawn("peers", self.peers.run())
        self._spawn("leases", self.agents.run_leases())
        self._spawn("directory", self.listing.writer.run())
        self._spawn("retention", self.retention.run_periodically())
        self._spawn("reservations", self.reservations.run_sweeps())
        self._spawn("knowledge", self.knowledge.run_catch_up())
        self._spawn("forwarding", self.front.serve())
        self._spawn("snapshots", self.snapshots.run())
        await self.hosted.start()
        if self.slot == 0 and not self.tool:
            await self.a2a.start()
        # WHOOSH hears of the hosted agents in the background: an absent WHOOSH delays no start.
        self.whoosh = registrar_for(
            self.settings,
            self.address,
            self.hosted.hosted,
            self.llm.costs.prices,
            self.projector.directory,
        )
        if self.whoosh is not None:
            self.whoosh.start()

    @property
    def embedded(self) -> EmbeddedNats | None:
        """The embedded nats-server this node started or joined; None with BZZZ_NATS_URL."""
        return self._embedded

    async def _federate(self) -> None:
        """Follow the federated networks' agents (their stores are rebuilt at every start)."""
        networks = self.settings.bzzz.federated_networks
        if not networks:
            return
        self.federation = FederationService(
            self.bus, self.identity, networks, self.node_dir / "federation"
        )
        await self.federation.start()
        self.agents.federation = self.federation
        self._spawn("federation", self.federation.run())

    async def _run_background(self) -> None:
        self._spawn("projector", self.projector.run())
        self._spawn("webhooks", self.webhooks.run())
        self._spawn("audit", self.audit.run())

    def _spawn(self, name: str, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(coro, name=f"bzzz-{name}")
        task.add_done_callback(self._background_done)
        self._tasks.append(task)

    def _background_done(self, task: asyncio.Task[None]) -> None:
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:
            # A dead projector means a stale node: record it so /healthz and the CLI see it.
            self.failure = exc
            if isinstance(exc, KeyMissing):
                return  # said once, in one line, where it was found (the projector)
            logger.error("background task %s failed", task.get_name(), exc_info=exc)

    async def _catch_up(self) -> None:
        # A node serving named projects waits for the newest envelope it consumes.
        last = await self.projector.log_end()
        if last:
            logger.info("catching up with the log to sequence %d", last)
            await self.projector.wait_for_sequence(last, self._catch_up_timeout)

    @property
    def healthy(self) -> bool:
        """Running, background work alive, bus connected."""
        connected = getattr(self.bus, "connected", True)
        return self.state is NodeState.RUNNING and self.failure is None and bool(connected)

    async def stop(self) -> None:
        """Say goodbye on the network, stop background work, close everything. Idempotent."""
        if self.state in (NodeState.STOPPED, NodeState.NEW, NodeState.STOPPING):
            return
        try:
            if self.state is NodeState.RUNNING:
                self.state = NodeState.STOPPING
                if not self.tool:
                    await self._stop_hosted()
                    await self._say_goodbye()
        finally:
            # Even when cancelled (a second Ctrl-C), never leave the server or tasks behind.
            await self._teardown()
            self.state = NodeState.STOPPED

    async def crash(self) -> None:
        """Stop without a word to the network, as a killed process would (fault drills, tests)."""
        await self._teardown()
        self.state = NodeState.STOPPED

    async def _stop_hosted(self) -> None:
        if self.whoosh is not None:
            # Deregistered first, so WHOOSH sends no task to an agent about to leave.
            try:
                async with asyncio.timeout(self.settings.whoosh.timeout + 1):
                    await self.whoosh.stop()
            except TimeoutError:
                logger.warning("hosted agents were not all deregistered from WHOOSH in time")
        await self.a2a.stop()
        try:
            async with asyncio.timeout(10):
                await self.hosted.stop()
        except (BzzzError, TimeoutError):
            logger.warning("hosted agents did not stop cleanly")

    async def _say_goodbye(self) -> None:
        try:
            async with asyncio.timeout(5):
                await self.subscriptions.end_all("node stopped")
                await self.agents.release_stale("node stopped")
                try:
                    await self.listing.writer.flush()  # its agents stay listed, offline
                except BzzzError as exc:  # their holders write them (check_others)
                    logger.warning("could not list this node's agents offline: %s", exc.message)
                await self.log.emit("node.status", "node", self.node_id, {"status": "offline"})
                await self.peers.goodbye()
        except (BzzzError, TimeoutError):
            logger.warning("could not announce shutdown to the network")

    async def _stop_tasks(self) -> None:
        """Let rounds of deliveries finish (bounded), then cancel and await every task."""
        if hasattr(self, "monitor"):
            self.monitor.stop()
        if hasattr(self, "webhooks"):
            self.webhooks.stop()
            names = ("bzzz-webhooks", "bzzz-monitor")
            rounds = [t for t in self._tasks if t.get_name() in names]
            # A round of deliveries ends within the HTTP timeout; past that, cancel.
            if rounds:
                await asyncio.wait(rounds, timeout=self.settings.webhooks.timeout + 1)
        if hasattr(self, "retention"):
            await self.retention.close()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            # On Python 3.11 a cancellation that meets a finishing wait_for inside the task
            # (nats-py's next_msg) can be lost, and the task runs on: cancel until it ends.
            while not task.done():
                await asyncio.wait([task], timeout=1.0)
                task.cancel()
            if not task.cancelled() and task.exception() is not None:
                # Already logged by _background_done; closing must go on.
                logger.debug("background task ended with an error", exc_info=task.exception())
        self._tasks.clear()

    async def _abort_hosted(self) -> None:
        # Already stopped with a goodbye on a clean stop; after a crash or a failed start
        # their tasks must not outlive the bus and the store.
        if self.whoosh is not None:
            await self.whoosh.abort()
        if hasattr(self, "hosted"):
            await self.hosted.abort()
        if hasattr(self, "a2a"):
            await self.a2a.stop()

    async def _teardown(self) -> None:
        if hasattr(self, "_reclaimer"):
            await self._reclaimer.close()
        await self._abort_hosted()
        if hasattr(self, "audit"):
            # What is queued is stored; a clean stop also signs the final head on the log.
            await self.audit.close(publish=self.state is NodeState.STOPPING)
        await self._stop_tasks()
        if hasattr(self, "projector"):
            # An origin may hold a transaction open for its publish's answer (at most 50 ms).
            await self.projector.settle_origins(within=1.0)
        if self.federation is not None:
            await self.federation.close()
        if hasattr(self, "listing"):
            await self.listing.close()
        if hasattr(self, "llm"):
            await self.llm.close()
        if hasattr(self, "access"):
            await self.access.close()
        if hasattr(self, "bus"):
            await self.bus.close()
        if self._embedded is not None:
            await self._embedded.close()
        if hasattr(self, "db"):
            await self.db.close()
        if self._slot_lock is not None:
            self._slot_lock.close()
            self._slot_lock = None

    def status(self) -> dict[str, Any]:
        """A snapshot for /healthz and `bzzz status` (``node/status.py``)."""
        return node_status(self)
