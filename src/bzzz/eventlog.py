"""The services' one way to change state: seal an envelope, publish it, await its outcome."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from bzzz.clock import Clock, SystemClock
from bzzz.errors import NotServed
from bzzz.network import subjects
from bzzz.network.envelope import seal
from bzzz.network.identity import NodeIdentity
from bzzz.network.sealing import Keyring
from bzzz.principal import ANONYMOUS, LOCAL, Principal
from bzzz.projector import Projector
from bzzz.projects import ALL_PROJECTS, NO_PROJECT, ProjectSet
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
        projects: ProjectSet = ALL_PROJECTS,
    ) -> None:
        self.identity = identity
        # The projects this node serves: it publishes no content of another (NotServed).
        self.projects = projects
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
        project: str | None = None,
    ) -> Outcome:
        """Publish one change and return its outcome.

        ``project`` (the content's project; NO_PROJECT for an agent that declared none) puts
        it on ``bzzz.<network>.p.<project>.<kind>.<key>``; without it the kind must be
        network-wide (``bzzz.<network>.<kind>.<key>``, see ``network.subjects``). Content
        of a project this node does not serve raises NotServed before anything is published.
        ``envelope_id`` (with ``now``) lets several nodes that witness one fact publish the
        same envelope id, so the log keeps it once.
        """
        if project is not None:
            self.require_served(project)
        subject = subjects.subject(self.network, kind, key, project)
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

    def require_served(self, project: str | None) -> None:
        """NotServed unless this node serves ``project`` (None and NO_PROJECT: always)."""
        if not self.projects.serves(project):
            raise NotServed(project or NO_PROJECT)


# The local user of the data directory (CLI commands, tests): an admin of every project.
LOCAL_CALLER = Caller("local", LOCAL)
