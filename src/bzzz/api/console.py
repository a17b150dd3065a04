"""The routes the dashboard and the human console need beyond /api/v1's others.

``whoami`` (what the page may show), the threads and tasks the caller reads across its agents,
any address as ``bzzz_get`` reads it, and a person's post into a thread. Each one builds the
caller as every route does and calls one service method, so the same grants decide.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from starlette.requests import Request

from bzzz.agents.overview import Overview
from bzzz.api import answers as a
from bzzz.api.handlers import API, Operation, body_of, caller_of, query_of
from bzzz.conversations.humans import HumanDesk
from bzzz.mcp.sessions import principal_of
from bzzz.node.core import Node
from bzzz.schemas import AddressText, GetInput, Identifier, MintedId


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class OverviewQuery(_Model):
    """How many entries an overview lists."""

    limit: int = Field(100, ge=1, le=500)
    project: Identifier | None = Field(None, description="only this project's")


class ContentQuery(_Model):
    """GET /api/v1/content: bzzz_get of an address."""

    address: AddressText
    max_history: int = Field(20, ge=0, le=1000)


class HumanPostBody(_Model):
    """POST /api/v1/threads/{id}/messages: a person's message, decision or stance."""

    message_type: Literal["text", "decision", "question"] = "text"
    text: str = Field(min_length=1, max_length=4000)
    reply_to: MintedId | None = Field(None, description="the message a stance is on")
    stance: Literal["agree", "disagree"] | None = None


def operations(node: Node) -> list[Operation]:
    """The dashboard's and the console's routes."""
    overview = Overview(node.db, node.agents, node.node_id)
    desk = HumanDesk(node.db, node.agents, node.conversations)

    async def whoami(request: Request) -> dict[str, Any]:
        return desk.whoami(principal_of(request))

    async def overview_threads(request: Request) -> dict[str, Any]:
        query = query_of(request, OverviewQuery)
        threads = await overview.threads(caller_of(request), query.limit, query.project)
        return {"success": True, "threads": threads, "count": len(threads)}

    async def overview_tasks(request: Request) -> dict[str, Any]:
        query = query_of(request, OverviewQuery)
        tasks = await overview.tasks(caller_of(request), query.limit, query.project)
        return {"success": True, "tasks": tasks, "count": len(tasks)}

    async def content(request: Request) -> dict[str, Any]:
        query = query_of(request, ContentQuery)
        params = GetInput(address=query.address, max_history=query.max_history)
        return await node.front.get(caller_of(request), params)

    async def human_post(request: Request) -> dict[str, Any]:
        body = await body_of(request, HumanPostBody)
        thread_id = request.path_params["thread_id"]
        return await desk.post(
            caller_of(request), thread_id, body.message_type, body.text, body.reply_to, body.stance
        )

    return [
        Operation("GET", f"{API}/whoami", "The caller's grants (and its person, for the role "
                  "'human')", whoami, "console", answer=a.WhoamiAnswer, errors=()),
        Operation("GET", f"{API}/overview/threads",
                  "Every thread the caller reads, with escalations, consensus and SLURP events",
                  overview_threads, "console",
                  answer=a.OverviewThreadsAnswer, query=OverviewQuery, errors=(400,)),
        Operation("GET", f"{API}/overview/tasks",
                  "The tasks of every agent whose work the caller reads", overview_tasks,
                  "console", answer=a.OverviewTasksAnswer, query=OverviewQuery, errors=(400,)),
        Operation("GET", f"{API}/content", "What an address holds (bzzz_get)", content,
                  "console", answer=a.GetOutput, query=ContentQuery, errors=(400, 403, 404)),
        Operation("POST", f"{API}/threads/{{thread_id}}/messages",
                  "Post into a thread as the caller's person (role 'human'; joins it first)",
                  human_post, "console", answer=a.PostOutput, body=HumanPostBody, status=201,
                  errors=(400, 403, 404, 429, 503)),
    ]  # fmt: skip
