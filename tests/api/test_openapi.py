"""/openapi.json: a valid OpenAPI 3.1 document that describes every route of the app."""

from __future__ import annotations

from typing import Any

import httpx
from openapi_spec_validator import validate
from starlette.routing import Mount, Route


async def test_the_document_is_valid_openapi_3_1(http: httpx.AsyncClient) -> None:
    answer = await http.get("/openapi.json")

    assert answer.status_code == 200
    doc: dict[str, Any] = answer.json()
    assert doc["openapi"] == "3.1.0"
    validate(doc)  # raises on an invalid document


async def test_every_route_of_the_app_is_in_the_document(
    http: httpx.AsyncClient, app_routes: list[object]
) -> None:
    paths = (await http.get("/openapi.json")).json()["paths"]
    served: set[tuple[str, str]] = set()
    for route in app_routes:
        if isinstance(route, Route):
            methods = (route.methods or {"GET"}) - {"HEAD"}
            served |= {(route.path, m.lower()) for m in methods}
        elif isinstance(route, Mount):
            served |= {("/mcp", "post"), ("/mcp", "get"), ("/mcp", "delete")}

    described = {(path, method) for path, ops in paths.items() for method in ops}

    assert served - described == set()
    assert len(served) > 20


async def test_every_error_answer_is_the_error_response(http: httpx.AsyncClient) -> None:
    doc = (await http.get("/openapi.json")).json()
    ref = "#/components/schemas/ErrorResponse"

    for path, ops in doc["paths"].items():
        for method, op in ops.items():
            for status, answer in op["responses"].items():
                if int(status) >= 400:
                    schema = answer["content"]["application/json"]["schema"]
                    assert schema == {"$ref": ref}, (path, method, status)
    tasks = doc["paths"]["/agents/{agent_id}/tasks"]["post"]
    body = tasks["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    task_schema = doc["components"]["schemas"][body.rsplit("/", 1)[1]]
    assert set(task_schema["properties"]["type"]["enum"]) == {
        "chat_completion", "code_review", "documentation", "architecture_analysis"
    }  # fmt: skip
    assert "Retry-After" in tasks["responses"]["429"]["headers"]
