"""GET /api/v1/agents/{agent_id}/inbox and POST …/inbox/read: unread messages, read marks.

Thin as the other routes: the caller is built as for every REST call, the inbox service
applies bzzz_get's grants (its owner, an agent token of it, its project's admins). Marking is
a POST, so the audit middleware records it (``bzzz.api.audit``).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from starlette.requests import Request

from bzzz.agents.inbox import MAX_LIMIT
from bzzz.agents.inbox_projection import MAX_MARK
from bzzz.api.answers import Answer
from bzzz.api.handlers import API, Operation, body_of, caller_of, query_of
from bzzz.node.core import Node


class InboxQuery(BaseModel):
    """GET /api/v1/agents/{agent_id}/inbox."""

    model_config = ConfigDict(extra="forbid")

    unread: bool = Field(False, description="only the messages not marked read")
    limit: int = Field(20, ge=1, le=MAX_LIMIT, description="at most this many, newest first")


class MarkReadBody(BaseModel):
    """POST /api/v1/agents/{agent_id}/inbox/read."""

    model_config = ConfigDict(extra="forbid")

    message_ids: list[str] = Field(
        min_length=1, max_length=MAX_MARK, description="the messages to mark read"
    )


class InboxMessage(BaseModel):
    """A message of the inbox, with whether it is read."""

    model_config = ConfigDict(extra="allow")

    id: str
    sender: str
    message_type: str
    content: Any = None
    priority: str
    thread_id: str | None = None
    timestamp: str | None = None
    read: bool


class InboxAnswer(Answer):
    """GET /api/v1/agents/{agent_id}/inbox."""

    agent_id: str
    status: str
    unread_only: bool
    messages: list[InboxMessage]
    count: int
    unread: int = Field(description="how many messages are unread in all")


class MarkReadAnswer(Answer):
    """POST /api/v1/agents/{agent_id}/inbox/read."""

    agent_id: str
    marked: list[str]
    count: int


def operations(node: Node) -> list[Operation]:
    """The inbox routes."""

    async def read_inbox(request: Request) -> dict[str, Any]:
        query = query_of(request, InboxQuery)
        agent_id = request.path_params["agent_id"]
        caller = caller_of(request)
        return await node.inbox.read(caller, agent_id, unread=query.unread, limit=query.limit)

    async def mark_read(request: Request) -> dict[str, Any]:
        body = await body_of(request, MarkReadBody)
        agent_id = request.path_params["agent_id"]
        return await node.inbox.mark_read(caller_of(request), agent_id, body.message_ids)

    return [
        Operation(
            "GET",
            f"{API}/agents/{{agent_id}}/inbox",
            "An agent's inbox, newest first, with read marks (unread only on request)",
            read_inbox,
            "agents",
            answer=InboxAnswer,
            query=InboxQuery,
            errors=(400, 403, 404),
        ),
        Operation(
            "POST",
            f"{API}/agents/{{agent_id}}/inbox/read",
            "Mark messages of an agent's inbox read",
            mark_read,
            "agents",
            answer=MarkReadAnswer,
            body=MarkReadBody,
            errors=(400, 403, 404, 503),
        ),
    ]
