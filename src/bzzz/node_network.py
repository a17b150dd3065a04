"""How a node takes its place on the network: the allow-list of origins, and admission.

With ``bzzz.admission`` on, only admitted nodes' envelopes are applied: the first node of a
network admits itself, a later process on the same data directory is admitted by the
directory's own key (slot 0's), any other node waits for ``bzzz node admit``.
"""

from __future__ import annotations

import logging
from typing import Any

from bzzz.config import Settings
from bzzz.eventlog import EventLog
from bzzz.network import admission
from bzzz.network.identity import NodeIdentity

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
    """With admission on: be admitted, or say why this node's changes will be dropped.

    The first node of a network admits itself. A later process on the same data directory
    shares its trust: the directory's own key (slot 0's) admits it.
    """
    if not settings.bzzz.admission:
        return
    admitted = log.projector.admission
    me = log.identity
    if admitted.is_member(me.public_key_b64, me.node_id):
        return
    sponsoring: EventLog | None = log if admitted.open else None
    sponsor = directory_identity(settings, slot)
    if sponsor is not None and admitted.is_member(sponsor.public_key_b64, sponsor.node_id):
        sponsoring = EventLog(sponsor, log.network, log.projector, log.clock, keyring=log.keyring)
    outcome = await _admit(me, sponsoring) if sponsoring is not None else None
    if outcome is None or not outcome.get("ok"):
        logger.error(
            "this node (%s) is not admitted to network %s: its changes are dropped until an "
            "admitted node runs `bzzz node admit %s`",
            me.node_id,
            log.network,
            me.public_key_b64,
        )


async def _admit(me: NodeIdentity, log: EventLog) -> dict[str, Any]:
    return await log.emit(
        admission.ADMITTED, admission.KIND, me.node_id, {"public_key": me.public_key_b64}
    )


def directory_identity(settings: Settings, slot: int) -> NodeIdentity | None:
    """The data directory's own key (slot 0's), when this process holds another slot."""
    data_dir = settings.node.data_dir.expanduser()
    if not slot or not (data_dir / "node.key").exists():
        return None
    return NodeIdentity.load_or_create(data_dir)
