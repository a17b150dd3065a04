"""What a hosted agent works with, and how it answers a thread.

``Agency`` bundles the services every piece of a hosted agent's work needs (the model under
the cost budget, the optimizer, memory and project knowledge, the conversation and agent
services it acts through) and writes the agent's answers to threads (see participation.py for
when it answers).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from bzzz import domain
from bzzz.agents.service import AgentService
from bzzz.config import Settings
from bzzz.conversations.service import ConversationService
from bzzz.conversations.summary import message_text
from bzzz.llm import prompts
from bzzz.llm.facts import FACT_CHARS, FACT_LIMIT, FactSource
from bzzz.llm.knowledge import KnowledgeBase
from bzzz.llm.memory import MemoryStore
from bzzz.llm.optimizer import CostOptimizer
from bzzz.llm.participation import (
    Answer,
    Trigger,
    answered,
    open_decision,
    parse_answer,
    post_answer,
    posted,
    reason_to_answer,
    thread_state,
)
from bzzz.llm.scope import ThreadScope
from bzzz.llm.service import LLMService
from bzzz.llm.tools import ToolBox
from bzzz.llm.turns import ModelTurns, Outcome
from bzzz.llm.types import ChatMessage, CompletionOptions
from bzzz.store.database import Database

if TYPE_CHECKING:
    from bzzz.llm.hosted import HostedAgent

logger = logging.getLogger(__name__)


class Agency:
    """The services of hosted agents' work, and their answers to threads."""

    def __init__(
        self,
        settings: Settings,
        *,
        db: Database,
        llm: LLMService,
        memory: MemoryStore,
        knowledge: KnowledgeBase,
        agents: AgentService,
        conversations: ConversationService,
    ) -> None:
        self.settings = settings
        self.db = db
        self.llm = llm
        self.memory = memory
        self.knowledge = knowledge
        self.agents = agents
        self.conversations = conversations
        self.optimizer = CostOptimizer(settings.cost, settings.openai)
        self.turns = ModelTurns(llm, self.optimizer, settings.openai.max_tool_rounds)
        self.max_replies = settings.agents.max_replies_per_thread
        # The project's agreed facts (bzzz.knowledge); the node sets it when it has the service.
        self.facts: FactSource | None = None

    def toolbox(self, agent: HostedAgent, project: str, thread_id: str | None) -> ToolBox:
        """The bzzz_* tools as this agent, within one project."""
        return ToolBox(
            self.agents,
            self.conversations,
            agent.caller,
            db=self.db,
            agent_id=agent.id,
            project=project,
            agent_project=agent.spec.project,
            thread_id=thread_id,
        )

    async def context(
        self, agent: HostedAgent, project: str, text: str, thread_id: str | None
    ) -> tuple[ChatMessage | None, list[str]]:
        """The project's agreed facts, the agent's memories and the project's most relevant
        knowledge, as one message (with the ids of what it carries)."""
        memories = await self.memory.recall(agent.id, project, thread_id)
        known = await self.knowledge.relevant(project, text, self.settings.agents.knowledge_limit)
        facts = await self.agreed_facts(project, text)
        ids = [str(f.get("id")) for f in facts] + [m.id for m in memories] + [k.id for k in known]
        return prompts.context_message(memories, known, facts), ids

    async def agreed_facts(self, project: str, text: str) -> list[dict[str, Any]]:
        """The project's agreed facts most relevant to ``text`` (none outside a project)."""
        if not project or self.facts is None:
            return []
        return await self.facts.for_prompt(project, text, limit=FACT_LIMIT, max_chars=FACT_CHARS)

    def collaboration(self, agent: HostedAgent, thread: domain.Thread) -> str:
        """The collaboration context of the agent's system prompt."""
        return prompts.collaboration_context(
            thread, self.agents.directory, agent.id, agent.spec.template.role
        )

    async def thread_project(self, agent: HostedAgent, thread: domain.Thread) -> str | None:
        """The project the agent answers a thread in (None: not for this agent).

        A thread of one project is that project's; a thread of no known project is answered
        outside any project (no memories, no knowledge); one mixing projects, or of another
        project than the agent's, is not answered at all.
        """
        found = await ThreadScope(self.db, "", None).projects(thread.id)
        if len(found) > 1:
            return None
        project = next(iter(found), "")
        if agent.spec.project and project and project != agent.spec.project:
            return None
        return project

    # --- answers ---------------------------------------------------------------------------

    async def answer(self, agent: HostedAgent, trigger: Trigger) -> bool:
        """Answer what the thread asks of the agent; False when it asks nothing (or no more)."""
        thread, messages = await thread_state(self, trigger.thread_id)
        if thread is None or thread.status in ("completed", "paused"):
            return False
        if agent.id not in thread.active_participants:
            return False
        if posted(messages, agent.id) >= self.max_replies:
            logger.info("hosted agent %s reached its replies in %s", agent.id, thread.id)
            return False
        found = self._asked(agent, thread, messages, trigger)
        if found is None:
            return False
        message, reason = found
        project = await self.thread_project(agent, thread)
        if project is None:
            logger.info("hosted agent %s does not answer %s: another project", agent.id, thread.id)
            return False
        outcome = await self._think(agent, thread, messages, message, reason, project)
        on_decision = message is not None and message.message_type == "decision"
        reply = parse_answer(outcome.content, message, on_decision)
        if reply is None:
            return False
        await self._post(agent, thread.id, reply)
        return True

    def _asked(
        self,
        agent: HostedAgent,
        thread: domain.Thread,
        messages: list[domain.Message],
        trigger: Trigger,
    ) -> tuple[domain.Message | None, str] | None:
        """The message to answer and why (an invitation answers the open decision, if any)."""
        if trigger.message_id is None:
            pending = [
                m
                for m in messages
                if m.message_type == "decision"
                and m.sender != agent.id
                and open_decision(thread, m.id) is not None
            ]
            reason = str(trigger.invitation)
            return (pending[-1] if pending else None), reason
        message = next((m for m in messages if m.id == trigger.message_id), None)
        if message is None or answered(messages, agent.id, message.id):
            return None
        why = reason_to_answer(thread, message, agent.id)
        return (message, why) if why else None

    async def _think(
        self,
        agent: HostedAgent,
        thread: domain.Thread,
        messages: list[domain.Message],
        message: domain.Message | None,
        reason: str,
        project: str,
    ) -> Outcome:
        # The whole thread but the message answered, which comes last as the question.
        before = [m for m in messages if message is None or m.id != message.id]
        text = message_text(message) if message is not None else thread.topic
        memory, _ids = await self.context(agent, project, f"{thread.topic} {text}", thread.id)
        chat: list[ChatMessage] = [
            {
                "role": "system",
                "content": prompts.system_prompt(
                    agent.spec.template, "thread", self.collaboration(agent, thread)
                ),
            }
        ]
        for extra in (memory, prompts.shared_context(thread)):
            if extra is not None:
                chat.append(extra)
        chat.extend(prompts.history(before))
        chat.append(prompts.answer_request(message, reason))
        model, _score = self.optimizer.choose_model("thread", text, agent.spec.model)
        options = CompletionOptions(messages=self.turns.fit(chat), model=model)
        toolbox = self.toolbox(agent, project, thread.id)
        return await self.turns.run(agent.id, options, toolbox, purpose="thread_reply")

    async def _post(self, agent: HostedAgent, thread_id: str, reply: Answer) -> None:
        await post_answer(self, agent, thread_id, reply)
