"""The seventh tool, bzzz_reserve: path reservations (bzzz/reservations), kept thin."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult
from pydantic import Field

from bzzz.eventlog import Caller
from bzzz.mcp import descriptions as text
from bzzz.mcp.models import ToolResponse
from bzzz.node.core import Node
from bzzz.reservations.schemas import DEFAULT_TTL, ReserveInput
from bzzz.schemas import validate_input


class ReserveOutput(ToolResponse):
    """bzzz_reserve result."""

    action: str | None = None
    reservation: dict[str, Any] | None = None
    reservations: list[dict[str, Any]] | None = None
    released: list[str] | None = None
    count: int | None = None
    total: int | None = None


CallerOf = Callable[[Context[Any, Any], str | None], Caller]
Run = Callable[[Awaitable[dict[str, Any]]], Awaitable[CallToolResult]]


def register_reserve(server: MCPServer[Any], node: Node, caller_of: CallerOf, run: Run) -> None:
    """Add bzzz_reserve to ``server``."""

    @server.tool(name="bzzz_reserve", description=text.RESERVE)
    async def bzzz_reserve(
        ctx: Context[Any, Any],
        action: Annotated[str, Field(description="reserve | release | renew | list")] = "reserve",
        paths: Annotated[
            list[str] | None,
            Field(description="glob patterns under the project: src/api/**, README.md, *.py"),
        ] = None,
        mode: Annotated[str, Field(description="exclusive | shared")] = "exclusive",
        ttl: Annotated[
            int, Field(strict=True, description="seconds until it expires (10 to 86400)")
        ] = DEFAULT_TTL,
        reason: Annotated[str | None, Field(description="why (shown to others)")] = None,
        reservation_id: Annotated[
            str | None, Field(description="release / renew: this one (default: all yours)")
        ] = None,
        agent_id: Annotated[
            str | None, Field(description="which of your agents acts; list: only its")
        ] = None,
        project: Annotated[str | None, Field(description="list: only this project")] = None,
        agent_handle: Annotated[str | None, Field(description=text.HANDLE)] = None,
    ) -> Annotated[CallToolResult, ReserveOutput]:
        arguments = {
            "action": action,
            "paths": paths,
            "mode": mode,
            "ttl": ttl,
            "reason": reason,
            "reservation_id": reservation_id,
            "agent_id": agent_id,
            "project": project,
        }
        params = validate_input(ReserveInput, {k: v for k, v in arguments.items() if v is not None})
        return await run(node.reservations.reserve(caller_of(ctx, agent_handle), params))
