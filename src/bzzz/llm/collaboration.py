"""A hosted agent starts a collaboration (the design's shouldCollaborate, initiateCollaboration).

A task whose data carries ``required_roles``, or whose estimated complexity passes
``agents.collaboration_threshold``, makes its agent open a collaborative review (the
``bzzz_thread`` action ``review``) with those roles. The agent waits for the reviewers'
findings, writes the result with the thread's history in its prompt and posts it as the
thread's decision; a disagreement makes it revise, until every participant agrees (the
projector records the consensus, completes the thread and the node emits the SLURP event) or
its replies run out. A required role with nobody available fails the task; a role wanted only
for complexity is dropped instead.
"""

from __future__ import annotations

import functools
import logging
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from bzzz import domain
from bzzz.errors import AgentNotFound, BzzzError, InvalidParameters
from bzzz.llm import prompts
from bzzz.llm.agency import Agency
from bzzz.llm.participation import ThreadWatch, posted, thread_state
from bzzz.llm.progress import ProgressReporter
from bzzz.llm.tasks import ChatCompletionData, _Data, build_messages, text_of
from bzzz.llm.turns import Outcome
from bzzz.llm.types import ChatMessage, CompletionOptions
from bzzz.schemas import PostInput, ThreadInput

if TYPE_CHECKING:
    from bzzz.llm.hosted import HostedAgent

logger = logging.getLogger(__name__)

_ROLE = re.compile(r"^[A-Za-z0-9._-]{1,128}$")
# Who reviews a task that is complex enough, when it names nobody.
DEFAULT_ROLES = {
    "architecture_analysis": ["architect", "reviewer"],
    "code_review": ["reviewer", "architect"],
    "documentation": ["documentation", "reviewer"],
    "chat_completion": ["reviewer"],
}
_WHY = {
    "closed": "the thread was closed",
    "stalled": "a participant ran out of replies (agents.max_replies_per_thread)",
}
DRAFT_REQUEST = (
    "Write your result for this task now, taking the thread's findings and objections into "
    "account. It is posted to the thread as your decision; the others agree or disagree."
)


class NoConsensus(BzzzError):
    """The collaboration ended without everyone agreeing."""

    def __init__(self, message: str, *, thread_id: str, thread_status: str, draft: str) -> None:
        super().__init__(message, details={"thread_id": thread_id, "thread_status": thread_status})
        self.thread_id = thread_id
        # As the agent last saw it: the escalation rules may escalate the thread a moment later.
        self.thread_status = thread_status
        self.draft = draft


@dataclass(slots=True)
class Collaborated:
    """A collaboration that reached consensus: the agreed result and where it was agreed."""

    outcome: Outcome
    thread_id: str
    consensus: dict[str, Any]


def required_roles(data: dict[str, Any]) -> list[str] | None:
    """The task data's ``required_roles`` (None when it names none)."""
    roles = data.get("required_roles")
    if roles is None:
        return None
    if (
        not isinstance(roles, list)
        or not 1 <= len(roles) <= 10
        or not all(isinstance(r, str) and _ROLE.match(r) for r in roles)
    ):
        raise InvalidParameters(
            "task_data.required_roles must be a list of 1 to 10 role names",
            details={"field": "task_data.required_roles"},
        )
    return list(dict.fromkeys(roles))


class Collaboration:
    """Runs the collaborations hosted agents start."""

    def __init__(self, agency: Agency, watch: ThreadWatch) -> None:
        self._agency = agency
        self._watch = watch
        settings = agency.settings.agents
        self.threshold = settings.collaboration_threshold
        self.timeout = settings.collaboration_timeout
        self.opened = 0

    def roles_for(self, task: domain.Task, complexity: float) -> tuple[list[str], bool]:
        """The roles to collaborate with and whether they are required ([] : work alone)."""
        named = required_roles(task.data)
        if named is not None:
            return named, True
        if task.thread_id is None and complexity > self.threshold:
            return list(DEFAULT_ROLES.get(task.type, ["reviewer"])), False
        return [], False

    async def run(
        self,
        agent: HostedAgent,
        task: domain.Task,
        project: str,
        data: _Data,
        roles: tuple[list[str], bool],
        progress: ProgressReporter,
    ) -> Collaborated | None:
        """Open the review, work to consensus; None when no wanted role has anyone."""
        thread_id = await self._open(agent, task, roles)
        if thread_id is None:
            return None
        self.opened += 1
        await progress.send({"status": "collaborating", "thread_id": thread_id})
        await self._watch.until(
            thread_id, lambda: self._findings_in(agent, thread_id), self.timeout
        )
        total = Outcome()
        while True:
            thread, messages = await thread_state(self._agency, thread_id)
            if thread is None:
                raise NoConsensus(
                    "the review thread is gone",
                    thread_id=thread_id,
                    thread_status="gone",
                    draft=total.content,
                )
            if posted(messages, agent.id) >= self._agency.max_replies:
                raise self._gave_up(thread, total.content)
            progress.restart()
            draft = await self._draft(agent, task, project, data, thread, messages, progress)
            total.absorb(draft)
            decision_id = await self._propose(agent, thread_id, draft.content)
            verdict = await self._watch.until(
                thread_id,
                functools.partial(self._verdict, agent, thread_id, decision_id),
                self.timeout,
            )
            if isinstance(verdict, dict):
                return Collaborated(total, thread_id, verdict)
            if verdict != "disagreed":
                thread, _ = await thread_state(self._agency, thread_id)
                raise NoConsensus(
                    f"no consensus in thread {thread_id}: "
                    + _WHY.get(str(verdict), "no answer in time"),
                    thread_id=thread_id,
                    thread_status=thread.status if thread else "gone",
                    draft=total.content,
                )

    async def _open(
        self, agent: HostedAgent, task: domain.Task, wanted: tuple[list[str], bool]
    ) -> str | None:
        roles, required = wanted
        while roles:
            params = ThreadInput(
                action="review",
                roles=roles,
                task_id=task.id,
                topic=(task.description or task.type)[:200],
                agent_id=agent.id,
            )
            try:
                opened = await self._agency.conversations.thread(agent.caller, params)
            except AgentNotFound as exc:
                if required:
                    raise
                empty = set(exc.details.get("roles_without_agents") or roles)
                roles = [r for r in roles if r not in empty]
                continue
            return str(opened["thread_id"])
        return None

    async def _findings_in(self, agent: HostedAgent, thread_id: str) -> bool | None:
        """True once every other participant spoke after the opening (or the thread ended)."""
        thread, messages = await thread_state(self._agency, thread_id)
        if thread is None or thread.status == "completed":
            return True
        spoke = {m.sender for m in messages if m.sender != agent.id}
        others = set(thread.active_participants) - {agent.id}
        return True if others <= spoke else None

    async def _verdict(
        self, agent: HostedAgent, thread_id: str, decision_id: str
    ) -> dict[str, Any] | str | None:
        """The consensus on the decision, 'disagreed', 'closed', or None while undecided."""
        thread, messages = await thread_state(self._agency, thread_id)
        if thread is None:
            return "closed"
        consensus = thread.consensus or {}
        if consensus.get("decision_message_id") == decision_id:
            return consensus
        if thread.status == "completed":
            return "closed"
        entry = next((e for e in thread.decision_log if e.get("message_id") == decision_id), None)
        if entry is None:
            return None
        others = set(thread.active_participants) - {agent.id}
        answered = set(entry.get("agreed", [])) | set(entry.get("disagreed", []))
        if others <= answered and entry.get("disagreed"):
            return "disagreed"
        silent = others - answered
        if any(posted(messages, o) >= self._agency.max_replies for o in silent):
            # Someone who has not answered has no replies left: waiting would be in vain.
            return "stalled"
        return None

    async def _draft(
        self,
        agent: HostedAgent,
        task: domain.Task,
        project: str,
        data: _Data,
        thread: domain.Thread,
        messages: list[domain.Message],
        progress: ProgressReporter,
    ) -> Outcome:
        agency = self._agency
        memory, _ids = await agency.context(agent, project, text_of(data), thread.id)
        chat = build_messages(
            agent.spec.template,
            task.type,
            data,
            task.description,
            memory,
            collaboration=agency.collaboration(agent, thread),
            thread_history=prompts.history(messages),
        )
        chat.append({"role": "user", "content": DRAFT_REQUEST})
        fitted = agency.turns.fit(chat)
        options = self._options(agent, task, data, fitted)
        toolbox = agency.toolbox(agent, project, thread.id)
        return await agency.turns.run(
            agent.id, options, toolbox, purpose=task.type, on_delta=progress.on_delta
        )

    def _options(
        self, agent: HostedAgent, task: domain.Task, data: _Data, messages: list[ChatMessage]
    ) -> CompletionOptions:
        chat = data if isinstance(data, ChatCompletionData) else None
        requested = (chat.model if chat else None) or agent.spec.model
        model, _score = self._agency.optimizer.choose_model(task.type, text_of(data), requested)
        streaming = self._agency.settings.agents.stream_progress
        return CompletionOptions(
            messages=messages,
            model=model,
            temperature=chat.temperature if chat else None,
            max_tokens=chat.max_tokens if chat else None,
            stream=streaming or bool(chat and chat.stream),
        )

    async def _propose(self, agent: HostedAgent, thread_id: str, text: str) -> str:
        body = text.strip() or "(no result)"
        posted_ = await self._agency.conversations.post(
            agent.caller,
            PostInput(
                target_address="bzzz://*",
                message_type="decision",
                content={"decision": body[:20_000], "text": body[:20_000], "kind": "result"},
                thread_id=thread_id,
                agent_id=agent.id,
            ),
        )
        return str(posted_["message_id"])

    def _gave_up(self, thread: domain.Thread, draft: str) -> NoConsensus:
        logger.info("hosted agent gave up on %s after its replies ran out", thread.id)
        return NoConsensus(
            f"no consensus in thread {thread.id} within "
            f"{self._agency.max_replies} messages per agent (agents.max_replies_per_thread)",
            thread_id=thread.id,
            thread_status=thread.status,
            draft=draft,
        )
