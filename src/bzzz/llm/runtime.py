"""The hosted-agent runtime: announces this node's LLM agents, runs the tasks assigned to them.

A task reaches an agent as a ``task_assignment`` (any node may send it); the projector tells the
runtime which tasks its agents got, each agent works at most ``max_tasks`` of them at a time, and
the result goes back to the assigner (or into the task's thread) as ``task_complete`` or
``task_failed``, like any agent's. The work itself is in ``worker.py``; the agents' part in
threads is in ``participation.py`` (when they answer) and ``agency.py`` (how); consensus they
reach becomes their project's knowledge (``knowledge.py``); the project's agreed facts reach
their prompts, and a thread they took part in is looked back on when it closes
(``retrospective.py``: an episode, and facts proposed).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

from bzzz.agents.service import AgentService
from bzzz.config import Settings
from bzzz.conversations.service import ConversationService
from bzzz.errors import BzzzError
from bzzz.eventlog import Caller, EventLog
from bzzz.llm.agency import Agency
from bzzz.llm.collaboration import Collaboration
from bzzz.llm.facts import FactSource
from bzzz.llm.hosted import HostedAgent
from bzzz.llm.knowledge import KnowledgeBase
from bzzz.llm.lifecycle import AgentState, Lifecycle
from bzzz.llm.memory import MemoryStore
from bzzz.llm.participation import ThreadResponder
from bzzz.llm.retrospective import Retrospectives
from bzzz.llm.roles import HostedAgentSpec, hosted_agents
from bzzz.llm.scope import ThreadScope
from bzzz.llm.service import LLMService
from bzzz.llm.worker import TaskWorker
from bzzz.network.envelope import Envelope
from bzzz.principal import ALL, node_principal
from bzzz.projector import Projector
from bzzz.schemas import AnnounceInput
from bzzz.store.database import Database
from bzzz.store.projection import Outcome
from bzzz.store.repository import Repository

logger = logging.getLogger(__name__)


class HostedRuntime:
    """Starts, feeds and stops the hosted agents of a node."""

    def __init__(
        self,
        settings: Settings,
        *,
        db: Database,
        projector: Projector,
        agents: AgentService,
        conversations: ConversationService,
        llm: LLMService,
        log: EventLog,
    ) -> None:
        self._db = db
        self._projector = projector
        self._agents = agents
        self.llm = llm
        self._log = log
        self.memory = MemoryStore(db, log)
        self.knowledge = KnowledgeBase(db, log)
        self.hosted: dict[str, HostedAgent] = {}
        self.agency = Agency(
            settings,
            db=db,
            llm=llm,
            memory=self.memory,
            knowledge=self.knowledge,
            agents=agents,
            conversations=conversations,
        )
        self.responder = ThreadResponder(self.agency, self.hosted)
        self.retrospectives = Retrospectives(self.agency, self.hosted, self.memory)
        self.collaboration = Collaboration(self.agency, self.responder.watch)
        self.worker = TaskWorker(self.agency, self.collaboration)
        self._learning: set[asyncio.Task[None]] = set()
        # Parsed at build time: a bad entry stops the node before it joins the network.
        self.specs = hosted_agents(settings.agents.default_roles, log.node_id)
        self._node_id = log.node_id
        self.disabled_reason: str | None = None
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._started = False
        self._stopping = False

    @property
    def facts(self) -> FactSource | None:
        """The project facts the agents read and propose (bzzz.knowledge; None: none)."""
        return self.agency.facts

    @facts.setter
    def facts(self, source: FactSource | None) -> None:
        self.agency.facts = source

    async def start(self) -> None:
        """Announce the configured agents and take their pending tasks; off without a model."""
        if self._started:
            raise RuntimeError("the hosted runtime is already started")
        self._started = True
        if not self.specs:
            self.disabled_reason = "no hosted agents configured ([agents] default_roles)"
            logger.info("hosted agents: none configured")
            return
        if not self.llm.enabled:
            self.disabled_reason = self.llm.disabled_reason
            logger.warning("hosted agents are off: %s", self.disabled_reason)
            return
        for spec in self.specs:
            await self._announce(spec)
        self._projector.add_outcome_listener(self._on_outcomes)
        self._projector.add_applied_listener(self._on_applied)
        for agent in self.hosted.values():
            await self._resume(agent)

    def _on_applied(self, envelopes: Sequence[Envelope]) -> None:
        if self._stopping:
            return
        self.responder.on_applied(envelopes)
        self.retrospectives.on_applied(envelopes)
        for env in envelopes:
            # The node that generated a consensus's SLURP event records what it taught.
            if env.type == "slurp.generated" and env.origin == self._log.node_id:
                task = asyncio.create_task(self._learn(env.payload), name="bzzz-learn")
                self._learning.add(task)
                task.add_done_callback(self._learning.discard)

    async def _learn(self, payload: dict[str, Any]) -> None:
        """A consensus's decisions and insights become its thread's project's knowledge."""
        thread_id = str(payload.get("thread_id"))
        event = payload.get("event")
        found = event.get("context") if isinstance(event, dict) else None
        context: dict[str, Any] = found if isinstance(found, dict) else {}
        projects = await ThreadScope(self._db, "", None).projects(thread_id)
        if len(projects) > 1:
            logger.info("thread %s mixes projects: its consensus is nobody's knowledge", thread_id)
            return
        decisions = [str(d) for d in context.get("decision_points") or []]
        insights = [str(i) for i in context.get("insights") or [] if str(i) not in decisions]
        entries = [("decision", d) for d in decisions] + [("insight", i) for i in insights]
        topic = str(context.get("topic") or "")
        entries = [(kind, f"{topic}: {text}" if topic else text) for kind, text in entries]
        try:
            await self.knowledge.record(next(iter(projects), ""), str(payload["event_id"]), entries)
        except BzzzError as exc:
            logger.warning("knowledge of thread %s not recorded: %s", thread_id, exc.message)

    async def _announce(self, spec: HostedAgentSpec) -> None:
        agent = HostedAgent(
            spec=spec,
            # The node's own principal, limited to the project configured for the agent.
            caller=Caller(
                f"hosted-{spec.agent_id}"[:128],
                node_principal(self._node_id, [spec.project] if spec.project else [ALL]),
            ),
            lifecycle=Lifecycle(spec.agent_id),
            slots=asyncio.Semaphore(spec.max_tasks),
        )
        params = AnnounceInput(
            agent_id=spec.agent_id,
            role=spec.template.role,
            capabilities=spec.template.capabilities,
            specialization=spec.template.specialization,
            max_tasks=spec.max_tasks,
            project=spec.project,
        )
        try:
            await self._agents.announce(agent.caller, params)
        except BzzzError as exc:
            agent.lifecycle.move(AgentState.TERMINATING)
            logger.error("hosted agent %s could not announce itself: %s", spec.agent_id, exc)
            return
        agent.lifecycle.move(AgentState.IDLE)
        self.hosted[spec.agent_id] = agent
        logger.info("hosted agent %s (%s) is on the network", spec.agent_id, spec.template.role)

    async def _resume(self, agent: HostedAgent) -> None:
        # Tasks assigned while this node was down are still pending: take them now.
        async with self._db.session() as session:
            pending = await Repository(session).tasks(agent.id, active_only=True, limit=1000)
        for task in reversed(pending):
            self._schedule(agent, task.id)

    def _on_outcomes(self, outcomes: dict[str, Outcome]) -> None:
        for outcome in outcomes.values():
            for recipient, task_id in (outcome.get("tasks") or {}).items():
                agent = self.hosted.get(recipient)
                if agent is not None:
                    self._schedule(agent, task_id)

    def _schedule(self, agent: HostedAgent, task_id: str) -> None:
        if self._stopping or task_id in self._tasks:
            return
        task = asyncio.create_task(self._run(agent, task_id), name=f"bzzz-hosted-{task_id}")
        self._tasks[task_id] = task

    async def _run(self, agent: HostedAgent, task_id: str) -> None:
        try:
            async with agent.slots:
                await self.worker.work(agent, task_id)
        except asyncio.CancelledError:
            raise
        except Exception:
            # One task's unexpected failure must not take the agent or the runtime down.
            logger.exception("hosted agent %s failed on task %s", agent.id, task_id)
        finally:
            self._tasks.pop(task_id, None)

    async def abort(self) -> None:
        """Cancel the work in progress without a word to the network (a crash, a failed start)."""
        self._stopping = True
        self._projector.remove_outcome_listener(self._on_outcomes)
        await self.responder.stop()
        await self.retrospectives.stop()
        tasks = [*self._tasks.values(), *self._learning]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def stop(self) -> None:
        """Cancel the work in progress, take the agents off the network."""
        await self.abort()
        for agent in self.hosted.values():
            agent.running = agent.collaborating = 0
            agent.settle()
            agent.go(AgentState.TERMINATING)
            try:
                await self._agents.session_ended(agent.caller, "hosted agent stopped")
            except BzzzError as exc:
                logger.warning("hosted agent %s could not say goodbye: %s", agent.id, exc)
        self.knowledge.close()
        await self.llm.close()

    def status(self) -> dict[str, Any]:
        """The runtime at a glance."""
        return {
            "enabled": bool(self.hosted),
            "reason": self.disabled_reason,
            "agents": [agent.status() for agent in self.hosted.values()],
            "tasks_in_progress": len(self._tasks),
            "collaboration": {
                "reviews_opened": self.collaboration.opened,
                "thread_replies": self.responder.replies,
                "knowledge_recorded": self.knowledge.recorded,
                "retrospectives": self.retrospectives.written,
                "facts_proposed": self.retrospectives.proposed,
                "context": self.agency.turns.context.to_json(),
            },
        }
