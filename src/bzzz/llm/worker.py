"""One task of a hosted agent, start to finish: prompt, tool loop, result, memory.

Kept apart from the runtime so that the runtime only schedules and the worker only works. A
task that asks for other roles (or is complex enough) becomes a collaboration
(collaboration.py); a task assigned in a thread sees that thread's history; a streaming task's
partial text reaches the assigner as ``task_progress`` (progress.py).
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from bzzz import domain
from bzzz.errors import BzzzError, CostLimitExceeded, InvalidParameters, OpenAIError
from bzzz.llm import prompts
from bzzz.llm.agency import Agency
from bzzz.llm.collaboration import Collaborated, Collaboration, NoConsensus
from bzzz.llm.lifecycle import AgentState
from bzzz.llm.memory import Episode, WorkingMemory
from bzzz.llm.optimizer import complexity
from bzzz.llm.participation import thread_state
from bzzz.llm.progress import ProgressReporter
from bzzz.llm.tasks import ChatCompletionData, _Data, build_messages, parse_task_data, text_of
from bzzz.llm.turns import Outcome
from bzzz.llm.types import CompletionOptions
from bzzz.schemas import PostInput, ThreadInput
from bzzz.store.repository import Repository

if TYPE_CHECKING:
    from bzzz.llm.hosted import HostedAgent

logger = logging.getLogger(__name__)

RESULT_SUMMARY_CHARS = 600


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

    def __init__(self, agency: Agency, collaboration: Collaboration) -> None:
        self._agency = agency
        self._db = agency.db
        self._memory = agency.memory
        self._conversations = agency.conversations
        self.collaboration = collaboration
        self._agents_settings = agency.settings.agents

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
            outcome, extra = await self._perform(agent, task, project)
        except NoConsensus as exc:
            await self._no_consensus(agent, task, project, exc)
            return
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
            "result": outcome.to_json(task.type) | extra,
            "response_ms": elapsed_ms,
        }
        if "thread_id" in extra:
            content["thread_id"] = extra["thread_id"]
        await self._report(agent, task, "task_complete", content)
        await self._remember(agent, task, project, outcome.content, "completed")

    async def _perform(
        self, agent: HostedAgent, task: domain.Task, project: str
    ) -> tuple[Outcome, dict[str, Any]]:
        data = parse_task_data(task.type, task.data)
        progress = self._progress(agent, task)
        score = complexity(task.type, text_of(data))
        roles = self.collaboration.roles_for(task, score)
        if roles[0]:
            agent.collaborating += 1
            agent.settle()
            try:
                done = await self.collaboration.run(agent, task, project, data, roles, progress)
            finally:
                agent.collaborating -= 1
            if done is not None:
                return done.outcome, _agreed(done)
        return await self._alone(agent, task, project, data, progress), {}

    async def _alone(
        self,
        agent: HostedAgent,
        task: domain.Task,
        project: str,
        data: _Data,
        progress: ProgressReporter,
    ) -> Outcome:
        agency = self._agency
        working = WorkingMemory(task.id, project)
        memory, ids = await agency.context(agent, project, text_of(data), task.thread_id)
        working.notes["memories"] = ids
        collaboration, history = None, []
        if task.thread_id is not None:
            thread, messages = await thread_state(agency, task.thread_id)
            if thread is not None:
                collaboration = agency.collaboration(agent, thread)
                history = prompts.history(m for m in messages if m.id != task.message_id)
        messages_ = build_messages(
            agent.spec.template,
            task.type,
            data,
            task.description,
            memory,
            collaboration=collaboration,
            thread_history=history,
        )
        chat = data if isinstance(data, ChatCompletionData) else None
        requested = (chat.model if chat else None) or agent.spec.model
        plan = agency.optimizer.plan(task.type, messages_, requested, text_of(data))
        if history:
            agency.turns.context.count(messages_, plan.messages)
        working.notes["model"], working.notes["complexity"] = plan.model, plan.complexity
        options = CompletionOptions(
            messages=plan.messages,
            model=plan.model,
            temperature=chat.temperature if chat else None,
            max_tokens=chat.max_tokens if chat else None,
            stream=self._agents_settings.stream_progress or bool(chat and chat.stream),
        )
        toolbox = agency.toolbox(agent, project, task.thread_id)
        return await agency.turns.run(
            agent.id,
            options,
            toolbox,
            purpose=task.type,
            tool_results=working.tool_results,
            on_delta=progress.on_delta,
        )

    def _progress(self, agent: HostedAgent, task: domain.Task) -> ProgressReporter:
        async def post(content: dict[str, Any]) -> None:
            params = PostInput(
                target_address=report_address(task),
                message_type="task_progress",
                content=content,
                agent_id=agent.id,
            )
            await self._conversations.post(agent.caller, params)

        return ProgressReporter(task.id, post, self._agents_settings.progress_interval)

    async def _no_consensus(
        self, agent: HostedAgent, task: domain.Task, project: str, exc: NoConsensus
    ) -> None:
        agent.failed += 1
        logger.info("hosted agent %s: task %s: %s", agent.id, task.id, exc.message)
        content = {
            "task_id": task.id,
            "error": exc.message,
            "code": "NO_CONSENSUS",
            "escalated": False,
            "thread_id": exc.thread_id,
            "thread_status": exc.thread_status,
            "draft": exc.draft[:4_000],
        }
        await self._report(agent, task, "task_failed", content)
        await self._remember(agent, task, project, exc.message, "no_consensus")

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
        target = report_address(task)
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


def report_address(task: domain.Task) -> str:
    """Where a task's updates go: its assigner's address.

    A principal that assigned it itself (``token:…``) has no address: the update names the
    assignee, reaches nobody, and the principal reads the task (``GET /api/v1/tasks``).
    """
    return f"bzzz://{task.assigner if domain.names_an_agent(task.assigner) else task.agent_id}"


def _agreed(done: Collaborated) -> dict[str, Any]:
    consensus = done.consensus
    return {
        "thread_id": done.thread_id,
        "consensus": {
            "decision_message_id": consensus.get("decision_message_id"),
            "agreed_by": consensus.get("agreed_by"),
            "confidence": consensus.get("confidence"),
        },
    }
