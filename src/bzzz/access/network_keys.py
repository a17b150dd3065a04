"""The network's data keys as a service: list them (ids and ages) and rotate (a new key).

Rotation travels the log (``keys.added``, its payload sealed under the current key): every
node adds the key to its keyring in log order and seals later writes with it; older keys keep
opening what they sealed. Only an admin of every project rotates; nobody is ever shown a key.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from bzzz.errors import InvalidParameters
from bzzz.eventlog import EventLog
from bzzz.network.sealing import (
    KEY_ADDED,
    KEYS_KIND,
    Keyring,
    NetworkKey,
    key_payload,
    new_secret,
)
from bzzz.principal import ALL, Principal, Scope


@dataclass(frozen=True, slots=True)
class KeyInfo:
    """What is shown of a key: its id, when it was made, whether new writes use it."""

    id: str
    created_at: datetime
    current: bool

    def to_json(self, now: datetime) -> dict[str, object]:
        """The key as `bzzz keys list --json` prints it (never the key)."""
        return {
            "id": self.id,
            "created_at": self.created_at.isoformat(),
            "age_seconds": round((now - self.created_at).total_seconds(), 1),
            "current": self.current,
        }


class NetworkKeys:
    """Lists and rotates the keys content is sealed under."""

    def __init__(self, keyring: Keyring | None, log: EventLog | None) -> None:
        self._keyring = keyring
        self._log = log

    def _ring(self) -> Keyring:
        if self._keyring is None:
            raise InvalidParameters(
                "this data directory has no network key: encryption is off "
                "(encryption.enabled = false) or no node has run here yet"
            )
        return self._keyring

    def list(self, by: Principal) -> list[KeyInfo]:
        """Every key of the keyring, oldest first (admins of every project only)."""
        _require_network_admin(by, "listing the network keys")
        ring = self._ring()
        current = ring.current.id
        return [KeyInfo(k.id, k.created_at, k.id == current) for k in ring.all_keys()]

    async def rotate(self, by: Principal, now: datetime) -> KeyInfo:
        """Add a new key on every node of the network; new writes use it from then on."""
        _require_network_admin(by, "rotating the network key")
        ring = self._ring()
        if self._log is None:
            raise InvalidParameters("rotating a key needs the network: join it with a node")
        key = NetworkKey.of(new_secret(), now)
        outcome = await self._log.emit(KEY_ADDED, KEYS_KIND, key.id, key_payload(key))
        if not outcome.get("ok"):
            raise InvalidParameters(f"the network refused the new key: {outcome.get('reason')}")
        # The projector added it when it applied the envelope; this is for a node without one.
        ring.add(key)
        return KeyInfo(key.id, key.created_at, ring.current.id == key.id)


def _require_network_admin(by: Principal, action: str) -> None:
    by.require(Scope.ADMIN, action)
    by.require_project(ALL, action)
