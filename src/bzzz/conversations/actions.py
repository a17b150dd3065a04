"""What an escalation does: tell a human, invite an expert or an architect, open a decision thread.

Each action either returns what it did or raises ``EscalationFailed``; the engine records both on
the escalation and retries failures.

Everything an action does stays in the thread's project: the agents it invites or names are of
that project (:func:`best_available`), a decision thread is that project's, and an
``escalate_to_architect`` that finds no architect there escalates to humans instead
(``notify_human``; the result says ``escalated_to: human``).
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

import httpx

from bzzz import domain
from bzzz.agents.service import thread_project, thread_project_in
from bzzz.config import EscalationSettings
from bzzz.conversations.candidates import best_available
from bzzz.domain import iso
from bzzz.errors import ConfigError, EscalationFailed
from bzzz.eventlog import EventLog
from bzzz.events.webhooks import SIGNATURE_HEADER, sign_body
from bzzz.projects import NO_PROJECT
from bzzz.store.database import Database
from bzzz.store.directory import AgentDirectory
from bzzz.store.repository import Repository

logger = logging.getLogger(__name__)

# The result of an action that turned to humans instead (no architect in the project).
HUMAN_INSTEAD = "notify_human"


def human_secret(settings: EscalationSettings) -> str | None:
    """The key the human channel's receiver checks X-Bzzz-Signature with (None: no channel).

    A channel without a configured secret is refused: a key derived from the node's private
    secret would be one the receiver is never shown, so it could verify nothing.
    """
    if not settings.human_channel_url:
        return None
    if settings.human_channel_secret is None:
        raise ConfigError(
            "invalid setting escalation.human_channel_secret "
            "(BZZZ_ESCALATION__HUMAN_CHANNEL_SECRET): required when "
            "escalation.human_channel_url is set; the receiver checks X-Bzzz-Signature with it"
        )
    return settings.human_channel_secret.get_secret_value()


class EscalationActions:
    """Carries out the four action types of the API reference."""

    def __init__(
        self,
        db: Database,
        log: EventLog,
        directory: AgentDirectory,
        settings: EscalationSettings,
    ) -> None:
        self._db = db
        self._log = log
        self._directory = directory
        self._settings = settings
        # Checked now, so that a node with an unverifiable channel does not start.
        self._human_secret = human_secret(settings)

    async def perform(
        self, escalation: domain.Escalation, action: dict[str, Any]
    ) -> dict[str, Any]:
        """Carry out one action; raise EscalationFailed when it cannot be done now."""
        async with self._db.session() as session:
            thread = await Repository(session).thread(escalation.thread_id)
        if thread is None:
            raise EscalationFailed(f"thread {escalation.thread_id} is gone")
        kind = action["type"]
        if kind == "notify_human":
            return await self._notify_human(escalation, thread, action)
        if kind == "request_expert":
            return await self._request_expert(escalation, thread, action)
        if kind == "escalate_to_architect":
            return await self._escalate_to_architect(escalation, thread, action)
        if kind == "create_decision_thread":
            return await self._decision_thread(escalation, thread, action)
        raise EscalationFailed(f"unknown action type {kind!r}")

    # --- notify_human --------------------------------------------------------------------------

    async def _notify_human(
        self, escalation: domain.Escalation, thread: domain.Thread, action: dict[str, Any]
    ) -> dict[str, Any]:
        url, secret = self._settings.human_channel_url, self._human_secret
        if not url or secret is None:
            return {"delivered": False, "channel": None, "listed_by": "bzzz escalations"}
        body = json.dumps(
            {
                "type": "escalation",
                "target": action.get("target"),
                "priority": action.get("priority"),
                "escalation": escalation.to_json(),
                "thread": {
                    "id": thread.id,
                    "topic": thread.topic,
                    "status": thread.status,
                    "participants": thread.active_participants,
                    "last_activity": iso(thread.last_activity),
                },
            },
            separators=(",", ":"),
        ).encode()
        headers = {
            "Content-Type": "application/json",
            SIGNATURE_HEADER: sign_body(secret, int(time.time()), body),
            "X-Bzzz-Escalation-Id": escalation.id,
            "User-Agent": "bzzz-escalations/1",
        }
        try:
            async with httpx.AsyncClient(timeout=self._settings.timeout) as client:
                response = await client.post(url, content=body, headers=headers)
        except httpx.HTTPError as exc:
            raise EscalationFailed(f"human channel unreachable: {type(exc).__name__}") from exc
        if not 200 <= response.status_code < 300:
            raise EscalationFailed(f"human channel answered HTTP {response.status_code}")
        return {"delivered": True, "channel": url, "status_code": response.status_code}

    # --- invitations ---------------------------------------------------------------------------

    async def _invite(self, escalation: domain.Escalation, thread_id: str, agent_id: str) -> None:
        outcome = await self._log.emit(
            "thread.joined",
            "thread",
            thread_id,
            {"thread_id": thread_id, "agent_id": agent_id, "invited_by": escalation.id},
            project=await thread_project_in(self._db, thread_id),
        )
        if not outcome["ok"]:
            raise EscalationFailed(f"could not invite {agent_id}: {outcome['reason']}")

    async def _request_expert(
        self, escalation: domain.Escalation, thread: domain.Thread, action: dict[str, Any]
    ) -> dict[str, Any]:
        expertise = list(
            action.get("expertise") or ([action["target"]] if action.get("target") else [])
        )
        if not expertise:
            raise EscalationFailed("request_expert needs expertise (or a target)")
        found = best_available(
            self._directory,
            project=thread_project(thread),
            expertise=expertise,
            required=True,
            exclude=set(thread.active_participants),
        )
        if not found:
            raise EscalationFailed(
                f"no available agent with expertise {', '.join(expertise)} in the thread's project"
            )
        await self._invite(escalation, thread.id, found[0].id)
        return {"invited": found[0].id, "expertise": expertise}

    async def _escalate_to_architect(
        self, escalation: domain.Escalation, thread: domain.Thread, action: dict[str, Any]
    ) -> dict[str, Any]:
        role = action.get("target") or "architect"
        found = best_available(
            self._directory,
            project=thread_project(thread),
            role=role,
            exclude=set(thread.active_participants),
        )
        if not found:
            # Nobody of the project to ask: the people of the project decide.
            told = await self._notify_human(escalation, thread, action)
            return told | {"invited": None, "role": role, "escalated_to": "human"}
        await self._invite(escalation, thread.id, found[0].id)
        return {"invited": found[0].id, "role": role}

    # --- create_decision_thread ------------------------------------------------------------------

    def _named(self, name: str, project: str | None, exclude: set[str]) -> domain.Agent | None:
        """An agent of ``project`` by id, else the best available one of that role, else of
        that expertise."""
        agent = self._directory.get(name)
        if agent is not None and agent.online and agent.project == project:
            return agent
        found = best_available(
            self._directory, project=project, role=name, exclude=exclude
        ) or best_available(
            self._directory, project=project, expertise=[name], required=True, exclude=exclude
        )
        return found[0] if found else None

    async def _decision_thread(
        self, escalation: domain.Escalation, thread: domain.Thread, action: dict[str, Any]
    ) -> dict[str, Any]:
        members = list(thread.active_participants)
        project = thread_project(thread)
        missing = []
        for name in action.get("participants") or []:
            agent = self._named(name, project, set(members))
            if agent is None:
                missing.append(name)
            elif agent.id not in members:
                members.append(agent.id)
        if missing:
            raise EscalationFailed(
                f"no available agent for {', '.join(missing)} in the thread's project"
            )
        # A fixed id: a retried action finds the thread it created before instead of a second.
        thread_id = f"thread-decision-{escalation.id.removeprefix('esc-')}"
        outcome = await self._log.emit(
            "thread.created",
            "thread",
            thread_id,
            {
                "thread_id": thread_id,
                "topic": f"Decision: {thread.topic}"[:512],
                "creator": thread.creator,
                "participants": members,
                "metadata": {
                    "kind": "decision",
                    # The parent's project: its members see and act in it as in the parent.
                    "project": project,
                    "parent_thread_id": thread.id,
                    "escalation_id": escalation.id,
                },
                "shared_context": {
                    "parent_thread_id": thread.id,
                    "parent_topic": thread.topic,
                    "reason": escalation.reason,
                },
            },
            project=project or NO_PROJECT,
        )
        if not outcome["ok"] and outcome.get("reason") != "thread exists":
            raise EscalationFailed(f"could not open the decision thread: {outcome['reason']}")
        return {"thread_id": thread_id, "participants": members}
