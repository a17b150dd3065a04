"""HTTP changes and hosted-agent model calls are on the trail, allowed or refused."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from bzzz.access.keys import session_key
from bzzz.api.app import build_app
from bzzz.errors import BzzzError
from bzzz.llm.types import CompletionOptions, ModelReply, ModelRequest, TokenUsage
from bzzz.mcp.server import build_server
from bzzz.node.core import Node

from .support import chain_of

CANARY = "CANARY-9d41-prompt"


class _Model:
    """A model endpoint that answers every request, and remembers them."""

    def __init__(self) -> None:
        self.requests: list[ModelRequest] = []

    async def complete(self, request: ModelRequest, on_delta: Any = None) -> ModelReply:
        self.requests.append(request)
        return ModelReply("fine", request.model, "stop", TokenUsage(10, 2))

    async def close(self) -> None:
        return None


async def test_http_changes_are_recorded_and_reads_are_not(node: Node) -> None:
    server, _ = build_server(node)
    app = build_app(node, server, "127.0.0.1")
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8080") as http:
        read = await http.get("/healthz")
        refused = await http.post("/webhooks?status=dead&token=secret-in-query")
        deleted = await http.delete("/webhooks", headers={"x-bzzz-session": "ops"})

    assert read.status_code == 200
    assert (refused.status_code, deleted.status_code) == (401, 405)
    records = await chain_of(node)
    assert [(r.action, r.outcome, r.session, r.principal) for r in records] == [
        ("http:POST /webhooks", "HTTP_401", "http", "unauthenticated"),
        ("http:DELETE /webhooks", "HTTP_405", session_key("http", "ops"), "anonymous"),
    ]
    # The session's name lets whoever holds it speak in that session: the trail keeps a digest.
    assert all("ops" not in r.session for r in records)
    assert all("secret-in-query" not in str(r.to_json()) for r in records)


async def test_model_calls_are_recorded_sent_or_refused_without_the_prompt(node: Node) -> None:
    options = CompletionOptions(messages=[{"role": "user", "content": CANARY}])
    model = _Model()

    # The test node has no model endpoint: the call is refused before anything is sent.
    with pytest.raises(BzzzError) as refused:
        await node.llm.complete(options, agent_id="hosted-1", purpose="task")
    node.llm.client = model
    answer = await node.llm.complete(options, agent_id="hosted-1", purpose="summary")

    assert answer.content == "fine"
    assert len(model.requests) == 1
    records = await chain_of(node)
    assert [(r.action, r.agent, r.outcome) for r in records] == [
        ("model:task", "hosted-1", "OPENAI_ERROR"),
        ("model:summary", "hosted-1", "ok"),
    ]
    assert refused.value.code == "OPENAI_ERROR"
    assert {r.principal for r in records} == {f"node:{node.node_id}"}
    assert all(CANARY not in str(r.to_json()) for r in records)
