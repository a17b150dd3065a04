"""What a run removes from the network's log, read from the log itself.

Messages (``bzzz.<network>.msg.<sender>``) are purged by subject up to a cut-off sequence: the
first post whose envelope time is past the cut-off time (a post stamped earlier further on, by
a node whose clock was behind, waits for the next run). Every purged post is re-stated first
(``strip.py``). Memories and knowledge (``memory.<agent>``, ``knowledge.<project>``) carry no
state anything else needs and are purged without stand-ins; so are, under erasure, the facts an
agent authored (``fact.<agent>``, registered: ``register_erased_kind``), which the
``retention.forget`` applier removes on every node as a replay without them would leave them.
Nothing else is purged: agents, threads, tokens, subscriptions, admission and audit heads are
the network's long-lived state, and a node that joins later rebuilds it from them.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from bzzz.network.base import Bus, BusMessage
from bzzz.network.sealing import Keyring
from bzzz.retention.strip import opened_fields, stand_in

MESSAGES = "msg"
MEMORY_KINDS = ("memory", "knowledge")
# Kinds whose envelopes an erased agent authored, keyed by a subject key made from its id:
# registered by the service that publishes them (the knowledge graph's ``fact``).
_ERASED_KINDS: dict[str, Callable[[str], str]] = {}


def register_erased_kind(kind: str, key_of: Callable[[str], str]) -> None:
    """Let erasure purge every envelope of ``kind`` whose key ``key_of(agent_id)`` gives."""
    _ERASED_KINDS[kind] = key_of


@dataclass(slots=True)
class Plan:
    """Purges by (kind, key) up to a sequence, single deletions, and the stand-ins to state."""

    purges: list[tuple[str, str | None, int]] = field(default_factory=list)
    deletions: list[int] = field(default_factory=list)
    stand_ins: list[dict[str, Any]] = field(default_factory=list)

    @property
    def removed(self) -> int:
        """How many stored envelopes the plan names (purged or deleted)."""
        return self._counted + len(self.deletions)

    _counted: int = 0


def _time(data: bytes) -> datetime | None:
    try:
        value = json.loads(data).get("ts")
        return datetime.fromisoformat(value) if isinstance(value, str) else None
    except (ValueError, AttributeError):
        return None


def _prefix_before(msgs: list[BusMessage], cutoff: datetime) -> tuple[int, list[BusMessage]]:
    """The cut-off sequence and the messages before it: the prefix stamped before ``cutoff``."""
    for index, msg in enumerate(msgs):
        stamped = _time(msg.data)
        if stamped is None or stamped >= cutoff:
            return msg.seq, msgs[:index]
    return (msgs[-1].seq + 1 if msgs else 0), msgs


def _restate(plan: Plan, msgs: list[BusMessage], reason: str, keyring: Keyring | None) -> None:
    for msg in msgs:
        entry = stand_in(msg.data, reason, keyring)
        if entry is not None:
            plan.stand_ins.append({"seq": msg.seq, "envelope": entry})


async def plan_retention(
    bus: Bus,
    messages: datetime | None,
    memory: datetime | None,
    keyring: Keyring | None = None,
) -> Plan:
    """What a retention run with these cut-offs removes from the log (``keyring`` opens
    sealed posts to restate them)."""
    plan = Plan()
    if messages is not None:
        before, old = _prefix_before(await bus.read_kind(MESSAGES), messages)
        if old:
            _restate(plan, old, "retention", keyring)
            plan.purges.append((MESSAGES, None, before))
            plan._counted += len(old)
    if memory is not None:
        for kind in MEMORY_KINDS:
            before, old = _prefix_before(await bus.read_kind(kind), memory)
            if old:
                plan.purges.append((kind, None, before))
                plan._counted += len(old)
    return plan


async def plan_erasure(
    bus: Bus, agent_id: str, assignments: list[int], keyring: Keyring | None = None
) -> Plan:
    """What forgetting an agent removes: every post it made, the task assignments addressed to
    it alone (``assignments``: their sequences), every memory of it."""
    plan = Plan()
    sent = await bus.read_kind(MESSAGES, agent_id)
    if sent:
        _restate(plan, sent, "erasure", keyring)
        plan.purges.append((MESSAGES, agent_id, sent[-1].seq + 1))
        plan._counted += len(sent)
    for seq in sorted(set(assignments)):
        msg = await bus.get(seq)
        if msg is None or not _only_to(msg, agent_id, keyring):
            continue
        _restate(plan, [msg], "erasure", keyring)
        plan.deletions.append(seq)
    memories = await bus.read_kind("memory", agent_id)
    if memories:
        plan.purges.append(("memory", agent_id, memories[-1].seq + 1))
        plan._counted += len(memories)
    for kind, key_of in sorted(_ERASED_KINDS.items()):
        key = key_of(agent_id)
        authored = await bus.read_kind(kind, key)
        if authored:
            plan.purges.append((kind, key, authored[-1].seq + 1))
            plan._counted += len(authored)
    return plan


def _only_to(msg: BusMessage, agent_id: str, keyring: Keyring | None) -> bool:
    """A post delivered to this agent alone (others' copies of a wider one stay theirs)."""
    fields = opened_fields(msg.data, keyring)
    payload = fields.get("payload") if fields is not None else None
    return isinstance(payload, dict) and payload.get("recipients") == [agent_id]
