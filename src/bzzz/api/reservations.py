"""GET /api/v1/reservations: the live path reservations the caller's projects hold.

Thin as the other routes: the query is bzzz_reserve's ``list`` (project, agent, paths), the
caller is built as for every REST call, and the service applies the same grants.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from starlette.requests import Request

from bzzz.api.answers import Answer
from bzzz.api.handlers import API, Operation, caller_of, query_of
from bzzz.node.core import Node
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
        )
    ]
