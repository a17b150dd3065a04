"""Admitting nodes to a network and removing them, from the command line.

The commands join the network as a local process does (the data directory's embedded server,
started when no node runs, or ``BZZZ_NATS_URL`` with its credentials), act with the data
directory's own node key, and learn the outcome the way every node does: by deriving the
admitted set from the log's admission envelopes in log order.
"""

from __future__ import annotations

from typing import Any

from bzzz.config import Settings
from bzzz.errors import InvalidParameters, NetworkError
from bzzz.network import admission
from bzzz.network.admission import Admission
from bzzz.network.envelope import Envelope, EnvelopeRejected, open_envelope, seal
from bzzz.network.identity import NodeIdentity, origin_of
from bzzz.network.jetstream import JetStreamBus
from bzzz.network.join import joined_bus


def _static(settings: Settings) -> frozenset[str]:
    return frozenset(settings.bzzz.trusted_nodes)


async def derive(
    settings: Settings,
    bus: JetStreamBus,
    until: str | None = None,
    *,
    before_seq: int | None = None,
) -> tuple[Admission, dict[str, Any] | None]:
    """The admitted set as the log has it (below ``before_seq`` if given), and the outcome of
    envelope ``until`` if given.

    The same rules in the same order as every node's projector: envelopes a node would reject
    (bad signature, outside a static list without admission) or drop (not admitted) change
    nothing.
    """
    enforce = settings.bzzz.admission
    state = Admission(_static(settings), enforce=enforce)
    trusted = None if enforce else (_static(settings) or None)
    for msg in await bus.read_kind(admission.KIND, before_seq=before_seq):
        try:
            env = open_envelope(msg.data, settings.bzzz.network_id, trusted)
        except EnvelopeRejected as exc:
            if until is not None and _id_of(msg.data) == until:
                return state, {"ok": False, "reason": f"the network rejected it ({exc.reason})"}
            continue
        reason = state.check(env)
        change = None if reason else state.step(env)
        if env.id == until:
            outcome = change.outcome if change is not None else None
            return state, outcome or {"ok": False, "reason": f"the network dropped it ({reason})"}
    return state, None


def _id_of(data: bytes) -> str | None:
    try:
        return Envelope.model_validate_json(data).id
    except ValueError:
        return None


async def admit_first(settings: Settings, bus: JetStreamBus, identity: NodeIdentity) -> bool:
    """On a network that has no admitted node yet, admit the data directory's own key, as
    its first node does when it starts (``node.network.join_admitted``); whether it did.

    A command run on a new data directory before any node (`bzzz token create`, `bzzz node
    admit`) stores its change with that key; without this, the change would sit in the log
    before the key's admission, from a node not admitted yet, and every node would drop it. A
    key that is not the data directory's gains nothing: the network admits itself only the
    first key to ask, and with it closed, drops every other's changes as before.
    """
    state, _ = await derive(settings, bus)
    if not state.open:
        return False
    network = settings.bzzz.network_id
    subject = f"bzzz.{network}.{admission.KIND}.{identity.node_id}"
    payload = {"public_key": identity.public_key_b64}
    env = seal(identity, network, admission.ADMITTED, subject, payload)
    await bus.store(env.subject, env.to_bytes(), env.id)
    return True


def _local_identity(settings: Settings) -> NodeIdentity:
    data_dir = settings.node.data_dir.expanduser()
    data_dir.mkdir(parents=True, exist_ok=True)
    return NodeIdentity.load_or_create(data_dir)


async def _act(settings: Settings, type_: str, subject_key: str, payload: dict[str, Any]) -> Any:
    """Seal an admission envelope with the local key, store it, return its outcome."""
    identity = _local_identity(settings)
    network = settings.bzzz.network_id
    async with joined_bus(settings) as bus:
        await admit_first(settings, bus, identity)
        state, _ = await derive(settings, bus)
        if not state.is_member(identity.public_key_b64, identity.node_id):
            # PERMISSION_DENIED once the access layer brings that code.
            raise InvalidParameters(
                f"this node ({identity.node_id}) is not admitted to network {network}: "
                "only an admitted node admits or removes others"
            )
        subject = f"bzzz.{network}.{admission.KIND}.{subject_key}"
        env = seal(identity, network, type_, subject, payload)
        await bus.store(env.subject, env.to_bytes(), env.id)
        _, outcome = await derive(settings, bus, until=env.id)
    if outcome is None:
        raise NetworkError("the network stored the change but its log does not show it")
    if not outcome.get("ok"):
        raise InvalidParameters(str(outcome.get("reason")), details={"envelope_id": env.id})
    return outcome


async def admit(settings: Settings, public_key: str) -> dict[str, Any]:
    """Admit the node with that public key; the outcome (``admitted``, ``node_id``)."""
    try:
        node_id, _ = origin_of(public_key)
    except ValueError as exc:
        raise InvalidParameters(
            f"{public_key!r} is not a node's public key (see `bzzz identity`)"
        ) from exc
    outcome: dict[str, Any] = await _act(
        settings, admission.ADMITTED, node_id, {"public_key": public_key}
    )
    return outcome


async def remove(settings: Settings, node: str) -> dict[str, Any]:
    """Remove the node with that public key or node id; the outcome (``removed``)."""
    try:
        subject_key, _ = origin_of(node)
    except ValueError:
        subject_key = node
    if not subject_key.replace("-", "").replace("_", "").isalnum():
        raise InvalidParameters(f"{node!r} is neither a public key nor a node id")
    outcome: dict[str, Any] = await _act(settings, admission.REMOVED, subject_key, {"node": node})
    return outcome


async def admitted(settings: Settings) -> dict[str, Any]:
    """The network's admitted nodes as the log has them (``Admission.snapshot``)."""
    async with joined_bus(settings) as bus:
        state, _ = await derive(settings, bus)
    snapshot = state.snapshot()
    snapshot["nodes"] = [
        {"node_id": node_id, "public_key": key} for key, node_id in sorted(state.members.items())
    ]
    return snapshot
