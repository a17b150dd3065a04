"""Which nodes are admitted to a network: a set every node derives from the log, in log order.

The set changes only through ``node.admitted`` and ``node.removed`` envelopes (subjects
``bzzz.<network>.admission.<node_id>``), and what each does depends only on the set before it,
so every node — and the CLI, reading those subjects alone — reaches the same set at the same
point of the log:

- A network without an admitted node (and without ``BZZZ_TRUSTED_NODES``) is open: every signed
  node's posts are applied, but none of its changes of who may do what (below). Its first
  admission must be a node admitting itself; from then on only admitted nodes admit or remove
  others.
- The nodes of the static list (``BZZZ_TRUSTED_NODES``) count as admitted from the start, so such
  a network is never open; the log cannot remove them.
- The last admitted node cannot be removed: a network never falls back to open.
- An envelope id counts once, where the log first holds it: a copy stored again later (a publish
  retried past the duplicate window) replays the first outcome and changes nothing.

With enforcement on (``bzzz.admission``, the default) an envelope from a node outside the set is
dropped and counted as ``not_admitted``. Whatever the setting, the envelopes that change who may
do what (``token.*``, ``node.*``, ``keys.*``, ``retention.*``: tokens, admission, node status,
network keys, retention and erasure) are applied only from admitted nodes — the one exception
being the first node of an open network admitting itself. So a holder of the NATS login who
signs with a key of its own mints no token, adds no key and erases nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from bzzz.network.envelope import Envelope
from bzzz.network.identity import origin_of

ADMITTED = "node.admitted"
REMOVED = "node.removed"
TYPES = frozenset({ADMITTED, REMOVED})
KIND = "admission"  # the subject kind: bzzz.<network>.admission.<node_id>
NOT_ADMITTED = "not_admitted"
# Types (by prefix) that change who may do what: only admitted nodes' are applied, always.
PRIVILEGED = ("token.", "node.", "keys.", "retention.")


def privileged(type_: str) -> bool:
    """Whether envelopes of this type are applied only from admitted nodes, whatever the setting."""
    return type_.startswith(PRIVILEGED)


@dataclass(frozen=True, slots=True)
class Change:
    """What one admission envelope does: its outcome and the member it adds or removes."""

    outcome: dict[str, Any]
    admit: tuple[str, str] | None = None  # (public key, node id)
    remove: str | None = None  # public key


def _refused(reason: str) -> Change:
    return Change({"ok": False, "reason": reason})


class Admission:
    """The admitted set of one network as of some point of its log."""

    def __init__(self, static: Iterable[str] = (), *, enforce: bool = False) -> None:
        self._static = frozenset(static)
        self.enforce = enforce
        self.members: dict[str, str] = {}  # public key -> node id
        self._decided: set[str] = set()  # ids of the admission envelopes decided so far
        # Moves with every change of the members: what was checked against the set before
        # (the agent directory's entries) is checked again.
        self.changes = 0

    def fresh(self) -> Admission:
        """The same network's set at the start of its log (the static list only)."""
        return Admission(self._static, enforce=self.enforce)

    @property
    def open(self) -> bool:
        """No node is admitted yet and no static list: every signed node is applied."""
        return not self.members and not self._static

    def is_member(self, public_key: str, node_id: str) -> bool:
        """Whether that node is admitted (the static list included); False on an open network."""
        return public_key in self.members or public_key in self._static or node_id in self._static

    def admits(self, public_key: str, node_id: str) -> bool:
        """Whether envelopes of that node are applied (an open network admits everyone)."""
        return self.open or self.is_member(public_key, node_id)

    def check(self, env: Envelope) -> str | None:
        """Why the envelope must be dropped (``not_admitted``), or None to apply it."""
        if self.is_member(env.origin_key, env.origin):
            return None
        if self.enforce and not self.open:
            return NOT_ADMITTED
        if privileged(env.type) and not (self.open and env.type == ADMITTED):
            # On an open network an admission is decided (``step``): only a node admitting
            # itself is taken, and a refusal says why.
            return NOT_ADMITTED
        return None

    def step(self, env: Envelope) -> Change | None:
        """Decide an admission envelope and apply its change; None for any other type and for
        an envelope decided before (the store replays its first outcome)."""
        if env.type not in TYPES or env.id in self._decided:
            return None
        change = self.decide(env)
        self.apply(change)
        self._decided.add(env.id)
        return change

    def decide(self, env: Envelope) -> Change:
        """What an admission envelope does to the set as it is now (nothing is changed)."""
        try:
            json.dumps(env.payload, allow_nan=False)
        except ValueError:
            return _refused("bad payload")
        if env.type == ADMITTED:
            return self._decide_admit(env)
        return self._decide_remove(env)

    def _decide_admit(self, env: Envelope) -> Change:
        key = env.payload.get("public_key")
        try:
            node_id, _ = origin_of(key) if isinstance(key, str) else ("", b"")
        except ValueError:
            node_id = ""
        if not node_id or not isinstance(key, str):
            return _refused("public_key is not an Ed25519 public key")
        if self.open:
            if key != env.origin_key:
                return _refused("the network has no admitted node yet: a node admits itself first")
        elif not self.is_member(env.origin_key, env.origin):
            return _refused("only an admitted node admits others")
        outcome = {"ok": True, "admitted": key, "node_id": node_id, "by": env.origin}
        return Change(outcome, admit=(key, node_id))

    def _decide_remove(self, env: Envelope) -> Change:
        target = env.payload.get("node")
        if not isinstance(target, str):
            return _refused("node must be a public key or a node id")
        if not self.is_member(env.origin_key, env.origin):
            return _refused("only an admitted node removes others")
        found = self._find(target)
        if found is None:
            if target in self._static:
                return _refused("a node of BZZZ_TRUSTED_NODES is removed from that list only")
            return _refused(f"{target} is not admitted")
        key, node_id = found
        if len(self.members) == 1 and not self._static:
            return _refused("the last admitted node cannot be removed")
        outcome = {"ok": True, "removed": key, "node_id": node_id, "by": env.origin}
        return Change(outcome, remove=key)

    def _find(self, target: str) -> tuple[str, str] | None:
        """The admitted (public key, node id) that ``target`` names, by key or by node id."""
        if target in self.members:
            return target, self.members[target]
        for key, node_id in self.members.items():
            if node_id == target:
                return key, node_id
        return None

    def apply(self, change: Change) -> None:
        """Make the change (a refused one changes nothing)."""
        if change.admit is not None:
            key, node_id = change.admit
            self.members[key] = node_id
        if change.remove is not None:
            self.members.pop(change.remove, None)
        self.changes += change.admit is not None or change.remove is not None

    def restore(self, outcomes: Iterable[tuple[str, Mapping[str, Any]]]) -> None:
        """Replay the recorded (envelope id, outcome) of applied admission envelopes, in log
        order."""
        for envelope_id, outcome in outcomes:
            self._decided.add(envelope_id)
            if not outcome.get("ok"):
                continue
            if isinstance(outcome.get("admitted"), str):
                self.members[outcome["admitted"]] = str(outcome.get("node_id", ""))
            elif isinstance(outcome.get("removed"), str):
                self.members.pop(outcome["removed"], None)
            self.changes += 1

    def snapshot(self) -> dict[str, Any]:
        """For status and the CLI: enforced or not, open or not, the admitted nodes."""
        return {
            "enforced": self.enforce,
            "open": self.open,
            "admitted": sorted(self.members.values()),
            "static": sorted(self._static),
        }
