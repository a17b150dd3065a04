"""Federation (the design's TGN): finding and messaging agents of other networks.

For each network named in ``bzzz.federated_networks`` the node follows that network's agent and
node subjects from the start of its log and projects them, with the same appliers as its own
network, into a separate small store: the result is that network's agent directory, exactly as
its own nodes decide it. Messages to an agent there are sealed for that network and stored in
its log; its nodes deliver them. Nothing of the other network enters this node's own store.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bzzz.errors import InvalidParameters
from bzzz.network import subjects
from bzzz.network.admission import Admission
from bzzz.network.base import (
    BatchHandler,
    Bus,
    BusMessage,
    PeerHandler,
    PingHandler,
    RequestHandler,
    Stored,
)
from bzzz.network.envelope import seal
from bzzz.network.identity import NodeIdentity
from bzzz.projector import Projector
from bzzz.projects import NO_PROJECT
from bzzz.store.database import Database
from bzzz.store.directory import AgentDirectory
from bzzz.store.projection import ProjectionLimits

logger = logging.getLogger(__name__)

# What a follower reads of another network: its agents, its nodes (lost nodes' agents), and
# its admissions (whose agents and node changes that network applies).
FOLLOWED_KINDS = ("agent", "node", "admission")


def not_federated(network: str, federated: list[str]) -> InvalidParameters:
    """The error for an address on a network this node does not federate with."""
    return InvalidParameters(
        f"network '{network}' is not federated with this node",
        details={"network": network, "federated_networks": federated},
    )


class FollowedLog:
    """Another network's log, read-only, as a Bus for a Projector (it only consumes)."""

    def __init__(self, bus: Bus, network: str) -> None:
        self._bus = bus
        self._network = network

    async def start(self) -> None:
        """The node's own bus is started by the node."""

    async def close(self) -> None:
        """Nothing of its own to close."""

    async def publish(self, subject: str, data: bytes, msg_id: str) -> int:
        """A follower never writes through here (posts go through FederationService.post)."""
        raise RuntimeError("a followed network is read-only")

    async def store(self, subject: str, data: bytes, msg_id: str) -> Stored:
        """A follower never writes through here (posts go through FederationService.post)."""
        raise RuntimeError("a followed network is read-only")

    def logs_directly(self, subject: str) -> bool:
        """Nothing is stored through here (``store`` refuses)."""
        return False

    async def consume(
        self,
        durable: str,
        handler: BatchHandler,
        start_seq: int = 1,
        filters: Sequence[str] | None = None,
    ) -> None:
        """Follow the network's agent and node subjects from its start (every project)."""
        await self._bus.follow(self._network, FOLLOWED_KINDS, handler)

    async def last_sequence(self, subject: str | None = None) -> int:
        """Unknown to a follower: it waits for nothing at start."""
        return 0

    async def read_kind(
        self,
        kind: str,
        key: str | None = None,
        *,
        before_seq: int | None = None,
        after_seq: int | None = None,
    ) -> list[BusMessage]:
        """Nothing: a follower reads only what it follows (its gaps are the unfollowed kinds)."""
        return []

    async def removed_count(self) -> int:
        """Nothing is read through a follower, so nothing it read can go."""
        return 0

    async def get(self, seq: int) -> BusMessage | None:
        """Not read through a follower."""
        return None

    async def purge(self, kind: str, key: str | None = None, *, before_seq: int) -> None:
        """A follower never removes anything."""
        raise RuntimeError("a followed network is read-only")

    async def delete(self, seq: int) -> None:
        """A follower never removes anything."""
        raise RuntimeError("a followed network is read-only")

    async def put_peer(self, key: str, data: bytes) -> None:
        """Followers do not beat on other networks' boards."""
        raise RuntimeError("a followed network is read-only")

    async def delete_peer(self, key: str) -> None:
        """Nor take anything off them."""
        raise RuntimeError("a followed network is read-only")

    async def peer_entries(self) -> dict[str, bytes]:
        """Not read through a follower."""
        return {}

    async def watch_peers(self, handler: PeerHandler, patterns: Sequence[str] = (">",)) -> None:
        """Not watched through a follower."""
        await asyncio.Event().wait()

    async def serve_pings(self, node_id: str, handler: PingHandler) -> None:
        """A follower answers no pings on another network."""
        await asyncio.Event().wait()

    async def ping(self, node_id: str, data: bytes, within: float) -> bytes:
        """A follower pings no node of another network."""
        raise RuntimeError("a followed network is read-only")

    async def serve_requests(
        self, subjects: Sequence[str], queue: str, handler: RequestHandler
    ) -> None:
        """A follower answers no forwarded calls of another network."""
        await asyncio.Event().wait()

    def new_inbox(self) -> str:
        """A follower forwards no call to another network."""
        raise RuntimeError("a followed network is read-only")

    async def request(
        self, subject: str, data: bytes, within: float, *, reply: str | None = None
    ) -> bytes | None:
        """A follower forwards no call to another network."""
        raise RuntimeError("a followed network is read-only")

    async def follow(self, network: str, kinds: Sequence[str], handler: BatchHandler) -> None:
        """Followers do not chain."""
        raise RuntimeError("a followed network is read-only")


@dataclass(slots=True)
class _Followed:
    network: str
    db: Database
    projector: Projector


class FederationService:
    """Directories of federated networks, and posting into them."""

    def __init__(
        self,
        bus: Bus,
        identity: NodeIdentity,
        networks: Sequence[str],
        directory: Path,
    ) -> None:
        self._bus = bus
        self._identity = identity
        self._networks = list(networks)
        self._dir = directory
        self._followed: dict[str, _Followed] = {}

    @property
    def networks(self) -> list[str]:
        """The federated network ids."""
        return list(self._networks)

    async def start(self) -> None:
        """Open a fresh store per federated network (each start replays what it follows)."""
        shutil.rmtree(self._dir, ignore_errors=True)
        self._dir.mkdir(parents=True, exist_ok=True)
        for network in self._networks:
            db = Database(f"sqlite+aiosqlite:///{self._dir / f'{network}.db'}")
            await db.open()
            projector = Projector(
                db,
                FollowedLog(self._bus, network),
                network=network,
                node_id=self._identity.node_id,
                limits=ProjectionLimits(),
                # As that network's own nodes apply it (admission on, the default).
                admitted=Admission(enforce=True),
            )
            self._followed[network] = _Followed(network, db, projector)

    async def run(self) -> None:
        """Follow every federated network until cancelled."""
        async with asyncio.TaskGroup() as group:
            for followed in self._followed.values():
                group.create_task(followed.projector.run(), name=f"bzzz-follow-{followed.network}")

    async def close(self) -> None:
        """Close the followers' stores."""
        for followed in self._followed.values():
            await followed.db.close()
        self._followed.clear()

    def directories(self) -> dict[str, AgentDirectory]:
        """Each federated network's agent directory."""
        return {n: f.projector.directory for n, f in self._followed.items()}

    def directory(self, network: str) -> AgentDirectory:
        """One federated network's directory; INVALID_PARAMETERS when it is not federated."""
        followed = self._followed.get(network)
        if followed is None:
            raise not_federated(network, self.networks)
        return followed.projector.directory

    async def post(self, network: str, sender: str, payload: dict[str, Any]) -> int:
        """Store a message in another network's log (signed by this node); its sequence there."""
        directory = self.directory(network)
        # The recipients' one project there (NO_PROJECT, which every node serves, otherwise).
        found = {
            agent.project or NO_PROJECT
            for agent in (directory.get(r) for r in payload.get("recipients") or [])
            if agent is not None
        }
        project = found.pop() if len(found) == 1 else NO_PROJECT
        subject = subjects.subject(network, "msg", sender, project)
        envelope = seal(self._identity, network, "message.posted", subject, payload)
        return await self._bus.publish(envelope.subject, envelope.to_bytes(), envelope.id)
