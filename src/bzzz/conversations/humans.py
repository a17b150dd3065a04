"""The human console: a person answers the escalations addressed to humans, in the thread.

A person is a principal granted the role ``human`` by name (``bzzz token create alice
--project shop --role human``). Such a principal reads the threads of its projects that
escalated to humans (a ``notify_human`` action; :meth:`AgentService.may_read_thread`), and takes
part in them as the agent ``human-<name>`` of role ``human``, which the node announces for it
(held by the principal, as any agent a token announces over HTTP). The agent joins the thread
before its first message, so the agents read the person's messages as any participant's, and
the consensus rule (every active participant agrees) counts the person's stance.
"""

from __future__ import annotations

import re
from typing import Any

from bzzz import domain
from bzzz.agents.service import AgentService, thread_project
from bzzz.conversations.service import ConversationService
from bzzz.errors import InvalidParameters, PermissionDenied, ThreadNotFound
from bzzz.eventlog import Caller
from bzzz.principal import Principal, Scope
from bzzz.schemas import AnnounceInput, PostInput, ThreadInput
from bzzz.store.database import Database
from bzzz.store.repository import Repository

_NOT_ID = re.compile(r"[^a-z0-9_-]+")
CAPABILITIES = ["human_judgement", "decision"]


def human_agent_id(who: Principal) -> str:
    """The agent a person acts as: ``human-<name>`` (the name made an id)."""
    name = _NOT_ID.sub("-", (who.name or who.id).lower()).strip("-_")
    return f"{domain.HUMAN_AGENT_PREFIX}{name[:100] or 'person'}"


def require_person(who: Principal, action: str) -> None:
    """PERMISSION_DENIED unless ``who`` is a named person with the role ``human``."""
    if not who.is_human or not who.authenticated:
        raise PermissionDenied(
            f"{action} is for people: a credential granted the role '{domain.HUMAN_ROLE}'",
            details={"missing": f"role:{domain.HUMAN_ROLE}", "principal": who.name or who.id},
        )


class HumanDesk:
    """What a person does in the console, through the services every other caller uses."""

    def __init__(self, db: Database, agents: AgentService, conversations: ConversationService):
        self._db = db
        self._agents = agents
        self._conversations = conversations

    def whoami(self, who: Principal) -> dict[str, Any]:
        """The caller's grants, and the agent it is in threads when it is a person."""
        person = who.is_human and who.authenticated
        return {
            "success": True,
            "principal": who.to_json(),
            "authenticated": who.authenticated,
            "human": {"agent_id": human_agent_id(who)} if person else None,
            "admin": who.is_admin_of(None),
        }

    async def post(
        self,
        caller: Caller,
        thread_id: str,
        message_type: str,
        text: str,
        reply_to: str | None = None,
        stance: str | None = None,
    ) -> dict[str, Any]:
        """Post into a thread as the caller's person (joining it first)."""
        agent_id = await self._participant(caller, thread_id, "posting as a person")
        params = PostInput.model_validate(
            {
                "thread_id": thread_id,
                "message_type": message_type,
                "content": {"text": text, "from": "human"},
                "reply_to": reply_to,
                "stance": stance,
                "agent_id": agent_id,
            }
        )
        return await self._conversations.post(caller, params)

    async def resolve(self, caller: Caller, escalation_id: str, reason: str) -> dict[str, Any]:
        """Resolve an escalation addressed to humans as the caller's person."""
        async with self._db.session() as session:
            escalation = await Repository(session).escalation(escalation_id)
        if escalation is None:
            raise ThreadNotFound(
                f"no escalation '{escalation_id[:64]}'", details={"escalation_id": escalation_id}
            )
        agent_id = await self._participant(
            caller, escalation.thread_id, "resolving an escalation as a person"
        )
        params = ThreadInput(
            action="resolve", thread_id=escalation.thread_id, reason=reason, agent_id=agent_id
        )
        resolved = await self._conversations.thread(caller, params)
        return {"success": True, "escalation_id": escalation_id, "thread": resolved["result"]}

    async def _participant(self, caller: Caller, thread_id: str, action: str) -> str:
        """The caller's person, announced and in the thread (which the caller must read)."""
        who = caller.principal
        require_person(who, action)
        who.require(Scope.WRITE, action)
        async with self._db.session() as session:
            thread = await Repository(session).thread(thread_id)
        if thread is None:
            raise ThreadNotFound(f"no thread '{thread_id}'", details={"thread_id": thread_id})
        self._agents.require_thread_reader(caller, thread)
        agent_id = await self._announce(caller, thread_project(thread))
        if agent_id not in thread.active_participants:
            if thread.status == "completed":
                raise InvalidParameters(
                    f"thread '{thread_id}' is completed", details={"thread_id": thread_id}
                )
            join = ThreadInput(action="join", thread_id=thread_id, agent_id=agent_id)
            await self._conversations.thread(caller, join)
        return agent_id

    async def _announce(self, caller: Caller, project: str | None) -> str:
        """Announce the person's agent in ``project`` unless it is online there already."""
        agent_id = human_agent_id(caller.principal)
        agent = self._agents.directory.get(agent_id)
        current = agent is not None and agent.online and agent.project == project
        if current and agent is not None and self._agents.holds(caller, agent):
            self._agents.leases.renew(agent.id)
            return agent_id
        params = AnnounceInput(
            agent_id=agent_id,
            role=domain.HUMAN_ROLE,
            capabilities=CAPABILITIES,
            specialization=f"a person in the human console ({caller.principal.name})"[:256],
            max_tasks=1,
            project=project,
        )
        await self._agents.announce(caller, params)
        return agent_id
