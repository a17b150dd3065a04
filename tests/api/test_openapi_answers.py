"""Every answer of a run of the routes is valid against /openapi.json.

A run of the HTTP API (two agents, a task, a thread, an escalation-free resolve refused, the
dashboard's reads, the node's own routes) records each answer; each body is validated with
jsonschema against the schema the document gives its path, method and status, so a generated
client reads what the node sends. Every JSON answer and request body in the document has a
schema from a model (a ``$ref``), none a bare object.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from jsonschema import Draft202012Validator

from bzzz.config import Settings
from bzzz.eventlog import Caller
from bzzz.node.core import Node
from bzzz.principal import LOCAL, Scope

A = {"X-Bzzz-Session": "team-a"}
B = {"X-Bzzz-Session": "team-b"}


def _schema_of(doc: dict[str, Any], path: str, method: str, status: int) -> dict[str, Any]:
    answer = doc["paths"][path][method]["responses"][str(status)]
    schema: dict[str, Any] = answer["content"]["application/json"]["schema"]
    return schema


class Run:
    """Calls routes by their template and validates each answer against the document."""

    def __init__(self, http: httpx.AsyncClient, doc: dict[str, Any]) -> None:
        self.http = http
        self.doc = doc
        self.checked: set[tuple[str, str, int]] = set()

    async def call(
        self,
        method: str,
        template: str,
        status: int,
        *,
        headers: dict[str, str] | None = None,
        **fill: Any,
    ) -> Any:
        path_params = {k: v for k, v in fill.items() if "{" + k + "}" in template}
        rest = {k: v for k, v in fill.items() if k not in path_params}
        answer = await self.http.request(
            method, template.format(**path_params), headers=headers or A, **rest
        )
        assert answer.status_code == status, (method, template, answer.text)
        body = answer.json()
        schema = _schema_of(self.doc, template, method.lower(), status)
        validator = Draft202012Validator(schema | {"components": self.doc["components"]})
        errors = [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(body)]
        assert errors == [], (method, template, status, errors[:5])
        self.checked.add((template, method.lower(), status))
        return body


@pytest.fixture
def settings(settings: Settings) -> Settings:
    """Auth off by setting: the run mixes callers without a credential and a token holder (a
    network with a token otherwise refuses callers without one)."""
    settings.auth.required = False
    return settings


@pytest.fixture
async def run(http: httpx.AsyncClient) -> Run:
    return Run(http, (await http.get("/openapi.json")).json())


async def _answer_a_page(run: Run, node: Node, thread_id: str) -> None:
    """An escalation to humans acknowledged by a caller, then resolved from a signed link."""
    action = {"type": "notify_human", "status": "pending", "attempts": 0}
    payload = {"thread_id": thread_id, "priority": 0, "reason": "stuck", "actions": [action]}
    for escalation_id in ("esc-acked", "esc-linked"):
        payload |= {"escalation_id": escalation_id, "rule": escalation_id}
        await node.log.emit("thread.escalated", "thread", thread_id, payload, project="shop")
    await run.call("POST", "/api/v1/escalations/{escalation_id}/ack", 200,
                   escalation_id="esc-acked", json={"via": "console"})  # fmt: skip
    await run.call("POST", "/api/v1/escalations/{escalation_id}/ack", 400,
                   escalation_id="esc-acked", json={})  # fmt: skip
    link = httpx.URL(node.paging.links("esc-linked", 0, "alice")["resolve"])
    query = dict(link.params)
    await run.call("POST", "/api/v1/signed/escalations/{escalation_id}/{action}", 200,
                   escalation_id="esc-linked", action="resolve", params=query)  # fmt: skip
    await run.call("POST", "/api/v1/signed/escalations/{escalation_id}/{action}", 403,
                   escalation_id="esc-linked", action="ack", params=query)  # fmt: skip


async def test_every_answer_of_a_run_matches_the_document(run: Run, node: Node) -> None:
    api = "/api/v1"
    await run.call(
        "POST",
        f"{api}/agents",
        201,
        json={"agent_id": "dev-1", "role": "developer", "project": "shop"},
    )
    await run.call(
        "POST",
        f"{api}/agents",
        201,
        headers=B,
        json={"agent_id": "arch-1", "role": "architect", "project": "shop"},
    )
    await run.call(
        "POST", f"{api}/agents", 409, headers=B, json={"agent_id": "dev-1", "role": "developer"}
    )
    await run.call("GET", f"{api}/agents", 200, params={"address": "bzzz://*@shop"})
    await run.call("GET", f"{api}/agents", 400, params={"limit": "0"})
    await run.call("GET", f"{api}/agents/{{agent_id}}", 200, agent_id="dev-1")
    await run.call("GET", f"{api}/agents/{{agent_id}}", 404, agent_id="nobody")
    await run.call("GET", "/agents/{agent_id}/status", 200, agent_id="dev-1")
    await run.call(
        "POST",
        "/agents/{agent_id}/tasks",
        201,
        headers=B,
        agent_id="dev-1",
        json={"type": "code_review", "description": "Review it", "data": {"code": "print(1)"}},
    )
    opened = await run.call(
        "POST",
        "/agents/{agent_id}/collaborate",
        201,
        headers=B,
        agent_id="dev-1",
        json={"topic": "Checkout API"},
    )
    thread_id = opened["thread"]["id"]
    await run.call(
        "POST",
        "/agents/{agent_id}/collaborate",
        201,
        headers=B,
        agent_id="dev-1",
        json={"thread_id": thread_id, "message": "join us"},
    )
    await run.call(
        "POST",
        f"{api}/agents/{{agent_id}}/tasks",
        201,
        headers=B,
        agent_id="dev-1",
        json={"type": "documentation", "description": "Write it"},
    )
    await run.call(
        "POST",
        f"{api}/agents/{{agent_id}}/collaborate",
        201,
        headers=B,
        agent_id="dev-1",
        json={"thread_id": thread_id},
    )
    await run.call("GET", f"{api}/threads", 200)
    await run.call("GET", f"{api}/threads/{{thread_id}}", 200, thread_id=thread_id)
    await run.call("GET", f"{api}/threads/{{thread_id}}", 404, thread_id="thread-nope")
    await run.call("GET", f"{api}/threads/{{thread_id}}/envelopes", 200, thread_id=thread_id)
    await run.call("GET", f"{api}/threads/{{thread_id}}/timeline", 200, thread_id=thread_id)
    await run.call("GET", f"{api}/tasks", 200)
    await run.call("GET", f"{api}/escalations", 200)
    await run.call(
        "POST",
        f"{api}/escalations/{{escalation_id}}/resolve",
        404,
        escalation_id="esc-nope",
        json={"reason": "done"},
    )
    await _answer_a_page(run, node, thread_id)
    await run.call("GET", f"{api}/costs", 200)
    await run.call("GET", f"{api}/peers", 200)
    await run.call("GET", f"{api}/metrics", 200)
    await run.call("GET", f"{api}/webhooks", 200)
    await run.call("POST", f"{api}/webhooks/redrive", 200, json={})
    await run.call("POST", f"{api}/webhooks/redrive", 400, json={"delivery_ids": [99]})
    await run.call("GET", f"{api}/whoami", 200)
    await run.call("GET", f"{api}/overview/threads", 200)
    await run.call("GET", f"{api}/overview/tasks", 200)
    await run.call("GET", f"{api}/content", 200, params={"address": "bzzz://dev-1/tasks"})
    await run.call("GET", f"{api}/reservations", 200, params={"path": "src/**"})
    await run.call("GET", f"{api}/agents/{{agent_id}}/page", 200, agent_id="dev-1")
    await run.call("GET", f"{api}/map", 200, params={"window": "24h", "project": "shop"})
    await run.call("GET", f"{api}/map/edge", 200, params={"a": "dev-1", "b": "arch-1"})
    await run.call("GET", f"{api}/projects", 200)
    await run.call("GET", f"{api}/reservations", 400, params={"path": "../x"})
    check = f"{api}/reservations/check"
    await run.call("POST", check, 200, json={"agent": "dev-1", "paths": ["src/a.py"]})
    await run.call("POST", check, 400, json={"agent": "dev-1", "paths": ["../x"]})
    await run.call("POST", check, 404, json={"agent": "nobody", "paths": ["a"]})
    inbox = f"{api}/agents/{{agent_id}}/inbox"
    unread = await run.call("GET", inbox, 200, agent_id="dev-1", params={"unread": "true"})
    read = {"message_ids": [m["id"] for m in unread["messages"]][:1] or ["msg-nope"]}
    await run.call("POST", inbox + "/read", 200, agent_id="dev-1", json=read)
    await run.call("POST", inbox + "/read", 400, agent_id="dev-1", json={"message_ids": []})
    fact = await node.knowledge.state(
        Caller("openapi", LOCAL), "shop", "checkout retries", "carry", "idempotency keys"
    )
    shop = {"project": "shop"}
    await run.call("GET", f"{api}/knowledge", 200, params=shop | {"about": "checkout retries"})
    await run.call("GET", f"{api}/knowledge", 400, params={"limit": "0"})
    await run.call("GET", f"{api}/knowledge/{{fact_id}}", 200, fact_id=fact["id"], params=shop)
    proposed = await node.knowledge.state(
        Caller("openapi", LOCAL), "shop", "refunds", "carry", "no keys",
        status="proposed", author="someone-else",
    )  # fmt: skip
    agree = f"{api}/knowledge/{{fact_id}}/agree"
    await run.call("POST", agree, 200, fact_id=proposed["id"], json={})
    await run.call("GET", "/healthz", 200)
    await run.call("GET", "/webhooks", 200)
    await run.call("GET", "/ui/access.json", 200)
    await run.call("GET", "/.well-known/oauth-protected-resource", 200)
    await run.call("GET", "/.well-known/oauth-protected-resource/mcp", 200)
    await run.call("GET", "/openapi.json", 200)  # fmt: skip
    # Last: with a token on the network, the node requires credentials from then on.
    _, secret = await node.access.create_token(
        LOCAL, "alice", ["shop"], ["human"], Scope.ADMIN, None
    )
    alice = {"Authorization": f"Bearer {secret}"}
    await run.call(
        "POST",
        f"{api}/threads/{{thread_id}}/messages",
        201,
        headers=alice,
        thread_id=thread_id,
        json={"text": "Ship it", "message_type": "decision"},
    )

    await run.call("GET", "/a2a/agents.json", 200)
    await run.call("GET", "/a2a/{agent_id}/.well-known/agent-card.json", 200, agent_id="dev-1")
    await run.call("GET", "/a2a/{agent_id}/.well-known/agent-card.json", 404, agent_id="nobody")

    described = {
        (path, method)
        for path, ops in run.doc["paths"].items()
        for method, op in ops.items()
        if any(
            "application/json" in r.get("content", {})
            for s, r in op["responses"].items()
            if s.startswith("2")
        )
        and path not in ("/mcp", "/a2a/{agent_id}")  # JSON-RPC: the MCP and A2A tests drive it
    }
    assert described - {(p, m) for p, m, _ in run.checked} == set()


async def test_every_json_answer_and_body_in_the_document_has_a_models_schema(
    http: httpx.AsyncClient,
) -> None:
    doc = (await http.get("/openapi.json")).json()
    missing = []
    for path, ops in doc["paths"].items():
        for method, op in ops.items():
            bodies = [("request", op.get("requestBody", {}).get("content", {}))]
            bodies += [(status, r.get("content", {})) for status, r in op["responses"].items()]
            for where, content in bodies:
                schema = content.get("application/json", {}).get("schema")
                if schema is not None and "$ref" not in schema:
                    missing.append((path, method, where))
    assert missing == []
    assert "JsonRpcMessage" in doc["components"]["schemas"]
    tasks = doc["components"]["schemas"]["TasksAnswer"]["properties"]["tasks"]
    assert tasks["items"] == {"$ref": "#/components/schemas/Task"}
