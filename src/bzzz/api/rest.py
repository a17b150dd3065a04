"""The HTTP API under /api/v1: agents, threads, tasks, escalations, costs, peers, metrics, webhooks.

Each route validates its query or body, builds the caller as an MCP call over HTTP would
(:func:`bzzz.api.handlers.caller_of`), calls one service method and shapes the answer, so the
grants that decide what an MCP tool shows decide what a route shows.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from starlette.requests import Request

from bzzz import domain
from bzzz.agents.overview import Overview
from bzzz.agents.page import require_project
from bzzz.agents.service import thread_project
from bzzz.api import answers as a
from bzzz.api.handlers import API, Operation, body_of, caller_of, query_of
from bzzz.api.whoosh import agent_address
from bzzz.conversations.humans import HumanDesk
from bzzz.domain import iso
from bzzz.errors import PermissionDenied, ThreadNotFound
from bzzz.eventlog import Caller
from bzzz.metrics.views import metrics_json
from bzzz.node.core import Node
from bzzz.principal import Scope
from bzzz.schemas import (
    AnnounceInput,
    FilterCriteria,
    GetInput,
    Identifier,
    LookupInput,
    ThreadInput,
    validate_input,
)
from bzzz.store.repository import Repository


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class AgentsQuery(_Model):
    """The lookup filters of GET /api/v1/agents."""

    address: str = Field("bzzz://*", min_length=1, max_length=1024)
    expertise: list[str] = Field(default_factory=list, max_length=32)
    availability: bool | None = None
    performance_threshold: float | None = Field(None, ge=0, le=1)
    limit: int = Field(100, ge=1, le=1000)
    project: Identifier | None = Field(None, description="only this project's agents")


class HistoryQuery(_Model):
    """How many entries each history list shows."""

    max_history: int = Field(10, ge=0, le=1000)


class ThreadQuery(HistoryQuery):
    """GET /api/v1/threads/{thread_id}: how many messages, and when (as_of)."""

    as_of: str | None = Field(
        None,
        max_length=64,
        description="the thread as it stood: an ISO 8601 time or a log sequence",
    )
    project: str | None = Field(
        None,
        pattern=r"^[A-Za-z0-9._-]{1,128}$",
        description="the thread's project, for a thread of a project this node does not "
        "serve (forwarded to a node that does)",
    )


class ReadableQuery(_Model):
    """GET /api/v1/threads and /api/v1/tasks: what the caller reads, or one agent's."""

    agent_id: Identifier | None = Field(
        None, description="only this agent's (default: every one the caller reads)"
    )
    limit: int = Field(100, ge=1, le=500)


class EscalationsQuery(_Model):
    """GET /api/v1/escalations."""

    open: bool = False
    limit: int = Field(100, ge=1, le=500)
    project: Identifier | None = Field(None, description="only this project's threads'")


class WebhooksQuery(_Model):
    """GET /api/v1/webhooks."""

    status: Literal["pending", "delivered", "dead"] | None = "dead"
    limit: int = Field(100, ge=1, le=1000)


class AnnounceBody(AnnounceInput):
    """POST /api/v1/agents: bzzz_announce's parameters (and the handle, to announce again)."""

    agent_handle: str | None = Field(None, max_length=512)


class ResolveBody(_Model):
    """POST /api/v1/escalations/{id}/resolve."""

    reason: str = Field(min_length=1, max_length=2000, description="the resolution")
    agent_id: Identifier | None = None
    agent_handle: str | None = Field(None, max_length=512)
    as_human: bool = Field(
        False,
        description="resolve as the caller's person (human-<name>, role 'human'), "
        "announced and joined to the thread by the node",
    )


class CostsQuery(_Model):
    """GET /api/v1/costs."""

    days: int = Field(30, ge=1, le=366, description="how many days the history shows")


class RedriveBody(_Model):
    """POST /api/v1/webhooks/redrive: the dead letters to send again (all when omitted)."""

    delivery_ids: list[int] | None = Field(None, min_length=1, max_length=1000)


def _require_node_admin(caller: Caller, action: str) -> None:
    if not caller.principal.is_admin_of(None):
        raise PermissionDenied(
            f"{action} is for admins of every project",
            details={"missing": "scope:admin", "principal": caller.principal.name},
        )


class Routes:
    """The /api/v1 handlers of one node."""

    def __init__(self, node: Node) -> None:
        self.node = node
        self.humans = HumanDesk(node.db, node.agents, node.conversations)
        self.overview = Overview(node.db, node.agents, node.node_id)

    async def list_agents(self, request: Request) -> dict[str, Any]:
        """Agents matching an address and the lookup filters (bzzz_lookup)."""
        query = query_of(request, AgentsQuery, lists=("expertise",))
        criteria = FilterCriteria(
            expertise=query.expertise,
            availability=query.availability,
            performance_threshold=query.performance_threshold,
        )
        params = LookupInput(
            semantic_address=query.address, filter_criteria=criteria, limit=query.limit
        )
        caller = caller_of(request)
        require_project(caller.principal, query.project)
        found = await self.node.agents.lookup(caller, params)
        if query.project is not None:
            # The dashboard's project filter: that project's agents only (a lookup of any
            # project also lists the agents of none).
            found["matches"] = [m for m in found["matches"] if m.get("project") == query.project]
            found["count"] = len(found["matches"])
        return found

    async def announce(self, request: Request) -> dict[str, Any]:
        """Announce an agent (bzzz_announce); 409 when its id is held by another caller."""
        body = await body_of(request, AnnounceBody)
        params = AnnounceInput.model_validate(body.model_dump(exclude={"agent_handle"}))
        return await self.node.front.announce(caller_of(request, body.agent_handle), params)

    async def get_agent(self, request: Request) -> dict[str, Any]:
        """One agent (bzzz_get of its address)."""
        query = query_of(request, HistoryQuery)
        address = agent_address(request.path_params["agent_id"])
        params = GetInput(address=address, max_history=query.max_history)
        return await self.node.front.get(caller_of(request), params)

    async def list_threads(self, request: Request) -> dict[str, Any]:
        """The threads the caller reads (a participant's principal, a project's admin), or one
        agent's (its /threads, as bzzz_get shows them); no agent needed to ask."""
        query = query_of(request, ReadableQuery)
        caller = caller_of(request)
        if query.agent_id is None:
            threads = await self.overview.threads(caller, query.limit)
        else:
            address = agent_address(query.agent_id) + "/threads"
            params = GetInput(address=address, max_history=query.limit)
            threads = (await self.node.front.get(caller, params))["content"]["threads"]
        return {"success": True, "threads": threads, "count": len(threads)}

    async def get_thread(self, request: Request) -> dict[str, Any]:
        """One thread with its messages, escalations and consensus (bzzz_get)."""
        query = query_of(request, ThreadQuery)
        thread_id = request.path_params["thread_id"]
        # ``project`` names where a thread this node does not hold lives (the front door).
        where = f"*@{query.project}" if query.project else "*"
        address = f"bzzz://{where}/threads/{thread_id}"
        asked = {"address": address, "max_history": query.max_history, "as_of": query.as_of}
        params = validate_input(GetInput, {k: v for k, v in asked.items() if v is not None})
        return await self.node.front.get(caller_of(request), params)

    async def list_tasks(self, request: Request) -> dict[str, Any]:
        """The tasks of the agents whose work the caller reads (owner, project admin), or of
        one agent (bzzz_get of its /tasks); no agent needed to ask."""
        query = query_of(request, ReadableQuery)
        caller = caller_of(request)
        if query.agent_id is None:
            tasks = await self.overview.tasks(caller, query.limit)
            return {"success": True, "agent_id": None, "tasks": tasks, "count": len(tasks)}
        address = agent_address(query.agent_id) + "/tasks"
        params = GetInput(address=address, max_history=query.limit)
        tasks = (await self.node.front.get(caller, params))["content"]["tasks"]
        return {"success": True, "agent_id": query.agent_id, "tasks": tasks, "count": len(tasks)}

    async def list_escalations(self, request: Request) -> dict[str, Any]:
        """Escalations of the threads the caller reads (participants, project admins)."""
        query = query_of(request, EscalationsQuery)
        caller = caller_of(request)
        async with self.node.db.session() as session:
            repo = Repository(session)
            found = await repo.escalations(open_only=query.open, limit=query.limit)
            require_project(caller.principal, query.project)
            readable = {
                thread_id
                for thread_id in {e.thread_id for e in found}
                if await self._reads(caller, await repo.thread(thread_id), query.project)
            }
        shown = await self.node.paging.attach(
            [e.to_json() for e in found if e.thread_id in readable]
        )
        return {"success": True, "escalations": shown, "count": len(shown)}

    async def _reads(
        self, caller: Caller, thread: domain.Thread | None, project: str | None = None
    ) -> bool:
        if thread is None or not caller.principal.may_see_project(thread_project(thread)):
            return False
        if project is not None and thread_project(thread) != project:
            return False
        return self.node.agents.may_read_thread(caller, thread)

    async def resolve_escalation(self, request: Request) -> dict[str, Any]:
        """Resolve an escalation: its thread's ``resolve`` (bzzz_thread), with the reason."""
        escalation_id = request.path_params["escalation_id"]
        body = await body_of(request, ResolveBody)
        caller = caller_of(request, body.agent_handle)
        # Before the escalation is looked up: 'read' is refused whichever escalation it names.
        caller.principal.require(Scope.WRITE, "resolving an escalation")
        if body.as_human:
            return await self.humans.resolve(caller, escalation_id, body.reason)
        async with self.node.db.session() as session:
            repo = Repository(session)
            escalation = await repo.escalation(escalation_id)
            thread = await repo.thread(escalation.thread_id) if escalation else None
        if escalation is None or not await self._reads(caller, thread):
            # An escalation belongs to a thread: one the caller cannot read does not exist.
            raise ThreadNotFound(
                f"no escalation '{escalation_id[:64]}'", details={"escalation_id": escalation_id}
            )
        params = ThreadInput(
            action="resolve",
            thread_id=escalation.thread_id,
            reason=body.reason,
            agent_id=body.agent_id,
        )
        resolved = await self.node.conversations.thread(caller, params)
        return {"success": True, "escalation_id": escalation_id, "thread": resolved["result"]}

    async def costs(self, request: Request) -> dict[str, Any]:
        """Model usage and spend against the limits (the bzzz://costs resource), by day."""
        query = query_of(request, CostsQuery)
        history = await self.node.llm.costs.history(query.days)
        return {"success": True} | await self.node.llm.usage() | {"history": history}

    async def peers(self, request: Request) -> dict[str, Any]:
        """The nodes this node hears (the bzzz://peers resource)."""
        return {"success": True, "peers": self.node.peers.view()}

    async def metrics(self, request: Request) -> dict[str, Any]:
        """The seed's six metrics and the design's success metrics, as JSON."""
        figures = await metrics_json(self.node)
        return {"success": True, "up": self.node.healthy, **figures}

    async def webhooks(self, request: Request) -> dict[str, Any]:
        """Webhook deliveries and this node's webhook subscriptions (active or dead): every one
        with its error for node admins, else the caller's own."""
        query = query_of(request, WebhooksQuery)
        caller = caller_of(request)
        admin = caller.principal.is_admin_of(None)
        views = await self.node.subscriptions.delivery_views(
            query.status, query.limit, detailed=admin
        )
        # This node's webhook subscriptions (a dead one's URL failed for webhooks.max_age).
        hooks = [
            s
            for s in await self.node.subscriptions.subscriptions()
            if s.callback_webhook is not None
            and s.node_id == self.node.node_id
            and (admin or s.session_id == caller.session_id)
        ]
        if not admin:
            mine = {s.id for s in hooks}
            views = [v for v in views if v["subscription_id"] in mine]
        subscriptions = [
            {
                "subscription_id": s.id,
                "callback_webhook": s.callback_webhook,
                "event_types": s.event_types,
                "status": s.status,
                "created_at": iso(s.created_at),
            }
            for s in hooks
        ]
        return {
            "success": True,
            "deliveries": views,
            "count": len(views),
            "subscriptions": subscriptions,
        }

    async def redrive(self, request: Request) -> dict[str, Any]:
        """Queue dead letters again (`bzzz webhooks redrive`): node admins only."""
        body = await body_of(request, RedriveBody)
        caller = caller_of(request)
        caller.principal.require(Scope.ADMIN, "redriving webhook deliveries")
        _require_node_admin(caller, "redriving webhook deliveries")
        ids = await self.node.subscriptions.redrive(body.delivery_ids)
        return {"success": True, "redriven": ids, "at": iso(domain.utcnow())}


def operations(node: Node) -> list[Operation]:
    """The /api/v1 routes (the event stream is in bzzz.api.stream)."""
    r = Routes(node)
    read = (400, 403)
    return [
        Operation("GET", f"{API}/agents", "Find agents (bzzz_lookup filters)", r.list_agents,
                  "agents", answer=a.LookupOutput, query=AgentsQuery, errors=read),
        Operation("POST", f"{API}/agents", "Announce an agent (bzzz_announce)", r.announce,
                  "agents",
                  answer=a.AnnounceOutput, body=AnnounceBody, status=201,
                  errors=(400, 403, 409, 429, 503)),
        Operation("GET", f"{API}/agents/{{agent_id}}", "One agent", r.get_agent, "agents",
                  answer=a.GetOutput,
                  query=HistoryQuery, errors=(400, 403, 404)),
        Operation("GET", f"{API}/threads", "The threads the caller reads (or one agent's)",
                  r.list_threads, "threads", answer=a.ThreadsAnswer, query=ReadableQuery,
                  errors=(400, 403, 404)),
        Operation("GET", f"{API}/threads/{{thread_id}}",
                  "One thread with its messages, escalations and consensus", r.get_thread,
                  "threads", answer=a.GetOutput, query=ThreadQuery, errors=(400, 403, 404)),
        Operation("GET", f"{API}/tasks", "The tasks the caller reads (or one agent's)",
                  r.list_tasks, "tasks",
                  answer=a.TasksAnswer, query=ReadableQuery, errors=(400, 403, 404)),
        Operation("GET", f"{API}/escalations", "Escalations of the threads the caller reads",
                  r.list_escalations, "escalations",
                  answer=a.EscalationsAnswer, query=EscalationsQuery, errors=read),
        Operation("POST", f"{API}/escalations/{{escalation_id}}/resolve",
                  "Resolve an escalation (bzzz_thread resolve of its thread)",
                  r.resolve_escalation, "escalations", answer=a.ResolveAnswer, body=ResolveBody,
                  errors=(400, 403, 404, 503)),
        Operation("GET", f"{API}/costs", "Model usage and spend, with a daily history", r.costs,
                  "node", answer=a.CostsAnswer, query=CostsQuery, errors=(400,)),
        Operation("GET", f"{API}/peers", "The peers this node hears", r.peers, "node",
                  answer=a.PeersAnswer, errors=()),
        Operation("GET", f"{API}/metrics", "The node's counters", r.metrics, "node",
                  answer=a.MetricsAnswer, errors=()),
        Operation("GET", f"{API}/webhooks", "Webhook deliveries (dead letters by default)",
                  r.webhooks, "webhooks",
                  answer=a.WebhooksAnswer, query=WebhooksQuery, errors=read),
        Operation("POST", f"{API}/webhooks/redrive", "Send dead letters again (admins)",
                  r.redrive, "webhooks",
                  answer=a.RedriveAnswer, body=RedriveBody, errors=(400, 403)),
    ]  # fmt: skip
