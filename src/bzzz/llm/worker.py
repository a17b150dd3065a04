"""One task of a hosted agent, start to finish: prompt, tool loop, result, memory.

Kept apart from the runtime so that the runtime only schedules and the worker only works.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from bzzz import domain
from bzzz.agents.service import AgentService
from bzzz.config import Settings
from bzzz.conversations.service import ConversationService
from bzzz.errors import BzzzError, CostLimitExceeded, InvalidParameters, OpenAIError
from bzzz.llm.lifecycle import AgentState
from bzzz.llm.memory import Episode, MemoryStore, WorkingMemory, context_message
from bzzz.llm.optimizer import CostOptimizer
from bzzz.llm.service import LLMService
from bzzz.llm.tasks import ChatCompletionData, build_messages, parse_task_data, text_of
from bzzz.llm.tools import ToolBox
from bzzz.llm.types import ChatMessage, CompletionOptions, CompletionResult
from bzzz.schemas import PostInput, ThreadInput
from bzzz.store.database import Database
from bzzz.store.repository import Repository

if TYPE_CHECKING:
    from bzzz.llm.runtime import HostedAgent

logger = logging.getLogger(__name__)

RESULT_SUMMARY_CHARS = 600


@dataclass(slots=True)
class Outcome:
    """What a task's model calls added up to."""

    content: str = ""
    model: str = ""
    finish_reason: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_nanos: int = 0
    calls: int = 0
    tool_calls: list[str] = field(default_factory=list)

    def add(self, result: CompletionResult) -> None:
        """Count one model call."""
        self.content, self.model, self.finish_reason = (
            result.content,
            result.model,
            result.finish_reason,
        )
        self.prompt_tokens += result.usage.prompt_tokens
        self.completion_tokens += result.usage.completion_tokens
        self.cost_nanos += result.cost_nanos
        self.calls += 1

    def to_json(self, task_type: str) -> dict[str, Any]:
        """The result posted back (the seed's CompletionResult, summed over the task's calls)."""
        return {
            "task_type": task_type,
            "content": self.content,
            "model": self.model,
            "finishReason": self.finish_reason,
            "usage": {
                "promptTokens": self.prompt_tokens,
                "completionTokens": self.completion_tokens,
                "totalTokens": self.prompt_tokens + self.completion_tokens,
            },
            "cost": self.cost_nanos / 1e9,
            "model_calls": self.calls,
            "tool_calls": self.tool_calls,
        }


def task_project(task: domain.Task, agent_project: str | None) -> str:
    """The project a task belongs to: its data's, else the agent's; "" for none.

    An agent bound to a project refuses work for another one: its memory is that project's.
    """
    wanted = task.data.get("project")
    if wanted is not None and not isinstance(wanted, str):
        raise InvalidParameters("task_data.project must be a string")
    if agent_project and wanted and wanted != agent_project:
        raise InvalidParameters(
            f"this agent works on project '{agent_project}', not '{wanted}'",
            details={"project": wanted},
        )
    return wanted or agent_project or ""


class TaskWorker:
    """Does the work of tasks for hosted agents."""

    def __init__(
        self,
        settings: Settings,
        *,
        db: Database,
        llm: LLMService,
        memory: MemoryStore,
        optimizer: CostOptimizer,
        agents: AgentService,
        conversations: ConversationService,
    ) -> None:
        self._settings = settings
        self._db = db
        self._llm = llm
        self._memory = memory
        self._optimizer = optimizer
        self._agents = agents
        self._conversations = conversations
        self.max_tool_rounds = settings.openai.max_tool_rounds

    async def work(self, agent: HostedAgent, task_id: str) -> None:
        """Run one task and post its result or failure."""
        async with self._db.session() as session:
            task = await Repository(session).task(task_id)
        if task is None or task.agent_id != agent.id or task.status != "pending":
            return
        agent.running += 1
        collaborating = task.thread_id is not None
        agent.collaborating += int(collaborating)
        agent.settle()
        started = time.perf_counter()
        try:
            await self._attempt(agent, task, started)
        finally:
            agent.running -= 1
            agent.collaborating -= int(collaborating)
            agent.settle()

    async def _attempt(self, agent: HostedAgent, task: domain.Task, started: float) -> None:
        try:
            project = task_project(task, agent.spec.project)
        except BzzzError as exc:
            await self._fail(agent, task, exc, escalated=False)
            return
        try:
            outcome = await self._perform(agent, task, project)
        except (CostLimitExceeded, OpenAIError) as exc:
            # The agent cannot finish on its own: hand the task back to a human or the assigner.
            agent.go(AgentState.ESCALATING)
            await self._fail(agent, task, exc, escalated=True)
            agent.go(AgentState.ACTIVE)
            await self._remember(agent, task, project, exc.message, "escalated")
            return
        except BzzzError as exc:
            await self._fail(agent, task, exc, escalated=False)
            await self._remember(agent, task, project, exc.message, "failed")
            return
        elapsed_ms = round((time.perf_counter() - started) * 1000, 3)
        agent.completed += 1
        agent.response_ms.append(elapsed_ms)
        del agent.response_ms[:-1000]
        content = {
            "task_id": task.id,
            "result": outcome.to_json(task.type),
            "response_ms": elapsed_ms,
        }
        await self._report(agent, task, "task_complete", content)
        await self._remember(agent, task, project, outcome.content, "completed")

    async def _perform(self, agent: HostedAgent, task: domain.Task, project: str) -> Outcome:
        data = parse_task_data(task.type, task.data)
        working = WorkingMemory(task.id, project)
        memories = await self._memory.recall(agent.id, project, task.thread_id)
        working.notes["memories"] = [m.id for m in memories]
        messages = build_messages(
            agent.spec.template, task.type, data, task.description, context_message(memories)
        )
        chat = data if isinstance(data, ChatCompletionData) else None
        requested = (chat.model if chat else None) or agent.spec.model
        plan = self._optimizer.plan(task.type, messages, requested, text_of(data))
        working.notes["model"], working.notes["complexity"] = plan.model, plan.complexity
        options = CompletionOptions(
            messages=plan.messages,
            model=plan.model,
            temperature=chat.temperature if chat else None,
            max_tokens=chat.max_tokens if chat else None,
            stream=bool(chat and chat.stream),
        )
        toolbox = ToolBox(
            self._agents,
            self._conversations,
            agent.caller,
            db=self._db,
            agent_id=agent.id,
            project=project,
            agent_project=agent.spec.project,
            thread_id=task.thread_id,
        )
        return await self._tool_loop(agent, task, options, toolbox, working)

    async def _tool_loop(
        self,
        agent: HostedAgent,
        task: domain.Task,
        options: CompletionOptions,
        toolbox: ToolBox,
        working: WorkingMemory,
    ) -> Outcome:
        """Ask, run the tools the model calls, ask again: at most ``max_tool_rounds`` rounds."""
        outcome = Outcome()
        messages = list(options.messages)
        for round_ in range(self.max_tool_rounds + 1):
            last = round_ == self.max_tool_rounds
            options.messages = messages
            options.tools = [] if last else toolbox.specs
            result = await self._llm.complete(options, agent_id=agent.id, purpose=task.type)
            outcome.add(result)
            if not result.tool_calls or last:
                return outcome
            messages.append(_assistant_turn(result))
            for call in result.tool_calls:
                answer = await toolbox.run(call)
                outcome.tool_calls.append(call.name)
                working.tool_results.append(answer)
                messages.append({"role": "tool", "tool_call_id": call.id, "content": answer})
            messages, _ = self._optimizer.fit(messages)
        return outcome

    async def _fail(
        self, agent: HostedAgent, task: domain.Task, exc: BzzzError, *, escalated: bool
    ) -> None:
        agent.failed += 1
        logger.info("hosted agent %s failed task %s: %s", agent.id, task.id, exc.message)
        content = {
            "task_id": task.id,
            "error": exc.message,
            "code": str(exc.code),
            "escalated": escalated,
        }
        await self._report(agent, task, "task_failed", content)

    async def _report(
        self, agent: HostedAgent, task: domain.Task, kind: str, content: dict[str, Any]
    ) -> None:
        """Post the task's end to its thread when it has one, else to the assigner."""
        target = f"bzzz://{task.assigner}"
        if task.thread_id and await self._in_thread(agent, task.thread_id):
            params = PostInput(
                target_address=target,
                message_type=kind,
                content=content,
                thread_id=task.thread_id,
            )
            try:
                await self._conversations.post(agent.caller, params)
                return
            except BzzzError as exc:
                logger.info(
                    "could not post to thread %s (%s); to the assigner", task.thread_id, exc
                )
        params = PostInput(target_address=target, message_type=kind, content=content)
        try:
            await self._conversations.post(agent.caller, params)
        except BzzzError as exc:
            logger.error("hosted agent %s could not report task %s: %s", agent.id, task.id, exc)

    async def _in_thread(self, agent: HostedAgent, thread_id: str) -> bool:
        async with self._db.session() as session:
            thread = await Repository(session).thread(thread_id)
        if thread is None or thread.status == "completed":
            return False
        if agent.id in thread.active_participants:
            return True
        try:
            await self._conversations.thread(
                agent.caller, ThreadInput(action="join", thread_id=thread_id)
            )
        except BzzzError:
            return False
        return True

    async def _remember(
        self, agent: HostedAgent, task: domain.Task, project: str, text: str, outcome: str
    ) -> None:
        episode = Episode(
            participants=[agent.id, task.assigner],
            topic=(task.description or task.type)[:512],
            summary=text[:RESULT_SUMMARY_CHARS],
            outcome=outcome,
        )
        try:
            await self._memory.remember(agent.id, project, episode)
            if task.thread_id:
                await self._memory.remember(
                    agent.id, project, episode, kind="thread", thread_id=task.thread_id
                )
        except BzzzError as exc:
            logger.warning("hosted agent %s could not store a memory: %s", agent.id, exc)


def _assistant_turn(result: CompletionResult) -> ChatMessage:
    return {
        "role": "assistant",
        "content": result.content or None,
        "tool_calls": [call.to_message() for call in result.tool_calls],
    }
