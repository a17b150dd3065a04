"""One change on the network's log, made by a CLI command without starting a node.

`bzzz token create|revoke` change network state, and need neither a store to project into nor
the node's services: ``DirectoryLog`` seals the one envelope with the data directory's node key
(as `bzzz node admit` and `bzzz subscriptions delete` do), stores it in the network's stream
(joined as a local process joins it: the running node's embedded server, one started for the
command, or ``BZZZ_NATS_URL``), and learns its outcome the way every node does. Whether a node
applies a well-formed envelope depends on its origin alone: trusted (``BZZZ_TRUSTED_NODES``)
and, with admission on, admitted as of the envelope's place in the log. The origin is checked
before the envelope is stored (a refusal changes nothing) and again at its place once stored.

The stream's acknowledgement is the durability point; every node applies the envelope from
there. When a node runs on this directory (the command joined its embedded server), the command
also waits, bounded by ``bzzz.publish_timeout``, until that node's store has applied it: a token
just created works at once on the node beside it. The network is joined at the first ``emit``:
a command the service refuses first (an unknown token) never joins it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from typing import TYPE_CHECKING, Any

from bzzz.cli import start as start

if TYPE_CHECKING:
    from bzzz.config import Settings
    from bzzz.network.envelope import Envelope
    from bzzz.network.identity import NodeIdentity
    from bzzz.network.jetstream import JetStreamBus

logger = logging.getLogger(__name__)


class DirectoryLog:
    """The ``emit`` of the node's event log, for one command acting as the data directory."""

    def __init__(
        self,
        settings: Settings,
        identity: NodeIdentity,
        exits: contextlib.AsyncExitStack,
        *,
        served_here: bool = False,
    ) -> None:
        self.settings = settings
        self.identity = identity
        # A node runs on this data directory: its store shows when it applied the envelope.
        self.served_here = served_here
        self._exits = exits
        self._bus: JetStreamBus | None = None
        self.network = settings.bzzz.network_id
        # Told of each envelope the network applies (as a node's projector tells its registry).
        self.applied: list[Callable[[Sequence[Envelope]], None]] = []

    async def emit(
        self,
        type_: str,
        kind: str,
        key: str,
        payload: dict[str, Any],
        *,
        project: str | None = None,
    ) -> dict[str, Any]:
        """Store one change (a project's when ``project`` is given, see ``network.subjects``);
        its outcome (``ok``, ``reason``). NotServed for a project this directory's node does
        not serve."""
        from bzzz.errors import NotServed
        from bzzz.network import subjects
        from bzzz.network.envelope import seal
        from bzzz.network.sealing import keyring_of
        from bzzz.projects import NO_PROJECT, ProjectSet

        if project is not None and not ProjectSet.of(self.settings.bzzz.projects).serves(project):
            raise NotServed(project or NO_PROJECT)

        await self._admitted_if_open(type_)
        refusal = await self._refusal()
        if refusal is not None:
            return {"ok": False, "reason": refusal}
        bus = await self._joined()
        envelope = seal(
            self.identity,
            self.network,
            type_,
            subjects.subject(self.network, kind, key, project),
            payload,
            keyring=keyring_of(self.settings, create=False),
        )
        seq = await bus.publish(envelope.subject, envelope.to_bytes(), envelope.id)
        # The admitted set may have changed between the check and the store: what counts is
        # the set as of the envelope's own place in the log.
        refusal = await self._refusal(before_seq=seq)
        if refusal is not None:
            return {"ok": False, "reason": f"{refusal}; every node drops it"}
        if self.served_here:
            await self._applied_here(seq)
        for listener in self.applied:
            listener([envelope])
        return {"ok": True}

    async def _admitted_if_open(self, type_: str) -> None:
        """On a network no node was admitted to yet, admit the data directory's key first, as
        the first node started here would: a token, node, key or retention change is applied
        from an admitted node only, so one stored before (a `bzzz init` before the first
        `bzzz serve`) would be dropped by every node."""
        from bzzz.errors import NetworkError
        from bzzz.network import admission
        from bzzz.network.envelope import seal
        from bzzz.node.admin import derive

        if not admission.privileged(type_):
            return
        bus = await self._joined()
        state, _ = await derive(self.settings, bus)
        if not state.open:
            return
        me = self.identity
        subject = f"bzzz.{self.network}.{admission.KIND}.{me.node_id}"
        env = seal(me, self.network, admission.ADMITTED, subject, {"public_key": me.public_key_b64})
        await bus.store(env.subject, env.to_bytes(), env.id)
        _, outcome = await derive(self.settings, bus, until=env.id)
        if outcome is None or not outcome.get("ok"):
            reason = (outcome or {}).get("reason", "its log does not show it")
            raise NetworkError(f"this node could not admit itself to the new network: {reason}")
        logger.info("admitted this data directory's node %s to the new network", me.node_id)

    async def _applied_here(self, seq: int) -> None:
        """Wait until the node on this directory has applied log sequence ``seq`` (bounded)."""
        from bzzz.store.repository import Repository

        async with start.opened_store(self.settings) as db:
            try:
                async with asyncio.timeout(self.settings.bzzz.publish_timeout):
                    while True:
                        async with db.session() as session:
                            if await Repository(session).max_applied_seq() >= seq:
                                return
                        # Another process applies it: its store is all this one can watch.
                        await asyncio.sleep(0.02)
            except TimeoutError:
                logger.warning(
                    "the log holds the change (sequence %d); the node on %s has not applied it yet",
                    seq,
                    self.settings.node.data_dir,
                )

    async def _joined(self) -> JetStreamBus:
        if self._bus is None:
            from bzzz.network.join import joined_bus

            self._bus = await self._exits.enter_async_context(joined_bus(self.settings))
        return self._bus

    async def _refusal(self, before_seq: int | None = None) -> str | None:
        """Why the network would not apply this node's envelopes (None: it would)."""
        from bzzz.node.admin import derive

        me, bzzz = self.identity, self.settings.bzzz
        listed = frozenset(bzzz.trusted_nodes)
        if not bzzz.admission:
            if listed and not {me.public_key_b64, me.node_id} & listed:
                return f"this node ({me.node_id}) is not in the network's BZZZ_TRUSTED_NODES"
            return None
        state, _ = await derive(self.settings, await self._joined(), before_seq=before_seq)
        if not state.admits(me.public_key_b64, me.node_id):
            return (
                f"this node ({me.node_id}) is not admitted to network {self.network}: "
                f"an admitted node runs `bzzz node admit {me.public_key_b64}`"
            )
        return None


@contextlib.asynccontextmanager
async def joined(settings: Settings) -> AsyncIterator[DirectoryLog]:
    """The network's log for one change, as the data directory's node."""
    from bzzz.network.embedded import running_url
    from bzzz.network.identity import NodeIdentity

    data_dir = settings.node.data_dir.expanduser()
    data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    identity = NodeIdentity.load_or_create(data_dir)
    # Looked at before joining: once joined, this command's own server would be running too.
    served = not settings.bzzz.nats_url and running_url(data_dir) is not None
    served = served and (settings.node.database_url is not None or (data_dir / "bzzz.db").is_file())
    async with contextlib.AsyncExitStack() as exits:
        yield DirectoryLog(settings, identity, exits, served_here=served)
