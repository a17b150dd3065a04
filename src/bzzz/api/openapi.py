"""The OpenAPI 3.1 document of the node's HTTP routes, served at /openapi.json.

The API's routes are described from their :class:`~bzzz.api.handlers.Operation` (path, query
and body models, statuses); the node's other routes (health, metrics, OAuth metadata, MCP) are
described here by hand. Every error is the seed's ErrorResponse.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel

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
_JSON_OBJECT = {"type": "object", "additionalProperties": True}


def _json(description: str, schema: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "description": description,
        "content": {"application/json": {"schema": schema or _JSON_OBJECT}},
    }


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
    else:
        ok = _json("the service's answer (success: true)")
    responses: dict[str, Any] = {str(op.status): ok}
    for status in sorted({*op.errors, 401}):
        responses[str(status)] = _error(status)
    entry: dict[str, Any] = {
        "operationId": op.handler.__name__,
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


def _node_paths() -> dict[str, Any]:
    """The node's routes outside the API: health, metrics, OAuth metadata, MCP."""
    text = {
        "description": "Prometheus text",
        "content": {"text/plain": {"schema": {"type": "string"}}},
    }
    metadata = _simple(
        "resource_metadata", "OAuth protected-resource metadata (RFC 9728)", _json("the metadata")
    )
    mcp = {
        "summary": "MCP over streamable HTTP (JSON-RPC; see the MCP specification)",
        "tags": ["mcp"],
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": _JSON_OBJECT}},
        },
        "responses": {"200": _json("a JSON-RPC answer"), "401": _error(401), "400": _error(400)},
    }
    open_doc = _simple("openapi", "This document", _json("the OpenAPI 3.1 document"))
    html = {
        "description": "the dashboard",
        "content": {"text/html": {"schema": {"type": "string"}}},
    }
    asset = {"description": "a script, style or image of the page", "content": {"*/*": {}}}
    name = [{"name": "name", "in": "path", "required": True, "schema": {"type": "string"}}]
    return {
        "/healthz": {"get": _simple("healthz", "Liveness and status", _json("node status"))},
        "/metrics": {"get": _simple("metrics_text", "Counters (Prometheus)", text, 401)},
        "/webhooks": {
            "get": _simple(
                "webhook_deliveries",
                "Webhook deliveries (admins)",
                _json("deliveries"),
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
        "/ui/{name}": {
            "get": _simple("ui_asset", "A file of the dashboard", asset) | {"parameters": name}
        },
    }


def document(operations: list[Operation], base_url: str | None = None) -> dict[str, Any]:
    """The OpenAPI 3.1 document of ``operations`` and the node's own routes."""
    schemas = _Schemas()
    paths: dict[str, Any] = _node_paths()
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
