"""The services' one way to change state: seal an envelope, publish it, await its outcome."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from bzzz.clock import Clock, SystemClock
from bzzz.network.envelope import seal
from bzzz.network.identity import NodeIdentity
from bzzz.network.sealing import Keyring
from bzzz.principal import ANONYMOUS, LOCAL, Principal
from bzzz.projector import Projector
from bzzz.store.projection import Outcome


@dataclass(frozen=True, slots=True)
class Caller:
    """Who calls a service: a session key, the principal behind it, and an agent handle.

    ``session_id`` keys the agents the call may act as: an MCP session, a stdio process, a
    principal (``principal-…``) or a minted handle (``handle-…``). ``handle`` is the
    ``agent_handle`` the call passed, if any.
    """

    session_id: str
    principal: Principal = ANONYMOUS
    handle: str | None = None


class EventLog:
    """Seals envelopes with the node's key and waits for the projection's outcome."""

    def __init__(
        self,
        identity: NodeIdentity,
        network: str,
        projector: Projector,
        clock: Clock | None = None,
        keyring: Keyring | None = None,
    ) -> None:
        self.identity = identity
        # Content payloads are sealed under the network key before they leave the process.
        self.keyring = keyring
        self.network = network
        self.projector = projector
        # Envelopes are stamped by the node's clock, so time-based rules see one time line.
        self.clock: Clock = clock or SystemClock()

    @property
    def node_id(self) -> str:
        """The origin node of every envelope sealed here."""
        return self.identity.node_id

    async def emit(
        self,
        type_: str,
        kind: str,
        key: str,
        payload: dict[str, Any],
        *,
        envelope_id: str | None = None,
        now: datetime | None = None,
    ) -> Outcome:
        """Publish one change on ``bzzz.<network>.<kind>.<key>`` and return its outcome.

        ``envelope_id`` (with ``now``) lets several nodes that witness one fact publish the
        same envelope id, so the log keeps it once.
        """
        subject = f"bzzz.{self.network}.{kind}.{key}"
        envelope = seal(
            self.identity,
            self.network,
            type_,
            subject,
            payload,
            now=now or self.clock.now(),
            envelope_id=envelope_id,
            keyring=self.keyring,
        )
        return await self.projector.submit(envelope)


# The local user of the data directory (CLI commands, tests): an admin of every project.
LOCAL_CALLER = Caller("local", LOCAL)
