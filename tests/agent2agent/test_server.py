"""BZZZ agents as A2A agents: the official a2a-sdk client against a served node."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types import GetTaskRequest, Message, Part, Role, SendMessageRequest, TaskState
from a2a.utils.errors import A2AError
from e2e.support import call, eventually, http_session

from bzzz.audit import reading
from bzzz.principal import Scope

from .conftest import Served

pytestmark = pytest.mark.integration


def _auth(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}


async def _announce(served: Served, secret: str, agent_id: str, project: str) -> None:
    async with httpx.AsyncClient(base_url=served.url, headers=_auth(secret)) as http:
        answer = await http.post(
            "/api/v1/agents",
            json={
                "agent_id": agent_id,
                "role": "reviewer",
                "capabilities": ["code_review", "security_analysis"],
                "project": project,
            },
        )
        assert answer.status_code == 201, answer.text


async def _agent_info(served: Served, secret: str) -> dict[str, Any]:
    async with httpx.AsyncClient(base_url=served.url, headers=_auth(secret)) as http:
        got = await http.get("/api/v1/agents/reviewer-1")
        info: dict[str, Any] = got.json()["content"]["agent_info"]
        return info


def _message(text: str) -> SendMessageRequest:
    return SendMessageRequest(
        message=Message(role=Role.ROLE_USER, message_id="m-1", parts=[Part(text=text)])
    )


async def _card(served: Served, secret: str, agent_id: str) -> Any:
    async with httpx.AsyncClient(headers=_auth(secret)) as http:
        return await A2ACardResolver(http, f"{served.url}/a2a/{agent_id}").get_agent_card()


async def test_an_a2a_client_follows_its_task_to_the_bzzz_agents_result(served: Served) -> None:
    owner = await served.token("reviewer", ["shop"])
    client_secret = await served.token("a2a-client", ["shop"])
    # The BZZZ agent is on the network through its MCP client, as any BZZZ agent is.
    async with http_session(f"{served.url}/mcp", headers=_auth(owner)) as mcp:
        await call(mcp, "bzzz_announce", {
            "agent_id": "reviewer-1", "role": "reviewer",
            "capabilities": ["code_review", "security_analysis"], "project": "shop",
        })  # fmt: skip
        card = await _card(served, client_secret, "reviewer-1")
        assert card.name == "reviewer-1"
        assert {s.id for s in card.skills} == {"code_review", "security_analysis"}
        assert card.supported_interfaces[0].url == f"{served.url}/a2a/reviewer-1"
        assert "bearer" in card.security_schemes and card.capabilities.streaming

        http = httpx.AsyncClient(headers=_auth(client_secret), timeout=30)
        client = ClientFactory(ClientConfig(httpx_client=http, streaming=True)).create(card)
        events: list[Any] = []

        async def follow() -> None:
            async for event in client.send_message(_message("Review the checkout handler")):
                events.append(event)

        following = asyncio.create_task(follow())
        got = await eventually(
            lambda: call(mcp, "bzzz_get", {"address": "bzzz://reviewer-1/tasks"}),
            lambda body: bool(body["content"]["tasks"]),
        )
        task = got["content"]["tasks"][0]
        assert task["description"] == "Review the checkout handler"
        await call(mcp, "bzzz_post", {
            "target_address": "bzzz://reviewer-1", "message_type": "task_progress",
            "content": {"task_id": task["id"], "percent": 50},
        })  # fmt: skip

        async def states() -> list[Any]:
            return [e.status_update.status.state for e in events if e.HasField("status_update")]

        # The stream shows the work under way before it ends.
        await eventually(states, lambda seen: TaskState.TASK_STATE_WORKING in seen)
        await call(mcp, "bzzz_post", {
            "target_address": "bzzz://reviewer-1", "message_type": "task_complete",
            "content": {"task_id": task["id"], "result": "two findings, both fixed"},
        })  # fmt: skip
        async with asyncio.timeout(20):
            await following

        first, last = events[0], events[-1]
        assert first.task.id == task["id"]
        assert first.task.status.state == TaskState.TASK_STATE_SUBMITTED
        assert last.task.status.state == TaskState.TASK_STATE_COMPLETED
        assert last.task.artifacts[0].parts[0].text == "two findings, both fixed"

        # tasks/get answers the same ending.
        again = await client.get_task(GetTaskRequest(id=task["id"]))
        assert again.status.state == TaskState.TASK_STATE_COMPLETED
        await client.close()
        await http.aclose()


async def test_the_same_endpoint_answers_the_0_3_method_names(served: Served) -> None:
    owner = await served.token("reviewer", ["shop"])
    client_secret = await served.token("a2a-client", ["shop"])
    bystander = await served.token("bystander", ["shop"])
    await _announce(served, owner, "reviewer-1", "shop")
    before = await _agent_info(served, owner)
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "message/send",
        "params": {
            "message": {
                "role": "user", "messageId": "m-03", "kind": "message",
                "parts": [{"kind": "text", "text": "Name the service"}],
            }
        },
    }  # fmt: skip
    async with httpx.AsyncClient(base_url=served.url, headers=_auth(client_secret)) as http:
        sent = (await http.post("/a2a/reviewer-1", json=body)).json()
        assert sent["result"]["kind"] == "task", sent
        assert sent["result"]["status"]["state"] == "submitted"
        task_id = sent["result"]["id"]
        got = await http.post(
            "/a2a/reviewer-1",
            json={"jsonrpc": "2.0", "id": 2, "method": "tasks/get", "params": {"id": task_id}},
        )
        assert got.json()["result"]["id"] == task_id
        cancel = {"jsonrpc": "2.0", "id": 3, "method": "tasks/cancel", "params": {"id": task_id}}
        # Another principal of the project neither reads nor cancels the caller's task.
        other = await http.post("/a2a/reviewer-1", json=cancel, headers=_auth(bystander))
        assert other.json()["error"]["code"] == -32001  # TaskNotFound
        canceled = await http.post("/a2a/reviewer-1", json=cancel)
        assert canceled.json()["result"]["status"]["state"] == "canceled", canceled.json()
        again = await http.post(
            "/a2a/reviewer-1",
            json={"jsonrpc": "2.0", "id": 4, "method": "tasks/cancel", "params": {"id": task_id}},
        )
        assert again.json()["error"]["code"] == -32002  # TaskNotCancelable: it has ended
    # The cancel freed the agent's slot, and its record shows no failure of its own.
    after = await _agent_info(served, owner)
    assert after["active_tasks"] == 0
    assert after["performance"] == before["performance"]


async def test_a_principal_without_a_grant_for_the_agents_project_is_refused(
    served: Served,
) -> None:
    owner = await served.token("reviewer", ["shop"])
    outsider = await served.token("outsider", ["other"])
    await _announce(served, owner, "reviewer-1", "shop")
    async with httpx.AsyncClient(base_url=served.url, headers=_auth(outsider)) as http:
        card = await http.get("/a2a/reviewer-1/.well-known/agent-card.json")
        assert card.status_code == 404 and card.json()["code"] == "AGENT_NOT_FOUND"
        listing = (await http.get("/a2a/agents.json")).json()
        assert listing["count"] == 0
    # A client that knows the card from elsewhere sends with the outsider's credential.
    known = await _card(served, owner, "reviewer-1")
    async with httpx.AsyncClient(headers=_auth(outsider)) as http:
        client = ClientFactory(ClientConfig(httpx_client=http, streaming=False)).create(known)
        with pytest.raises(A2AError, match="AGENT_NOT_FOUND"):
            async for _ in client.send_message(_message("Review this")):
                pass
    async with http_session(f"{served.url}/mcp", headers=_auth(owner)) as mcp:
        tasks = await call(mcp, "bzzz_get", {"address": "bzzz://reviewer-1/tasks"})
        assert tasks["content"]["tasks"] == []  # the refusal changed nothing


async def test_a2a_calls_need_a_credential_and_are_audited(served: Served) -> None:
    reader = await served.token("reader", ["shop"], scope=Scope.READ)
    owner = await served.token("reviewer", ["shop"])
    await _announce(served, owner, "reviewer-1", "shop")
    async with httpx.AsyncClient(base_url=served.url) as http:
        bare = await http.get("/a2a/reviewer-1/.well-known/agent-card.json")
        assert bare.status_code == 401 and "resource_metadata" in bare.headers["www-authenticate"]
        sent = await http.post(
            "/a2a/reviewer-1",
            headers=_auth(reader),
            json={
                "jsonrpc": "2.0", "id": 1, "method": "message/send",
                "params": {"message": {"role": "user", "messageId": "m", "kind": "message",
                                       "parts": [{"kind": "text", "text": "hi"}]}},
            },
        )  # fmt: skip
        error = sent.json()["error"]
        assert "PERMISSION_DENIED" in error["message"], error
    await served.node.audit.flush()
    records = await reading.records(served.node.db, reading.Filter(node_id=served.node.node_id))
    # The refusal is recorded as one, though JSON-RPC answers it with HTTP 200.
    mine = [r for r in records if r.action == "http:POST /a2a/reviewer-1"]
    assert [r.outcome for r in mine] == ["PERMISSION_DENIED"]
