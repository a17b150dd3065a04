"""GET /api/v1/reservations: the live path reservations the caller's projects hold; POST
/api/v1/reservations/check: may an agent write these paths now (reservations.check).

Thin as the other routes: the query is bzzz_reserve's ``list`` (project, agent, paths), the
check's body is ``CheckInput``, the caller is built as for every REST call, and the service
applies the same grants.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from starlette.requests import Request

from bzzz.api.answers import Answer
from bzzz.api.handlers import API, Operation, body_of, caller_of, query_of
from bzzz.node.core import Node
from bzzz.reservations.check import CheckInput
from bzzz.reservations.schemas import Pattern, ReserveInput
from bzzz.schemas import Identifier


class ReservationsQuery(BaseModel):
    """GET /api/v1/reservations: narrow the list (every filter is optional)."""

    model_config = ConfigDict(extra="forbid")

    project: Identifier | None = Field(None, description="only this project's")
    agent_id: Identifier | None = Field(None, description="only this agent's")
    path: list[Pattern] = Field(
        default_factory=list,
        max_length=32,
        description="only those overlapping these globs (repeat it, or separate with commas)",
    )


class Reservation(BaseModel):
    """A live reservation."""

    model_config = ConfigDict(extra="allow")

    id: str
    agent_id: str
    project: str | None = None
    mode: str
    paths: list[str]
    reason: str | None = None
    created_at: str
    expires_at: str
    fencing_token: int = 0


class CheckHolder(BaseModel):
    """Another agent's live reservation covering the path."""

    agent: str
    reservation_id: str
    paths: list[str]
    expires_at: str | None = None
    fencing_token: int
    exclusive: bool


class CheckEnd(BaseModel):
    """The agent's own reservation of the path that ended."""

    reservation_id: str
    fencing_token: int
    reason: str = Field(description="released | expired | forgotten | moved | node_removed")
    ended_at: str | None = None


class CheckedPath(BaseModel):
    """One path's answer."""

    path: str
    allowed: bool
    fencing_token: int | None = Field(
        None, description="the token of the agent's own live reservation covering the path"
    )
    reservation_id: str | None = None
    expires_at: str | None = None
    reason: str = Field(
        description="held | unreserved | shared_by_others | reserved_by_other, or why the "
        "agent's own reservation ended (released | expired | forgotten | moved | node_removed)"
    )
    holder: CheckHolder | None = None
    ended: CheckEnd | None = None


class CheckAnswer(BaseModel):
    """POST /api/v1/reservations/check."""

    agent: str
    project: str | None = None
    allowed: bool = Field(description="every path may be written")
    paths: list[CheckedPath]


class ReservationsAnswer(Answer):
    """GET /api/v1/reservations."""

    reservations: list[Reservation]
    count: int
    total: int


def operations(node: Node) -> list[Operation]:
    """The reservation routes."""

    async def list_reservations(request: Request) -> dict[str, Any]:
        query = query_of(request, ReservationsQuery, ("path",))
        params = ReserveInput(
            action="list",
            project=query.project,
            agent_id=query.agent_id,
            paths=query.path or None,
        )
        return await node.reservations.listing(caller_of(request).principal, params)

    async def check_reservations(request: Request) -> dict[str, Any]:
        body = await body_of(request, CheckInput)
        return await node.reservations.check(
            caller_of(request),
            body.agent,
            list(body.paths),
            enforce=body.enforce,
            source=body.source,
        )

    return [
        Operation(
            "GET",
            f"{API}/reservations",
            "Live path reservations in the caller's projects (bzzz_reserve list)",
            list_reservations,
            "reservations",
            answer=ReservationsAnswer,
            query=ReservationsQuery,
            errors=(400, 403),
        ),
        Operation(
            "POST",
            f"{API}/reservations/check",
            "May an agent write these paths now: each path's holder and fencing token",
            check_reservations,
            "reservations",
            body=CheckInput,
            answer=CheckAnswer,
            errors=(400, 403, 404, 503),
        ),
    ]
