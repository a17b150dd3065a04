"""Admitting a test's second node the way a user does: `bzzz node admit` on an admitted node.

Admission is on by default: the first node of a network admits itself and every other one
waits until an admitted node admits it (or shares the first one's data directory).
"""

from __future__ import annotations

from bzzz.network import admission
from bzzz.network.identity import NodeIdentity, origin_of
from bzzz.network.memory import InMemoryBus
from bzzz.node import admin as node_admin
from bzzz.node.core import Node

WAIT = 10.0


async def admit(by: Node, *newcomers: Node | NodeIdentity | str) -> None:
    """``by`` (an admitted node) admits each newcomer (a node, an identity or a public key);
    returns once ``by`` and every newcomer node applied it."""
    for newcomer in newcomers:
        key = _key_of(newcomer)
        if isinstance(by.bus, InMemoryBus):
            # No server to join: sign and publish what `bzzz node admit` would, with by's key.
            node_id, _ = origin_of(key)
            payload = {"public_key": key}
            outcome = await by.log.emit(admission.ADMITTED, admission.KIND, node_id, payload)
            assert outcome.get("ok"), outcome
        else:
            await node_admin.admit(by.settings, key)
        for node in (by, newcomer) if isinstance(newcomer, Node) else (by,):
            await node.projector.wait_until(lambda n=node, k=key: _knows(n, k), WAIT)


def _key_of(newcomer: Node | NodeIdentity | str) -> str:
    if isinstance(newcomer, Node):
        return newcomer.identity.public_key_b64
    if isinstance(newcomer, NodeIdentity):
        return newcomer.public_key_b64
    return newcomer


def _knows(node: Node, key: str) -> bool:
    return key in node.projector.admission.members
