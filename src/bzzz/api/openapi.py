"""The OpenAPI 3.1 document of the node's HTTP routes, served at /openapi.json.

The API's routes are described from their :class:`~bzzz.api.handlers.Operation` (path, query,
body and answer models, statuses); the node's other routes (health, metrics, OAuth metadata,
MCP, the dashboard) are listed here with the models of what they answer
(:mod:`bzzz.api.answers`). Every error is the seed's ErrorResponse.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel

from bzzz.api import answers
from bzzz.api.handlers import HANDLE_HEADER, Operation

OPENAPI_PATH = "/openapi.json"
_REF = "#/components/schemas/{model}"
_ERROR_TEXT = {
    400: "INVALID_PARAMETERS: a parameter is missing, malformed or unknown",
    401: "no credential, or a bad one (WWW-Authenticate names the resource metadata)",
    403: "PERMISSION_DENIED: the credential's grants do not allow this",
    404: "AGENT_NOT_FOUND or THREAD_NOT_FOUND (also what lies outside the caller's projects)",
    409: "INVALID_PARAMETERS: the agent id is held by another caller",
    429: "RATE_LIMITED (Retry-After says when to try again) or COST_LIMIT_EXCEEDED",
    503: "NETWORK_ERROR: the event log did not answer in time",
}
ERROR_RESPONSE = {
    "type": "object",
    "description": "The seed's ErrorResponse",
    "required": ["success", "error", "timestamp"],
    "properties": {
        "success": {"const": False},
        "error": {"type": "string", "description": "what went wrong"},
        "code": {
            "type": "string",
            "enum": [
                "INVALID_PARAMETERS",
                "AGENT_NOT_FOUND",
                "THREAD_NOT_FOUND",
                "NETWORK_ERROR",
                "OPENAI_ERROR",
                "COST_LIMIT_EXCEEDED",
                "ESCALATION_FAILED",
                "PERMISSION_DENIED",
                "RATE_LIMITED",
            ],
        },
        "details": {"description": "structured details (details.missing names a grant)"},
        "timestamp": {"type": "string", "format": "date-time"},
    },
}


def _json(description: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _error(status: int) -> dict[str, Any]:
    answer = _json(_ERROR_TEXT[status], {"$ref": _REF.format(model="ErrorResponse")})
    if status == 429:
        answer["headers"] = {
            "Retry-After": {"description": "seconds to wait", "schema": {"type": "integer"}}
        }
    return answer


class _Schemas:
    """The components' schemas, collected from the models the operations name."""

    def __init__(self) -> None:
        self.found: dict[str, Any] = {"ErrorResponse": ERROR_RESPONSE}

    def ref(self, model: type[BaseModel]) -> dict[str, Any]:
        schema = model.model_json_schema(ref_template=_REF)
        self.found.update(schema.pop("$defs", {}))
        self.found[model.__name__] = schema
        return {"$ref": _REF.format(model=model.__name__)}

    def query(self, model: type[BaseModel]) -> list[dict[str, Any]]:
        schema = model.model_json_schema(ref_template=_REF)
        self.found.update(schema.pop("$defs", {}))
        required = set(schema.get("required", []))
        params = []
        for name, prop in schema.get("properties", {}).items():
            param: dict[str, Any] = {
                "name": name,
                "in": "query",
                "required": name in required,
                "schema": prop,
            }
            if prop.get("type") == "array":
                param |= {"style": "form", "explode": False}  # comma-separated
            if "description" in prop:
                param["description"] = prop["description"]
            params.append(param)
        return params


def _operation(op: Operation, schemas: _Schemas) -> dict[str, Any]:
    params: list[dict[str, Any]] = [
        {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
        for name in re.findall(r"{(\w+)}", op.path)
    ]
    if op.query is not None:
        params += schemas.query(op.query)
    for header in (*op.headers, HANDLE_HEADER):
        params.append(
            {"name": header, "in": "header", "required": False, "schema": {"type": "string"}}
        )
    if op.stream:
        ok = {
            "description": "a text/event-stream of events (id: <subscription_id>:<n>)",
            "content": {"text/event-stream": {"schema": {"type": "string"}}},
        }
    elif op.answer is not None:
        ok = _json(op.answer.__doc__ or "the answer", schemas.ref(op.answer))
    else:
        raise ValueError(f"{op.method} {op.path} names no answer model")
    responses: dict[str, Any] = {str(op.status): ok}
    for status in sorted({*op.errors, 401}):
        responses[str(status)] = _error(status)
    entry: dict[str, Any] = {
        "operationId": op.operation_id,
        "summary": op.summary,
        "tags": [op.tag],
        "parameters": params,
        "responses": responses,
    }
    if op.body is not None:
        entry["requestBody"] = {
            "required": True,
            "content": {"application/json": {"schema": schemas.ref(op.body)}},
        }
    return entry


def _simple(op_id: str, summary: str, ok: dict[str, Any], *errors: int) -> dict[str, Any]:
    responses = {"200": ok} | {str(s): _error(s) for s in errors}
    return {"operationId": op_id, "summary": summary, "tags": ["node"], "responses": responses}


def _node_paths(schemas: _Schemas) -> dict[str, Any]:
    """The node's routes outside the API: health, metrics, OAuth metadata, MCP, the page."""
    text = {
        "description": "Prometheus text",
        "content": {"text/plain": {"schema": {"type": "string"}}},
    }
    metadata = _simple(
        "resource_metadata",
        "OAuth protected-resource metadata (RFC 9728)",
        _json("the metadata", schemas.ref(answers.ResourceMetadata)),
    )
    rpc = schemas.ref(answers.JsonRpcMessage)
    mcp = {
        "summary": "MCP over streamable HTTP (JSON-RPC; see the MCP specification)",
        "tags": ["mcp"],
        "requestBody": {"required": True, "content": {"application/json": {"schema": rpc}}},
        "responses": {
            "200": {
                "description": "a JSON-RPC answer, or a text/event-stream of them",
                "content": {
                    "application/json": {"schema": rpc},
                    "text/event-stream": {"schema": {"type": "string"}},
                },
            },
            "401": _error(401),
            "400": _error(400),
        },
    }
    open_doc = _simple(
        "openapi", "This document", _json("the document", schemas.ref(answers.OpenApiDocument))
    )
    html = {
        "description": "the dashboard",
        "content": {"text/html": {"schema": {"type": "string"}}},
    }
    asset = {
        "description": "a script, style or image of the page",
        "content": {
            kind: {"schema": {"type": "string"}}
            for kind in ("text/javascript", "text/css", "image/svg+xml")
        },
    }
    name = [{"name": "name", "in": "path", "required": True, "schema": {"type": "string"}}]
    health = _json(
        "node status (the same body with 503 while unhealthy)", schemas.ref(answers.NodeStatus)
    )
    healthz = _simple("healthz", "Liveness and status", health)
    return {
        "/healthz": {"get": healthz},
        "/metrics": {"get": _simple("metrics_text", "Counters (Prometheus)", text, 401)},
        "/webhooks": {
            "get": _simple(
                "webhook_deliveries",
                "Webhook deliveries (admins)",
                _json("deliveries", schemas.ref(answers.DeliveriesAnswer)),
                400,
                401,
                403,
            )
        },
        "/.well-known/oauth-protected-resource": {"get": metadata},
        "/.well-known/oauth-protected-resource/mcp": {
            "get": metadata | {"operationId": "resource_metadata_mcp"}
        },
        "/mcp": {
            "post": mcp | {"operationId": "mcp_post"},
            "get": {k: v for k, v in mcp.items() if k != "requestBody"}
            | {"operationId": "mcp_stream", "summary": "MCP notifications stream"},
            "delete": {k: v for k, v in mcp.items() if k != "requestBody"}
            | {"operationId": "mcp_end", "summary": "End an MCP session"},
        },
        OPENAPI_PATH: {"get": open_doc},
        "/ui": {"get": _simple("ui", "The dashboard and human console (open; signs in)", html)},
        "/ui/": {
            "get": {
                "operationId": "ui_slash",
                "summary": "Redirects to /ui",
                "tags": ["node"],
                "responses": {"308": {"description": "to /ui"}},
            }
        },
        "/ui/access.json": {
            "get": _simple(
                "ui_access",
                "Whether the dashboard needs a token (open)",
                _json("the answer", schemas.ref(answers.UiAccess)),
            )
        },
        "/ui/{name}": {
            "get": _simple("ui_asset", "A file of the dashboard", asset) | {"parameters": name}
        },
    }


def _a2a_paths(schemas: _Schemas) -> dict[str, Any]:
    """The A2A routes (bzzz.api.a2a): cards, and each agent's JSON-RPC endpoint."""
    agent = [{"name": "agent_id", "in": "path", "required": True, "schema": {"type": "string"}}]
    card = _json("an A2A agent card (see the A2A specification)", schemas.ref(answers.A2ACard))
    rpc = schemas.ref(answers.JsonRpcMessage)
    body = {"required": True, "content": {"application/json": {"schema": rpc}}}
    answer = {
        "description": "a JSON-RPC answer (A2A errors as JSON-RPC errors), or a "
        "text/event-stream of them for message/stream",
        "content": {
            "application/json": {"schema": rpc},
            "text/event-stream": {"schema": {"type": "string"}},
        },
    }
    listing = _json("the cards of the agents the caller sees", schemas.ref(answers.A2AListing))
    return {
        "/a2a/agents.json": {
            "get": _simple("a2a_agents", "A2A cards of the agents the caller sees", listing, 401)
            | {"tags": ["a2a"]}
        },
        "/a2a/{agent_id}/.well-known/agent-card.json": {
            "get": _simple("a2a_card", "An agent's A2A card", card, 401, 404)
            | {"tags": ["a2a"], "parameters": agent}
        },
        "/a2a/{agent_id}": {
            "post": {
                "operationId": "a2a_rpc",
                "summary": "A2A JSON-RPC: message/send, message/stream, tasks/get, tasks/cancel",
                "tags": ["a2a"],
                "parameters": agent,
                "requestBody": body,
                "responses": {"200": answer, "400": _error(400), "401": _error(401)},
            }
        },
    }


def document(operations: list[Operation], base_url: str | None = None) -> dict[str, Any]:
    """The OpenAPI 3.1 document of ``operations`` and the node's own routes."""
    schemas = _Schemas()
    paths: dict[str, Any] = _node_paths(schemas) | _a2a_paths(schemas)
    for op in operations:
        paths.setdefault(op.path, {})[op.method.lower()] = _operation(op, schemas)
    doc: dict[str, Any] = {
        "openapi": "3.1.0",
        "info": {
            "title": "BZZZ node HTTP API",
            "version": "1.0",
            "description": "WHOOSH endpoints, the /api/v1 routes and the event stream. "
            "Send 'Authorization: Bearer <token>'; the token's grants apply as to MCP tools.",
        },
        "paths": paths,
        "components": {
            "schemas": schemas.found,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        # A loopback node without tokens takes calls without a credential.
        "security": [{"bearer": []}, {}],
    }
    if base_url:
        doc["servers"] = [{"url": base_url}]
    return doc
