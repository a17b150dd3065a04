"""The dashboard's own reads: an agent's page, the map of who talks to whom, its edges, and the
projects a viewer may filter by.

Thin as every route: validate the query, build the caller, call one service method
(``bzzz.agents.page.AgentPage``, ``bzzz.agents.talkmap.TalkMap``), which applies the grants.
These reads show private content (an inbox, messages), so each one is recorded on the audit
trail with its outcome, as the MCP tools' calls are.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from starlette.requests import Request

from bzzz.agents.page import AgentPage
from bzzz.agents.talkmap import TalkMap
from bzzz.api.answers import Answer, _Open
from bzzz.api.handlers import API, Operation, caller_of, query_of
from bzzz.audit.records import Action, digest, stamp
from bzzz.errors import BzzzError
from bzzz.eventlog import Caller
from bzzz.node.core import Node
from bzzz.schemas import Identifier

Window = Literal["15m", "1h", "24h"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PageQuery(_Model):
    """GET /api/v1/agents/{agent_id}/page."""

    project: Identifier | None = Field(None, description="the project the page is narrowed to")


class MapQuery(_Model):
    """GET /api/v1/map."""

    window: Window = Field("1h", description="count messages of the last 15 min, 1 h or 24 h")
    project: Identifier | None = Field(None, description="only this project's agents")


class EdgeQuery(MapQuery):
    """GET /api/v1/map/edge: the messages between two agents."""

    a: Identifier = Field(description="one agent of the edge")
    b: Identifier = Field(description="the other agent")


class Listing(_Open):
    """A part of the page the viewer may or may not read."""

    readable: bool


class AgentPageAnswer(Answer):
    """An agent's page: agent, lease, performance, inbox, tasks, reservations, threads."""

    agent: dict[str, Any]
    lease: dict[str, Any]
    performance: dict[str, Any]
    inbox: Listing
    tasks: Listing
    reservations: list[dict[str, Any]]
    threads: list[dict[str, Any]]


class MapEdge(_Open):
    """Two agents and how many messages and task assignments went between them."""

    source: str
    target: str
    messages: int
    tasks: int


class MapAnswer(Answer):
    """The map: agents, edges with counts, thread groups."""

    window: str
    nodes: list[dict[str, Any]]
    edges: list[MapEdge]
    groups: list[dict[str, Any]]
    truncated: bool


class EdgeAnswer(Answer):
    """The messages of one edge the viewer may read, and how many it may not."""

    messages: list[dict[str, Any]]
    hidden: int


class ProjectsAnswer(Answer):
    """The projects the viewer may filter by."""

    projects: list[str]
    every: bool


def operations(node: Node) -> list[Operation]:
    """The dashboard's agent page, map and project routes."""
    pages = AgentPage(node.db, node.agents, node.node_id, node.clock)
    talk = TalkMap(node.db, node.agents, node.clock)

    async def audited(
        request: Request,
        params: dict[str, Any],
        read: Callable[[Caller], Awaitable[Any]],
    ) -> Any:
        caller = caller_of(request)
        outcome = "ok"
        try:
            return await read(caller)
        except BzzzError as exc:
            outcome = exc.code.value
            raise
        finally:
            node.audit.record(
                Action(
                    at=stamp(node.clock.now()),
                    principal=caller.principal.id[:256],
                    session="http",
                    action=f"http:GET {request.url.path}"[:128],
                    outcome=outcome[:64],
                    digest=digest(params),
                    target=str(request.url.path)[:512],
                )
            )

    async def agent_page(request: Request) -> dict[str, Any]:
        query = query_of(request, PageQuery)
        agent_id = request.path_params["agent_id"]
        return await audited(  # type: ignore[no-any-return]
            request,
            {"agent_id": agent_id, "project": query.project},
            lambda caller: pages.page(caller, agent_id, query.project),
        )

    async def talk_map(request: Request) -> dict[str, Any]:
        query = query_of(request, MapQuery)
        return await talk.map(caller_of(request), query.window, query.project)

    async def talk_edge(request: Request) -> dict[str, Any]:
        query = query_of(request, EdgeQuery)
        return await audited(  # type: ignore[no-any-return]
            request,
            query.model_dump(),
            lambda caller: talk.edge(caller, query.a, query.b, query.window, query.project),
        )

    async def projects(request: Request) -> dict[str, Any]:
        return talk.projects(caller_of(request))

    return [
        Operation("GET", f"{API}/agents/{{agent_id}}/page",
                  "An agent's page: role, lease, performance, inbox (owner and admins), tasks, "
                  "reservations, threads", agent_page, "dashboard", answer=AgentPageAnswer,
                  query=PageQuery, errors=(400, 403, 404)),
        Operation("GET", f"{API}/map", "Who talks to whom: agents, message and task counts, "
                  "thread groups in a window", talk_map, "dashboard", answer=MapAnswer,
                  query=MapQuery, errors=(400, 403)),
        Operation("GET", f"{API}/map/edge", "The messages between two agents the caller may "
                  "read", talk_edge, "dashboard", answer=EdgeAnswer, query=EdgeQuery,
                  errors=(400, 403, 404)),
        Operation("GET", f"{API}/projects", "The projects the caller may filter by", projects,
                  "dashboard", answer=ProjectsAnswer, errors=()),
    ]  # fmt: skip
