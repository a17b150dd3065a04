"""The Bus protocol: the network's event log, as seen by a node.

A bus stores published envelopes durably (``publish`` returns once they are stored) and hands
every stored envelope, in log order, to each named durable consumer. Implementations:
``JetStreamBus`` (NATS JetStream, production) and ``InMemoryBus`` (unit tests).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from bzzz import domain
from bzzz.errors import NetworkError


@dataclass(frozen=True, slots=True)
class BusMessage:
    """One stored envelope as the bus delivers it."""

    subject: str
    data: bytes
    seq: int


@dataclass(frozen=True, slots=True)
class Stored:
    """Where the log holds a published envelope."""

    seq: int
    # The log held this msg_id already: ``seq`` is the earlier entry's, whose bytes may differ
    # from these (nodes that witness one fact publish it under one id, each signing its own).
    duplicate: bool = False
    # The project partition's stream that took it (``network.partitions``), whose ``seq`` is
    # that stream's; None when the log the nodes consume took it.
    stream: str | None = None


BatchHandler = Callable[[Sequence[BusMessage]], Awaitable[None]]
# A peer board change: (key, its newest heartbeat) or (key, None) when it was removed.
PeerHandler = Callable[[str, bytes | None], Awaitable[None]]
# A ping addressed to this node: the answer's bytes, or None to leave it unanswered.
PingHandler = Callable[[bytes], Awaitable[bytes | None]]
# A request of a queue group (forwarded calls): its bytes and the reply subject it came with;
# the answer's bytes, or None to leave it unanswered.
RequestHandler = Callable[[bytes, str], Awaitable[bytes | None]]


class Unanswered(NetworkError):
    """A request/reply that no one answered in time (``Bus.request``)."""


def ping_subject(network: str, node_id: str) -> str:
    """Where a node answers pings: outside ``bzzz.<network>.>``, so the log never stores one."""
    return f"_bzzz.{network}.ping.{node_id}"


def subject_matches(pattern: str, subject: str) -> bool:
    """Whether a NATS subject filter (``*`` one token, ``>`` the rest) matches ``subject``."""
    want, have = pattern.split("."), subject.split(".")
    for index, token in enumerate(want):
        if token == ">":
            return len(have) > index
        if index >= len(have) or (token != "*" and token != have[index]):
            return False
    return len(want) == len(have)


class Bus(Protocol):
    """A durable, ordered log shared by every node of a network."""

    async def start(self) -> None:
        """Connect and make sure the network's stream exists."""
        ...

    async def close(self) -> None:
        """Disconnect; idempotent."""
        ...

    async def publish(self, subject: str, data: bytes, msg_id: str) -> int:
        """Store one envelope; return its sequence once stored. Same ``msg_id`` = stored once."""
        ...

    async def store(self, subject: str, data: bytes, msg_id: str) -> Stored:
        """``publish``, and whether the log held ``msg_id`` already."""
        ...

    def logs_directly(self, subject: str) -> bool:
        """Whether ``store`` of ``subject`` answers with the log's own sequence (False for a
        project's subject when the servers spread projects over partition streams)."""
        ...

    async def consume(
        self,
        durable: str,
        handler: BatchHandler,
        start_seq: int = 1,
        filters: Sequence[str] | None = None,
    ) -> None:
        """Deliver the log to ``handler`` in batches, from ``start_seq`` on, in order.

        The node's store knows what it has applied, so it says where to start; ``durable`` names
        this node's consumer on the server. ``filters`` (NATS subject filters) limit it to the
        subjects of the projects the node serves (``network.subjects.consumer_filters``);
        None is the whole log. A batch is acknowledged when the handler returns; if it raises,
        the batch is delivered again. Runs until cancelled.
        """
        ...

    async def last_sequence(self, subject: str | None = None) -> int:
        """The sequence of the newest stored envelope (0 when empty); with ``subject`` (a NATS
        filter), of the newest one on a subject it matches."""
        ...

    # Reading back and removing stored envelopes (retention and erasure, admission's CLI).

    async def read_kind(
        self,
        kind: str,
        key: str | None = None,
        *,
        before_seq: int | None = None,
        after_seq: int | None = None,
    ) -> list[BusMessage]:
        """Stored envelopes of ``kind`` and ``key`` (every key when None) on both layouts and in
        every project (``network.subjects.kind_filters``), in log order, only those below
        ``before_seq`` and above ``after_seq`` when given (what lies outside is not fetched)."""
        ...

    async def removed_count(self) -> int:
        """How many of the log's sequences up to its end no longer hold an envelope (purged,
        deleted, aged out): it grows with every removal and never with an append, so a view
        of the log made when it read N still holds everything it held then while it reads N."""
        ...

    async def get(self, seq: int) -> BusMessage | None:
        """The envelope stored at ``seq``; None when there is none (purged, deleted, beyond)."""
        ...

    async def purge(self, kind: str, key: str | None = None, *, before_seq: int) -> None:
        """Remove every stored envelope of ``kind`` and ``key`` (every key when None; both
        layouts, every project) below ``before_seq``; the others keep their sequences."""
        ...

    async def delete(self, seq: int) -> None:
        """Remove the one envelope stored at ``seq`` (nothing when it is gone already)."""
        ...

    # The peer board: each node's newest heartbeat, kept apart from the log (it is not history).
    # Its keys are the peers service's (``peers/service.py``: a node's id, or one key per
    # project it serves); the bus stores and watches them as they are.

    async def put_peer(self, key: str, data: bytes) -> None:
        """Replace the board's entry under ``key``."""
        ...

    async def delete_peer(self, key: str) -> None:
        """Take the entry under ``key`` off the board (its watchers see it go)."""
        ...

    async def peer_entries(self) -> dict[str, bytes]:
        """The board as it is now: key -> newest heartbeat."""
        ...

    async def watch_peers(self, handler: PeerHandler, patterns: Sequence[str] = (">",)) -> None:
        """Hand every current entry whose key matches one of ``patterns`` (NATS filters on
        keys), then every change of one, to ``handler``. Runs until cancelled."""
        ...

    # Node to node: a request/reply for round trips (core NATS, nothing stored).

    async def serve_pings(self, node_id: str, handler: PingHandler) -> None:
        """Answer the pings addressed to ``node_id`` with ``handler``. Runs until cancelled."""
        ...

    async def ping(self, node_id: str, data: bytes, within: float) -> bytes:
        """Send a ping to ``node_id``; its answer, or NetworkError (none ``within`` seconds)."""
        ...

    async def serve_requests(
        self, subjects: Sequence[str], queue: str, handler: RequestHandler
    ) -> None:
        """Answer requests on ``subjects`` (core NATS, nothing stored) as one member of the
        queue group ``queue``: each request reaches one member of the group, whichever
        subject it matched there. The handler is told the reply subject the request came
        with. Runs until cancelled."""
        ...

    def new_inbox(self) -> str:
        """A fresh reply subject of this bus for one ``request`` (known before the request's
        bytes are made, so they can name it)."""
        ...

    async def request(
        self, subject: str, data: bytes, within: float, *, reply: str | None = None
    ) -> bytes | None:
        """One request/reply (answered on ``reply`` from ``new_inbox``, else on one of the
        client's own): the answer; None when no one listens on ``subject``; Unanswered when
        no answer came ``within`` seconds."""
        ...

    # Other networks (federation): read their agents, post to them.

    async def follow(self, network: str, kinds: Sequence[str], handler: BatchHandler) -> None:
        """Deliver another network's log, only subjects of ``kinds``, from its start. Runs until
        cancelled; nothing is acknowledged (a follower keeps no position on that network)."""
        ...


class Directory(Protocol):
    """The network's agent directory: one compact entry per agent, across every project.

    Only an agent's serving node writes its entry (``put`` again within ``ttl`` keeps it);
    an entry not renewed in time expires by itself. An offline agent's entry has no TTL: the
    stores keep offline agents, so lookups from the directory list them as the stores do.
    Implementations: ``JetStreamDirectory`` (a KV bucket) and ``InMemoryDirectory`` (unit
    tests), in ``bzzz.network.directory``.
    """

    async def put(self, agent: domain.Agent, ttl: float | None) -> None:
        """Write (or renew) ``agent``'s entry, to expire ``ttl`` seconds from now (None: kept)."""
        ...

    async def remove(self, project: str | None, agent_id: str) -> None:
        """Take an agent's entry out (it moved to another project); watchers see it go."""
        ...

    async def project_of(self, agent_id: str) -> str | None:
        """The project of a listed agent (NO_PROJECT for none declared); None if unlisted."""
        ...

    async def listed_projects(self, agent_ids: Sequence[str]) -> dict[str, set[str | None]]:
        """The projects each of ``agent_ids`` has an entry in (an id reused in another
        project, or an agent that moved, may have several for a while)."""
        ...

    async def entries(self, keys: Sequence[tuple[str | None, str]]) -> dict[str, domain.Agent]:
        """The live entries of these (project, agent id) pairs, by agent id."""
        ...

    async def agents(self, project: str | None) -> tuple[int, Mapping[str, domain.Agent]]:
        """(a version that changes with the set, the listed agents of ``project`` by id);
        ``None``: every listed agent; NO_PROJECT: those that declared none."""
        ...
