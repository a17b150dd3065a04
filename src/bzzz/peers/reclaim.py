"""Coming back from a false loss: a node that others declared lost announces its agents again.

Peers record a node as lost when its heartbeats stop reaching them (a pause, a partition). If
the node was alive all along, the log now says its agents are offline while their sessions are
still connected here. When this node applies a ``node.lost`` about itself, it puts exactly the
agents that envelope took offline back online (``agent.rejoined``: one envelope for up to
REJOIN_CHUNK agents of a project, where an announcement each made thousands of envelopes on
an already saturated network), and says it is online. A call of one of its sessions made in
between waits for that (``settled``) instead of finding no agent.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from bzzz import domain
from bzzz.agents.service import AgentService
from bzzz.errors import BzzzError
from bzzz.eventlog import EventLog
from bzzz.network.envelope import Envelope
from bzzz.store.projection import Outcome

logger = logging.getLogger(__name__)

# How long a session's call waits for its agents to be put back online.
SETTLE_WITHIN = 10.0
# Rounds of putting back the agents whose envelope failed, and the pause before each (times
# the round).
RECLAIM_ATTEMPTS = 3
RECLAIM_RETRY_AFTER = 1.0
# Agents put back online by one envelope.
REJOIN_CHUNK = 500


class Reclaimer:
    """Listens to the projector; puts this node's agents back online after a false node.lost."""

    def __init__(self, log: EventLog, agents: AgentService) -> None:
        self._log = log
        self._agents = agents
        self._about_me: set[str] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    def on_applied(self, envelopes: Sequence[Envelope]) -> None:
        """Note the node.lost envelopes that name this node."""
        for env in envelopes:
            if env.type == "node.lost" and env.payload.get("node_id") == self._log.node_id:
                self._about_me.add(env.id)

    def on_outcomes(self, outcomes: dict[str, Outcome]) -> None:
        """Re-announce the agents each noted envelope took offline."""
        for env_id in list(self._about_me):
            outcome = outcomes.get(env_id)
            if outcome is None:
                continue
            self._about_me.discard(env_id)
            went = [str(agent_id) for agent_id in outcome.get("offline", [])]
            task = asyncio.create_task(self._reclaim(went), name="bzzz-reclaim")
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _reclaim(self, agent_ids: list[str]) -> None:
        logger.warning(
            "the network took this node for lost; putting %d agents back online", len(agent_ids)
        )
        try:
            await self._log.emit(
                "node.status", "node", self._log.node_id, {"status": "online", "reason": "rejoined"}
            )
        except BzzzError as exc:
            logger.warning("could not say this node is online again: %s", exc)
        # One failed envelope must not leave the others offline: each chunk is emitted on its
        # own, and those that failed are tried again (a loaded node is the one most often
        # taken for lost, and the one whose acknowledgements come late).
        pending = agent_ids
        for attempt in range(1, RECLAIM_ATTEMPTS + 1):
            pending = await self._rejoin_chunks(pending)
            if not pending:
                return
            if attempt < RECLAIM_ATTEMPTS:
                await asyncio.sleep(RECLAIM_RETRY_AFTER * attempt)
        logger.error("could not put %d of this node's agents back online", len(pending))

    async def _rejoin_chunks(self, agent_ids: list[str]) -> list[str]:
        """Put the agents still offline here back online, REJOIN_CHUNK of a project an
        envelope; the ids whose envelope failed."""
        by_project: dict[str, list[domain.Agent]] = {}
        for agent_id in agent_ids:
            agent = self._agents.directory.get(agent_id)
            if agent is None or agent.online or agent.node_id != self._log.node_id:
                continue  # back already, gone, or another node's now
            by_project.setdefault(agent.project or "", []).append(agent)
        failed: list[str] = []
        first: BzzzError | None = None
        for agents in by_project.values():
            for start in range(0, len(agents), REJOIN_CHUNK):
                chunk = agents[start : start + REJOIN_CHUNK]
                try:
                    await self._agents.rejoin(chunk)
                except BzzzError as exc:
                    first = first or exc
                    failed.extend(agent.id for agent in chunk)
        if first is not None:
            logger.warning("could not put %d agents back online: %s", len(failed), first.message)
        return failed

    async def settled(self) -> bool:
        """Wait (bounded) for the agents being put back online; whether there were any."""
        if not self._tasks:
            return False
        await asyncio.wait(set(self._tasks), timeout=SETTLE_WITHIN)
        return True

    async def close(self) -> None:
        """Cancel the putting back still in flight."""
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
