"""GET /api/v1/knowledge and /api/v1/knowledge/{fact_id}: a project's facts, and one's history.

Thin as the other routes: the query is validated here (every user-given cost has a bound),
the caller is built as for every REST call, and the knowledge service decides what the
caller's projects let it read (another project's facts are PERMISSION_DENIED). A read shows
content, so each one is on the audit trail (``http:GET /api/v1/knowledge``), allowed or
refused, as the MCP tools' reads are. ``POST /api/v1/knowledge/{fact_id}/agree`` agrees with a
fact as one of the caller's agents (a proposed fact becomes agreed; its author cannot), audited
as every HTTP change is.
"""

from __future__ import annotations

from typing import Any

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field
from starlette.requests import Request

from bzzz.api.answers import Answer
from bzzz.api.handlers import API, Operation, body_of, caller_of, query_of
from bzzz.audit.records import Action, digest, stamp
from bzzz.errors import BzzzError
from bzzz.knowledge.projection import ENTITY_LENGTH
from bzzz.knowledge.selection import QUERY_LENGTH
from bzzz.knowledge.service import MAX_HISTORY, MAX_LIMIT
from bzzz.node.core import Node
from bzzz.schemas import Identifier

PROJECT = r"^[A-Za-z0-9._-]{1,128}$"
# The bounds of a query (docs/knowledge.md) are the service's: an entity's name, the words,
# the facts answered, the earlier versions shown with each.
ABOUT_CHARS = ENTITY_LENGTH


class KnowledgeQuery(BaseModel):
    """GET /api/v1/knowledge: a project's facts, best first."""

    model_config = ConfigDict(extra="forbid")

    project: str = Field(pattern=PROJECT, description="the project whose facts to read")
    about: str | None = Field(
        None, min_length=1, max_length=ABOUT_CHARS, description="an entity: its facts first"
    )
    q: str | None = Field(
        None, min_length=1, max_length=QUERY_LENGTH, description="words to rank by"
    )
    as_of: AwareDatetime | None = Field(
        None, description="the facts as they stood then (an ISO 8601 time with its zone)"
    )
    max_history: int = Field(
        0, ge=0, le=MAX_HISTORY, description="superseded versions shown with each fact"
    )
    limit: int = Field(20, ge=1, le=MAX_LIMIT, description="at most this many facts")


class FactQuery(BaseModel):
    """GET /api/v1/knowledge/{fact_id}: the project the fact belongs to."""

    model_config = ConfigDict(extra="forbid")

    project: str = Field(pattern=PROJECT, description="the fact's project")


class AgreeBody(BaseModel):
    """POST /api/v1/knowledge/{fact_id}/agree: which of the caller's agents agrees."""

    model_config = ConfigDict(extra="forbid")

    agent_id: Identifier | None = Field(
        None, description="one of the caller's agents (default: its only one, else itself)"
    )


class AgreedAnswer(Answer):
    """POST /api/v1/knowledge/{fact_id}/agree: the fact, agreed."""

    model_config = ConfigDict(extra="allow")

    fact: Fact


class FactSource(BaseModel):
    """Where a fact comes from."""

    model_config = ConfigDict(extra="allow")

    thread: str | None = None
    message: str | None = None
    agents: list[str] = Field(default_factory=list)


class Fact(BaseModel):
    """A fact: subject, relation, object, with its source and validity."""

    model_config = ConfigDict(extra="allow")

    id: str
    project: str
    subject: str
    relation: str
    object: str
    statement: str | None = None
    status: str = Field(description="agreed | proposed")
    confidence: float
    author: str | None = None
    source: FactSource | None = None
    valid_from: str | None = None
    valid_until: str | None = None
    superseded_by: str | None = None
    recorded_at: str | None = None


class KnowledgeAnswer(Answer):
    """GET /api/v1/knowledge: facts best first, and the entities' neighbourhood."""

    model_config = ConfigDict(extra="allow")

    facts: list[Fact]
    neighbourhood: list[Any] = Field(default_factory=list)


class FactHistory(Answer):
    """GET /api/v1/knowledge/{fact_id}: the fact and the versions it superseded or that
    superseded it."""

    model_config = ConfigDict(extra="allow")

    fact: Fact


def _audit(node: Node, request: Request, target: str, params: dict[str, Any], outcome: str) -> None:
    caller = caller_of(request)
    node.audit.record(
        Action(
            at=stamp(node.clock.now()),
            principal=caller.principal.id[:256],
            session=caller.session_id[:128],
            action=f"http:GET {API}/knowledge"[:128],
            outcome=outcome[:64],
            digest=digest(params),
            target=target[:512],
        )
    )


def operations(node: Node) -> list[Operation]:
    """The knowledge routes."""

    async def audited(request: Request, target: str, params: dict[str, Any], read: Any) -> Any:
        try:
            answer = await read
        except BzzzError as exc:
            _audit(node, request, target, params, str(exc.code))
            raise
        _audit(node, request, target, params, "ok")
        return answer

    async def search_knowledge(request: Request) -> dict[str, Any]:
        query = query_of(request, KnowledgeQuery)
        who = caller_of(request).principal
        read = node.knowledge.search(
            who,
            query.project,
            about=query.about,
            q=query.q,
            as_of=query.as_of,
            max_history=query.max_history,
            limit=query.limit,
        )
        params = query.model_dump(mode="json", exclude_none=True)
        answer = await audited(request, f"knowledge:{query.project}", params, read)
        return {"success": True, **answer}

    async def fact_history(request: Request) -> dict[str, Any]:
        fact_id = str(request.path_params["fact_id"])[:128]
        query = query_of(request, FactQuery)
        who = caller_of(request).principal
        read = node.knowledge.history(who, query.project, fact_id)
        params = {"project": query.project, "fact_id": fact_id}
        answer = await audited(request, f"fact:{fact_id}", params, read)
        return {"success": True, **answer}

    async def agree_fact(request: Request) -> dict[str, Any]:
        fact_id = str(request.path_params["fact_id"])[:128]
        body = await body_of(request, AgreeBody)
        caller = caller_of(request)
        # The agent is one the caller holds (the conversation service checks it), never a
        # name taken on trust.
        agent = await node.conversations.sender_for(caller, body.agent_id, True)
        fact = await node.knowledge.agree(caller, fact_id, agent=agent)
        return {"success": True, "fact": fact}

    return [
        Operation(
            "POST",
            f"{API}/knowledge/{{fact_id}}/agree",
            "Agree with a fact: a proposed one becomes agreed (not by its author)",
            agree_fact,
            "knowledge",
            body=AgreeBody,
            answer=AgreedAnswer,
            errors=(400, 403),
        ),
        Operation(
            "GET",
            f"{API}/knowledge",
            "A project's facts, best first (bzzz_get bzzz://*@PROJECT/knowledge)",
            search_knowledge,
            "knowledge",
            answer=KnowledgeAnswer,
            query=KnowledgeQuery,
            errors=(400, 403),
        ),
        Operation(
            "GET",
            f"{API}/knowledge/{{fact_id}}",
            "A fact and its history: the versions it superseded, and what superseded it",
            fact_history,
            "knowledge",
            answer=FactHistory,
            query=FactQuery,
            errors=(400, 403, 404),
        ),
    ]
