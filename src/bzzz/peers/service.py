"""Peers: every node's heartbeat on the network's peer board, and who is alive.

Each node puts a signed heartbeat (its seed ``NetworkPeer``: address, capabilities, status) on
the board every ``interval`` seconds and watches the heartbeats of the nodes whose agents it
holds. A peer whose heartbeats stop for ``misses`` intervals is offline; the first node to
notice records it on the event log (``node.lost``, one deterministic envelope id per lost
heartbeat, so several witnesses are stored once) and every projection takes that node's agents
offline. Heartbeats stay off the log: they are a view of the present, not history.

The board's keys follow the projects (``board_keys``, ``board_patterns``): a node serving every
project beats under its id and watches every key; a node serving named projects beats under
``p.<project>.<id>`` for each and watches those of its projects and the every-project nodes'
(whose agents of its projects it holds). So the heartbeats a network delivers grow with the
nodes times the nodes of a project, not with the square of the nodes. ``bzzz peers`` reads the
whole board.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import secrets
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from ulid import ULID

from bzzz.domain import iso, utcnow
from bzzz.errors import BzzzError
from bzzz.eventlog import EventLog
from bzzz.network.base import Bus
from bzzz.network.deliveries import still_wanted
from bzzz.network.envelope import Envelope, EnvelopeRejected, open_envelope, seal
from bzzz.network.identity import NodeIdentity
from bzzz.peers.latency import Pinger
from bzzz.projects import ALL_PROJECTS, ProjectSet

logger = logging.getLogger(__name__)

PEER_STATUSES = ("online", "offline", "busy")


@dataclass(slots=True)
class NetworkPeer:
    """The seed's NetworkPeer, plus what liveness needs (boot id, heartbeat number)."""

    id: str
    address: str
    capabilities: list[str]
    last_seen: datetime
    status: str
    boot: str = ""
    beat: int = 0
    public_key: str = ""
    # What this peer measured: the last round trip (ms) to each node it pings.
    latency: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The API reference's NetworkPeer shape."""
        return {
            "id": self.id,
            "address": self.address,
            "capabilities": list(self.capabilities),
            "lastSeen": iso(self.last_seen),
            "status": self.status,
        }


def peer_from_heartbeat(envelope: Envelope, now: datetime) -> NetworkPeer:
    """Read a verified heartbeat envelope (its time is capped at ``now``: no future lastSeen)."""
    p = envelope.payload
    status = p.get("status")
    capabilities = p.get("capabilities")
    if status not in PEER_STATUSES or not isinstance(capabilities, list):
        raise EnvelopeRejected("malformed")
    return NetworkPeer(
        id=envelope.origin,
        address=str(p.get("address", ""))[:512],
        capabilities=[str(c)[:128] for c in capabilities[:64]],
        last_seen=min(envelope.timestamp, now),
        status=status,
        boot=str(p.get("boot", ""))[:64],
        beat=int(p.get("beat", 0)),
        public_key=envelope.origin_key,
        latency=_latency_of(p.get("latency")),
    )


def _latency_of(value: object) -> dict[str, float]:
    if not isinstance(value, dict):
        return {}
    items = list(value.items())[:64]
    return {str(k)[:128]: float(v) for k, v in items if isinstance(v, int | float)}


def read_heartbeat(
    node_id: str, data: bytes, network: str, trusted: frozenset[str] | None, now: datetime
) -> NetworkPeer:
    """Verify a board entry filed under ``node_id``; raise EnvelopeRejected if it is not one."""
    envelope = open_envelope(data, network, trusted)
    if envelope.type != "node.heartbeat" or envelope.origin != node_id:
        raise EnvelopeRejected("origin_mismatch")
    try:
        return peer_from_heartbeat(envelope, now)
    except (TypeError, ValueError) as exc:
        raise EnvelopeRejected("malformed") from exc


def board_token(project: str) -> str:
    """A project id as one token of a board key: NATS KV keys allow ``[-/_=.a-zA-Z0-9]`` and a
    project id ``[A-Za-z0-9._-]``, so only its dots are escaped (``=`` never is in an id)."""
    return project.replace(".", "=2E")


def board_keys(node_id: str, projects: ProjectSet) -> list[str]:
    """Where a node's heartbeats go: its id (every project), else one key per project."""
    if projects.every:
        return [node_id]
    return [f"p.{board_token(name)}.{node_id}" for name in sorted(projects.names)]


def board_patterns(projects: ProjectSet) -> list[str]:
    """The keys a node watches: every key (every project), else the every-project nodes' and
    its projects' nodes'."""
    if projects.every:
        return [">"]
    return ["*", *(f"p.{board_token(name)}.*" for name in sorted(projects.names))]


def board_node(key: str) -> str:
    """The node a board key is of."""
    return key.rpartition(".")[2]


def board_view(
    entries: dict[str, bytes], network: str, settings: PeerSettings, now: datetime
) -> list[NetworkPeer]:
    """The peers a board holds, as of ``now`` (what ``bzzz peers`` prints); forgeries skipped.
    A node under several keys (its projects) is shown once, by its newest heartbeat."""
    newest: dict[str, NetworkPeer] = {}
    for key, data in sorted(entries.items()):
        node_id = board_node(key)
        try:
            peer = read_heartbeat(node_id, data, network, settings.trusted, now)
        except EnvelopeRejected as exc:
            logger.warning("skipped the board entry of %s: %s", key, exc.reason)
            continue
        known = newest.get(node_id)
        if known is None or peer.last_seen > known.last_seen:
            newest[node_id] = peer
    return [_as_of(newest[node_id], now, settings.deadline) for node_id in sorted(newest)]


def _as_of(peer: NetworkPeer, now: datetime, deadline: timedelta) -> NetworkPeer:
    if peer.status != "offline" and now - peer.last_seen > deadline:
        return replace(peer, status="offline")
    return peer


def lost_envelope_id(node_id: str, boot: str, beat: int, last_seen: datetime) -> str:
    """The same ULID from every witness of one lost heartbeat (so the log stores it once)."""
    millis = int(last_seen.timestamp() * 1000)
    digest = hashlib.sha256(f"{node_id}:{boot}:{beat}".encode()).digest()
    return str(ULID.from_bytes(millis.to_bytes(6, "big") + digest[:10]))


@dataclass(slots=True)
class PeerSettings:
    """How often nodes beat and how many beats make a peer offline."""

    interval: float = 5.0
    misses: int = 3
    trusted: frozenset[str] | None = None
    # With admission on: whether a node (public key, node id) is admitted; others' beats are
    # refused like an untrusted node's.
    admits: Callable[[str, str], bool] | None = None

    @property
    def deadline(self) -> timedelta:
        """Silence longer than this turns a peer offline."""
        return timedelta(seconds=self.interval * self.misses)


@dataclass(slots=True)
class _Self:
    address: str
    boot: str = field(default_factory=lambda: secrets.token_hex(8))
    beat: int = 0
    status: str = "online"


class PeerService:
    """Beats for this node, watches the board, records lost peers on the log."""

    def __init__(
        self,
        bus: Bus,
        log: EventLog,
        identity: NodeIdentity,
        network: str,
        settings: PeerSettings,
        *,
        address: str,
        describe: Callable[[], tuple[str, list[str]]],
        projects: ProjectSet = ALL_PROJECTS,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self._bus = bus
        self._projects = projects
        self._keys = board_keys(identity.node_id, projects)
        self._patterns = board_patterns(projects)
        self._log = log
        self._identity = identity
        self._network = network
        self._settings = settings
        self._describe = describe
        self._clock = clock
        self._self = _Self(address=address)
        self._peers: dict[str, NetworkPeer] = {}
        # The last heartbeat heard under each key (boot, beat): a node under several keys is
        # heard on several watches, in no order between them; a replay is judged per key.
        self._heard_under: dict[str, tuple[str, int]] = {}
        self._changed = asyncio.Condition()
        # The node announces itself online on the log as it starts; changes are recorded apart.
        self._announced = "online"
        self._status_changed = asyncio.Event()
        self._gone = False
        self.rejected: Counter[str] = Counter()
        self.heard = 0  # board changes handed to this node (its own beats included)
        self.pinger = Pinger(
            bus,
            identity,
            network,
            trusted=settings.trusted,
            admits=settings.admits,
            # A round ends before the next is due; a slow peer counts as a timeout.
            timeout=min(max(settings.interval, 0.5), 5.0),
        )

    @property
    def node_id(self) -> str:
        """This node's id."""
        return self._identity.node_id

    def peers(self) -> list[NetworkPeer]:
        """Every known peer (this node included), with its status as of now."""
        now = self._clock()
        return [self._as_of(peer, now) for peer in sorted(self._peers.values(), key=_peer_key)]

    def view(self) -> list[dict[str, Any]]:
        """Every peer in the seed's shape, with this node's last round trip to it (ms)."""
        trips = self.pinger.round_trips
        return [
            peer.to_json()
            | {
                "latency_ms": self.latency_ms(peer.id),
                "latency": trips[peer.id].to_json() if peer.id in trips else None,
            }
            for peer in self.peers()
        ]

    def peer(self, node_id: str) -> NetworkPeer | None:
        """One peer as of now, or None when never seen."""
        peer = self._peers.get(node_id)
        return self._as_of(peer, self._clock()) if peer is not None else None

    def _as_of(self, peer: NetworkPeer, now: datetime) -> NetworkPeer:
        return _as_of(peer, now, self._settings.deadline)

    # --- running ------------------------------------------------------------------------------

    async def run(self) -> None:
        """Beat, watch, check and record status changes until cancelled.

        Beating never waits on the log: a heartbeat is due every interval whatever the
        projector is doing, or peers would take a busy node for a lost one.
        """
        async with asyncio.TaskGroup() as group:
            group.create_task(self._clear_old_keys(), name="bzzz-peer-clear")
            group.create_task(
                self._bus.watch_peers(self._on_entry, self._patterns), name="bzzz-peer-watch"
            )
            group.create_task(self._every_interval(self.beat), name="bzzz-peer-beat")
            group.create_task(self._every_interval(self.check), name="bzzz-peer-check")
            group.create_task(self._record_status(), name="bzzz-peer-status")
            group.create_task(
                self._bus.serve_pings(self.node_id, self.pinger.answer), name="bzzz-peer-pong"
            )
            group.create_task(self._every_interval(self.ping_peers), name="bzzz-peer-ping")

    async def _clear_old_keys(self) -> None:
        """Take off the board this node's entries under keys it no longer beats under (it
        served other projects before): their watchers would take its silence for a loss.
        Tried again every interval until it is done."""
        while True:
            still_wanted()
            try:
                found = await self._bus.peer_entries()
                for key in found:
                    if board_node(key) == self.node_id and key not in self._keys:
                        await self._bus.delete_peer(key)
                return
            except Exception as exc:
                # Housekeeping beside the beats (the board may not be ready yet): whatever
                # failed, the node beats all the same and tries again.
                logger.warning("could not take this node's old board entries off: %r", exc)
            await asyncio.sleep(self._settings.interval)

    async def _every_interval(self, step: Callable[[], Awaitable[object]]) -> None:
        while True:
            still_wanted()
            try:
                await step()
            except BzzzError as exc:
                # The network is away for a moment; the next round tries again.
                logger.warning("peer round failed: %s", exc)
            await asyncio.sleep(self._settings.interval)

    async def ping_peers(self) -> None:
        """Time a round trip to every peer heard and online (admitted ones only)."""
        if self._gone:
            return
        now = self._clock()
        admits = self._settings.admits
        peers = [
            peer.id
            for peer in self._peers.values()
            if peer.id != self.node_id
            and self._as_of(peer, now).status != "offline"
            and (admits is None or admits(peer.public_key, peer.id))
        ]
        await self.pinger.round(peers)

    def latency_ms(self, node_id: str) -> float | None:
        """The last round trip to that peer (ms), None when not measured (or this node)."""
        trips = self.pinger.round_trips.get(node_id)
        return trips.last_ms if trips is not None else None

    async def _record_status(self) -> None:
        """Put this node's status changes (online <-> busy) on the log, one at a time."""
        while True:
            await self._status_changed.wait()
            self._status_changed.clear()
            status = self._self.status
            if status == self._announced or self._gone:
                continue
            try:
                await self._log.emit("node.status", "node", self.node_id, {"status": status})
                self._announced = status
            except BzzzError as exc:
                logger.warning("could not record this node's status %s: %s", status, exc)
                self._status_changed.set()
                await asyncio.sleep(self._settings.interval)

    async def beat(self, status: str | None = None) -> None:
        """Put this node's heartbeat on the board (status changes go to the log apart)."""
        if self._gone and status != "offline":
            return  # said goodbye: nothing may say otherwise
        computed, capabilities = self._describe()
        status = status or computed
        self._self.status = status
        if status != self._announced:
            self._status_changed.set()
        self._self.beat += 1
        payload = {
            "address": self._self.address,
            "capabilities": capabilities,
            "status": status,
            "boot": self._self.boot,
            "beat": self._self.beat,
            "latency": self.pinger.summary(),
        }
        envelope = seal(
            self._identity,
            self._network,
            "node.heartbeat",
            f"bzzz.{self._network}.node.{self.node_id}",
            payload,
            now=self._clock(),
        )
        data = envelope.to_bytes()
        failed: BzzzError | None = None
        for key in self._keys:  # each on its own: one refused leaves the others beating
            try:
                await self._bus.put_peer(key, data)
            except BzzzError as exc:
                failed = exc
        if failed is not None:
            raise failed

    async def goodbye(self) -> None:
        """Tell the board this node left (a last heartbeat saying offline); beat no more."""
        self._gone = True
        await self.beat(status="offline")

    async def check(self) -> list[str]:
        """Record every peer whose heartbeats stopped; return their ids."""
        if self._gone:
            return []
        now = self._clock()
        own = self._peers.get(self.node_id)
        if own is None or now - own.last_seen > self._settings.deadline:
            # This node does not hear its own heartbeats: its view of others is stale,
            # so it must not declare anyone lost.
            return []
        lost = [
            peer
            for peer in self._peers.values()
            if peer.id != self.node_id
            and peer.status != "offline"
            and now - peer.last_seen > self._settings.deadline
        ]
        for peer in lost:
            await self._record_lost(peer, now)
        return [peer.id for peer in lost]

    async def _record_lost(self, peer: NetworkPeer, now: datetime) -> None:
        logger.warning(
            "peer %s missed its heartbeats (last seen %s); taking it offline",
            peer.id,
            iso(peer.last_seen),
        )
        payload = {
            "node_id": peer.id,
            "boot": peer.boot,
            "beat": peer.beat,
            "last_seen": iso(peer.last_seen),
            "detected_at": iso(now),
            # What this witness holds: it writes those agents' offline directory entries.
            "served": ["*"] if self._projects.every else sorted(self._projects.names),
        }
        envelope_id = lost_envelope_id(peer.id, peer.boot, peer.beat, peer.last_seen)
        await self._log.emit(
            "node.lost", "node", peer.id, payload, envelope_id=envelope_id, now=peer.last_seen
        )
        peer.status = "offline"

    # --- the board ----------------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        """For /healthz: where this node beats, what it watches and has heard."""
        return {
            "keys": list(self._keys),
            "watching": list(self._patterns),
            "heard": self.heard,
            "peers": len(self._peers),
            "rejected": dict(self.rejected),
        }

    async def _on_entry(self, key: str, data: bytes | None) -> None:
        self.heard += 1
        node_id = board_node(key)
        if data is None:
            self._heard_under.pop(key, None)
            if not any(board_node(other) == node_id for other in self._heard_under):
                self._peers.pop(node_id, None)
                self.pinger.forget(node_id)
        else:
            self._take(key, node_id, data)
        async with self._changed:
            self._changed.notify_all()

    def _take(self, key: str, node_id: str, data: bytes) -> None:
        peer = self._read(node_id, data)
        if peer is None:
            return
        last = self._heard_under.get(key)
        if last is not None and last[0] == peer.boot and peer.beat < last[1]:
            self._reject("replayed", node_id)
            return
        self._heard_under[key] = (peer.boot, peer.beat)
        known = self._peers.get(node_id)
        if known is not None:
            if known.boot == peer.boot and peer.beat <= known.beat:
                return  # heard already, under another of its keys
            if known.boot != peer.boot and peer.last_seen < known.last_seen:
                return  # an earlier boot's, under a key the node no longer beats under
        self._peers[node_id] = peer

    def _read(self, node_id: str, data: bytes) -> NetworkPeer | None:
        try:
            peer = read_heartbeat(
                node_id, data, self._network, self._settings.trusted, self._clock()
            )
        except EnvelopeRejected as exc:
            self._reject(exc.reason, node_id)
            return None
        admits = self._settings.admits
        if admits is not None and not admits(peer.public_key, node_id):
            self._reject("not_admitted", node_id)
            return None
        return peer

    def _reject(self, reason: str, node_id: str) -> None:
        self.rejected[reason] += 1
        logger.warning("rejected the heartbeat of %s: %s", node_id, reason)

    async def wait_for(
        self, predicate: Callable[[dict[str, NetworkPeer]], bool], within: float
    ) -> None:
        """Wait until the board satisfies ``predicate`` (tests, start-up)."""
        async with asyncio.timeout(within), self._changed:
            await self._changed.wait_for(lambda: predicate(self._peers))


def _peer_key(peer: NetworkPeer) -> str:
    return peer.id
