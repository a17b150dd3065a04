"""What every HTTP API route shares: the caller, the body, the error statuses, the route table.

A route is thin: it validates, builds the :class:`~bzzz.eventlog.Caller` exactly as an MCP tool
call over HTTP does, calls one service method and shapes the answer. Each route is declared
once as an :class:`Operation`, from which both the Starlette route and its OpenAPI entry come.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import BaseModel
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from bzzz.errors import BzzzError, ErrorCode, InvalidParameters, Unauthenticated
from bzzz.eventlog import Caller

# The MCP layer's own key function: a REST call holds the agents a sessionless MCP call holds.
from bzzz.mcp.sessions import _stateless_key, principal_of
from bzzz.schemas import too_deep_error, validate_input

logger = logging.getLogger(__name__)

# How a REST caller names the agent it acts as (bzzz_announce's ``agent_handle``); a body
# field of the same name wins. ``X-Bzzz-Session`` names a session as on /mcp.
HANDLE_HEADER = "x-bzzz-agent-handle"

STATUS_OF_CODE = {
    ErrorCode.INVALID_PARAMETERS: 400,
    ErrorCode.AGENT_NOT_FOUND: 404,
    ErrorCode.THREAD_NOT_FOUND: 404,
    ErrorCode.PERMISSION_DENIED: 403,
    ErrorCode.RATE_LIMITED: 429,
    ErrorCode.RESERVATION_CONFLICT: 409,
    ErrorCode.COST_LIMIT_EXCEEDED: 429,
    ErrorCode.NETWORK_ERROR: 503,
    ErrorCode.OPENAI_ERROR: 502,
    ErrorCode.ESCALATION_FAILED: 502,
    ErrorCode.CONFIG_ERROR: 500,
}
# An InvalidParameters that says a name is taken is a conflict, not a malformed request.
_CONFLICTS = ("Agent ID already exists",)

ModelT = TypeVar("ModelT", bound=BaseModel)
# Where the HTTP API lives (WHOOSH's routes are at the root).
API = "/api/v1"

Handler = Callable[[Request], Awaitable[Any]]


def caller_of(request: Request, handle: str | None = None) -> Caller:
    """The caller of a REST request, keyed as a sessionless MCP call over HTTP is.

    An authenticated principal acts as the agents it announced (``principal-…``); anyone
    may name an agent by its ``agent_handle`` (body field or ``X-Bzzz-Agent-Handle``).
    """
    who = principal_of(request)
    handle = handle or request.headers.get(HANDLE_HEADER) or None
    return Caller(_stateless_key(request.headers, who), who, handle)


def status_of(error: BzzzError) -> int:
    """The HTTP status that fits an error's code."""
    if isinstance(error, Unauthenticated):
        return 401
    if error.code == ErrorCode.INVALID_PARAMETERS and error.message.startswith(_CONFLICTS):
        return 409
    return STATUS_OF_CODE.get(error.code, 400)


def failure(error: BzzzError) -> Response:
    """The seed's ErrorResponse with its status (and Retry-After when rate limited)."""
    headers = {}
    retry_after = error.details.get("retry_after")
    if error.code == ErrorCode.RATE_LIMITED and retry_after is not None:
        headers["Retry-After"] = str(max(1, int(float(retry_after) + 0.999)))
    return JSONResponse(error.to_response(), status_code=status_of(error), headers=headers)


async def body_of(request: Request, model: type[ModelT]) -> ModelT:
    """The JSON object of a request validated into ``model``; INVALID_PARAMETERS otherwise.

    The body is bounded while it is read (``bzzz.api.limits.BodyLimit``, 413 past
    ``limits.http_max_body_bytes``); a client gone mid-body is answered nothing.
    """
    raw = await request.body()
    try:
        data = json.loads(raw) if raw.strip() else {}
    except ValueError:
        raise InvalidParameters("the request body is not JSON", details={"field": "body"}) from None
    except RecursionError:
        # The app's JsonDepthLimit refuses such a body first; a route served alone does here.
        raise too_deep_error("body") from None
    if not isinstance(data, dict):
        raise InvalidParameters("the request body must be a JSON object", details={"field": "body"})
    return validate_input(model, data)


def query_of(request: Request, model: type[ModelT], lists: tuple[str, ...] = ()) -> ModelT:
    """The query string validated into ``model`` (``lists``: comma-separated fields)."""
    data: dict[str, Any] = {}
    for name, value in request.query_params.multi_items():
        if name in lists:
            data.setdefault(name, []).extend(v for v in value.split(",") if v)
        else:
            data[name] = value
    return validate_input(model, data)


@dataclass(frozen=True, slots=True)
class Operation:
    """One route of the HTTP API, as Starlette serves it and OpenAPI describes it."""

    method: str
    path: str
    summary: str
    handler: Handler
    tag: str
    body: type[BaseModel] | None = None
    query: type[BaseModel] | None = None
    # The success answer's shape (bzzz.api.answers), for the OpenAPI document.
    answer: type[BaseModel] | None = None
    status: int = 200
    # Error statuses this route can answer (beyond 401, which every route can).
    errors: tuple[int, ...] = (400, 403)
    stream: bool = False
    headers: tuple[str, ...] = field(default=())
    # The route's name and OpenAPI operationId (default: the handler's name).
    name: str | None = None

    @property
    def operation_id(self) -> str:
        """The route's name and the OpenAPI document's operationId."""
        return self.name or self.handler.__name__

    def route(self) -> Route:
        """The Starlette route: the handler's answer as JSON, a BzzzError as ErrorResponse."""
        handler, status = self.handler, self.status

        async def endpoint(request: Request) -> Response:
            try:
                answer = await handler(request)
            except ClientDisconnect:
                # The client left, or the body limit answered 413 and ended the request.
                return Response(status_code=400)
            except BzzzError as exc:
                return failure(exc)
            except Exception:
                # The route boundary: as an MCP tool does, log the cause and show no internals.
                logger.exception("%s %s failed", request.method, request.url.path)
                internal = "internal error; the node logged the details"
                return failure(BzzzError(internal, code=ErrorCode.NETWORK_ERROR))
            if isinstance(answer, Response):
                return answer
            return JSONResponse(answer, status_code=status)

        return Route(self.path, endpoint, methods=[self.method], name=self.operation_id)


def routes_of(operations: list[Operation]) -> list[Route]:
    """The Starlette routes of ``operations``."""
    return [op.route() for op in operations]
