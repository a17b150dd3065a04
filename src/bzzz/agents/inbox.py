"""An agent's inbox with read marks: what it has not read yet, and marking messages read.

Who reads an agent's inbox is who reads it through bzzz_get (its owner — the token that
announced it, an agent token of it — and its project's admins). Marking read is a change on
the network's log (``agent.inbox_read``, applied in log order by every node), so it needs the
write scope besides; the REST route that marks is on the audit trail as every HTTP change is.
"""

from __future__ import annotations

from typing import Any

from bzzz import domain
from bzzz.agents.inbox_projection import (
    INBOX_APPLIERS,
    INBOX_READ_TYPE,
    MAX_MARK,
    unread_page,
)
from bzzz.agents.service import AgentService, raise_store_failure
from bzzz.agents.suggestions import agent_not_found
from bzzz.errors import InvalidParameters
from bzzz.eventlog import Caller, EventLog
from bzzz.principal import Scope
from bzzz.projects import NO_PROJECT
from bzzz.store.batch import register_appliers
from bzzz.store.database import Database
from bzzz.store.models import AgentRow
from bzzz.store.projection import ID_LENGTH

# Messages one read shows at most.
MAX_LIMIT = 500


class InboxService:
    """An agent's unread messages, and its read marks."""

    def __init__(self, db: Database, log: EventLog, agents: AgentService) -> None:
        register_appliers(INBOX_APPLIERS)
        self._db = db
        self._log = log
        self._agents = agents

    def _agent(self, caller: Caller, agent_id: str) -> domain.Agent:
        agent = self._agents.visible_agent(caller.principal, agent_id)
        if agent is None:
            raise agent_not_found(
                self._agents.directory,
                caller.principal,
                agent_id,
                f"no agent '{agent_id}' at that address",
            )
        self._agents.require_reader(caller, agent)
        if self._agents.holds(caller, agent):
            self._agents.leases.renew(agent.id)  # the agent itself asks: it is alive
        return agent

    async def read(
        self, caller: Caller, agent_id: str, *, unread: bool = True, limit: int = 20
    ) -> dict[str, Any]:
        """The newest ``limit`` messages of the agent's inbox (unread ones only if ``unread``),
        newest first, each with ``read``; ``unread`` counts every unread one."""
        if not 1 <= limit <= MAX_LIMIT:
            raise InvalidParameters(
                f"limit must be from 1 to {MAX_LIMIT}", details={"field": "limit"}
            )
        agent = self._agent(caller, agent_id)
        async with self._db.session() as session:
            row = await session.get(AgentRow, agent.id)
            metadata = dict(row.metadata_ or {}) if row is not None else {}
            messages, total = await unread_page(session, agent.id, metadata, limit, unread)
        return {
            "success": True,
            "agent_id": agent.id,
            "status": agent.status,
            "unread_only": unread,
            "messages": messages,
            "count": len(messages),
            "unread": total,
        }

    async def mark_read(
        self, caller: Caller, agent_id: str, message_ids: list[str]
    ) -> dict[str, Any]:
        """Mark messages of the agent's inbox read (ids not in it are left out)."""
        caller.principal.require(Scope.WRITE, "marking messages read")
        if not 1 <= len(message_ids) <= MAX_MARK:
            raise InvalidParameters(
                f"message_ids must name 1 to {MAX_MARK} messages",
                details={"field": "message_ids"},
            )
        if not all(isinstance(m, str) and 1 <= len(m) <= ID_LENGTH for m in message_ids):
            raise InvalidParameters(
                f"a message id is 1 to {ID_LENGTH} characters", details={"field": "message_ids"}
            )
        agent = self._agent(caller, agent_id)
        payload = {"agent_id": agent.id, "message_ids": list(dict.fromkeys(message_ids))}
        outcome = await self._log.emit(
            INBOX_READ_TYPE, "agent", agent.id, payload, project=agent.project or NO_PROJECT
        )
        raise_store_failure(outcome)
        marked = list(outcome.get("marked") or [])
        return {"success": True, "agent_id": agent.id, "marked": marked, "count": len(marked)}
