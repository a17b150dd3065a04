"""How a node takes its place on the network: the allow-list of origins, admission, and the
network's stores beside the log (the agent directory, the snapshots).

With ``bzzz.admission`` on (the default), only admitted nodes' envelopes are applied; whatever
the setting, only admitted nodes' tokens, admissions, keys and retention. The first node of a
network admits itself (or a CLI change made on its data directory before it first ran did,
with the same key: ``node.admin.admit_first``), a later process on the same data directory is
admitted by the directory's own key (slot 0's), any other node waits for ``bzzz node admit``.
The agent directory takes the entries of the same nodes (``DirectorySigners``).
"""

from __future__ import annotations

import logging
from typing import Any

from bzzz.agents.listing import DirectoryWriter, RemoteAgents
from bzzz.agents.service import AgentService
from bzzz.config import Settings
from bzzz.eventlog import EventLog
from bzzz.network import admission
from bzzz.network.admission import Admission
from bzzz.network.base import Bus, Directory
from bzzz.network.directory import InMemoryDirectory, JetStreamDirectory
from bzzz.network.identity import NodeIdentity
from bzzz.network.jetstream import JetStreamBus
from bzzz.network.memory import InMemoryBus
from bzzz.network.sealing import Keyring
from bzzz.network.snapshots import InMemorySnapshots, JetStreamSnapshots, SnapshotStore
from bzzz.projector import Projector
from bzzz.projects import ProjectSet
from bzzz.snapshots.service import SnapshotService
from bzzz.store.database import Database

logger = logging.getLogger(__name__)


def trusted_origins(settings: Settings, identity: NodeIdentity) -> frozenset[str] | None:
    """The network's allow-list of origins (keys or node ids), or None: any signed node.

    This node is not added to it: a node left off the network's list must find its own
    changes refused, as every other node refuses them, rather than diverge from them.
    """
    listed = frozenset(settings.bzzz.trusted_nodes)
    if not listed:
        return None
    # With admission, a node off the list may still be admitted (it learns at start).
    mine = {identity.public_key_b64, identity.node_id}
    if not settings.bzzz.admission and not mine & listed:
        logger.error(
            "this node (%s, key %s) is not in BZZZ_TRUSTED_NODES: the network refuses its changes",
            identity.node_id,
            identity.public_key_b64,
        )
    return listed


async def join_admitted(settings: Settings, slot: int, log: EventLog) -> None:
    """Be admitted, or say why this node's changes will be dropped.

    The first node of a network admits itself. A later process on the same data directory
    shares its trust: the directory's own key (slot 0's) admits it — and is the one that
    admits itself first, whichever process of the directory gets here first. With admission
    off as well: tokens, admissions, keys and retention come from admitted nodes only.
    """
    admitted = log.projector.admission
    me = log.identity
    if admitted.is_member(me.public_key_b64, me.node_id):
        return
    directory = directory_identity(settings, slot) or me
    if admitted.open:
        await _admit(directory, directory, log)
    if directory is not me and admitted.is_member(directory.public_key_b64, directory.node_id):
        await _admit(directory, me, log)
    if not admitted.is_member(me.public_key_b64, me.node_id):
        dropped = "its changes" if settings.bzzz.admission else "its token, node, key changes"
        logger.error(
            "this node (%s) is not admitted to network %s: %s are dropped until an "
            "admitted node runs `bzzz node admit %s`",
            me.node_id,
            log.network,
            dropped,
            me.public_key_b64,
        )


async def _admit(by: NodeIdentity, newcomer: NodeIdentity, log: EventLog) -> dict[str, Any]:
    """Publish ``by``'s admission of ``newcomer`` and wait for this node to apply it."""
    if by is not log.identity:
        log = EventLog(
            by, log.network, log.projector, log.clock, keyring=log.keyring, projects=log.projects
        )
    key = newcomer.public_key_b64
    return await log.emit(admission.ADMITTED, admission.KIND, newcomer.node_id, {"public_key": key})


def directory_identity(settings: Settings, slot: int) -> NodeIdentity | None:
    """The data directory's own key (slot 0's), when this process holds another slot."""
    data_dir = settings.node.data_dir.expanduser()
    if not slot or not (data_dir / "node.key").exists():
        return None
    return NodeIdentity.load_or_create(data_dir)


class DirectorySigners:
    """Whose agent directory entries a node takes: as whose envelopes its projector applies —
    the admitted nodes with admission on (a node removed is no longer taken), else any node
    of ``BZZZ_TRUSTED_NODES`` (any signed node without that list)."""

    def __init__(
        self, admission: Admission, trusted: frozenset[str] | None, *, enforce: bool
    ) -> None:
        self._admission = admission
        self._trusted = trusted
        self._enforce = enforce

    def admits(self, public_key: str, node_id: str) -> bool:
        """Whether entries signed by that node are taken."""
        if self._enforce:
            return self._admission.admits(public_key, node_id)
        return self._trusted is None or bool({public_key, node_id} & self._trusted)

    @property
    def changes(self) -> int:
        """Moves whenever the admitted set does."""
        return self._admission.changes


class Listing:
    """This node's part of the network's agent directory: its writer, and the lookups of the
    projects it does not serve."""

    def __init__(self, directory: Directory, writer: DirectoryWriter) -> None:
        self.directory = directory
        self.writer = writer

    def status(self) -> dict[str, Any]:
        """For /healthz and /metrics: the directory's values left out, by reason."""
        rejected = getattr(self.directory, "rejected", None) or {}
        return {"rejected": dict(sorted(rejected.items()))}

    async def close(self) -> None:
        """Stop the directory's watches."""
        if isinstance(self.directory, JetStreamDirectory):
            await self.directory.close()


async def open_listing(
    settings: Settings,
    bus: Bus,
    projector: Projector,
    agents: AgentService,
    identity: NodeIdentity,
) -> Listing:
    """The directory on this node's bus: written for its agents (signed with ``identity``),
    read for unserved projects (the entries of the nodes its projector takes envelopes of)."""
    directory: Directory
    node_id = identity.node_id
    if isinstance(bus, JetStreamBus):
        enforce = settings.bzzz.admission
        kv = JetStreamDirectory(
            bus.client,
            settings.bzzz.network_id,
            replicas=settings.bzzz.stream_replicas,
            timeout=settings.bzzz.publish_timeout,
            identity=identity,
            signers=DirectorySigners(
                projector.admission, frozenset(settings.bzzz.trusted_nodes) or None, enforce=enforce
            ),
        )
        await kv.start()
        directory = kv
    elif isinstance(bus, InMemoryBus):
        directory = bus.directory
    else:
        # A test's own bus (a wrapper): the directory of what it wraps, else one of its own.
        found = getattr(bus, "directory", None)
        directory = found if found is not None else InMemoryDirectory()
    writer = DirectoryWriter(directory, projector.directory, node_id, agents.leases.seconds)
    projector.add_agent_listener(writer.changed)
    served = ProjectSet.of(settings.bzzz.projects)
    if not served.every:
        agents.remote = RemoteAgents(directory, served)
    return Listing(directory, writer)


def open_snapshots(
    settings: Settings,
    bus: Bus,
    db: Database,
    projector: Projector,
    identity: NodeIdentity,
    keyring: Keyring | None,
    trusted: frozenset[str] | None,
) -> SnapshotService:
    """The node's snapshots, in its bus's object store (``bzzz_snap_<network>``)."""
    store: SnapshotStore
    if isinstance(bus, JetStreamBus):
        store = JetStreamSnapshots(
            bus.client,
            settings.bzzz.network_id,
            replicas=settings.bzzz.stream_replicas,
            timeout=settings.bzzz.publish_timeout,
        )
    else:
        # The in-memory bus's, or a test wrapper's (what it wraps), else one of its own.
        found = getattr(bus, "snapshots", None)
        store = found if found is not None else InMemorySnapshots()
    return SnapshotService(
        db,
        bus,
        store,
        projector,
        identity,
        settings.snapshots,
        network=settings.bzzz.network_id,
        keyring=keyring,
        # As the projector reads the log: with admission, the static list is part of the set.
        trusted=None if settings.bzzz.admission else trusted,
    )
