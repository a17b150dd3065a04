"""POST /api/v1/reservations/check through the node's app: the contract's answer, and who may
ask it (an agent token as its own agent only and in its project; an admin of the project)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from e2e.markdown import of_kind

from bzzz.api.app import build_app
from bzzz.api.reservations import CheckAnswer
from bzzz.eventlog import Caller
from bzzz.mcp.server import build_server
from bzzz.node.core import Node
from bzzz.principal import ALL, LOCAL, Scope
from bzzz.reservations.schemas import ReserveInput
from bzzz.schemas import AnnounceInput

CHECK = "/api/v1/reservations/check"
PAGE = Path(__file__).resolve().parents[2] / "docs" / "reservations.md"


@pytest.fixture
async def http(node: Node) -> AsyncIterator[httpx.AsyncClient]:
    server, _ = build_server(node)
    transport = httpx.ASGITransport(app=build_app(node, server, "127.0.0.1"))
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:7331") as client:
        yield client


async def _token(node: Node, name: str, project: str, scope: Scope, agent: str | None) -> str:
    _, secret = await node.access.create_token(
        LOCAL, name, [project], [ALL], scope, None, agent=agent
    )
    return f"Bearer {secret}"


async def _held(node: Node) -> dict[str, object]:
    alice, bob = Caller("alice-session"), Caller("bob-session")
    await node.agents.announce(alice, AnnounceInput(agent_id="alice", role="dev", project="shop"))
    await node.agents.announce(bob, AnnounceInput(agent_id="bob", role="dev", project="shop"))
    made = await node.reservations.reserve(alice, ReserveInput(paths=["src/**"]))
    return dict(made["reservation"])


async def test_the_check_answers_the_contract_with_the_agents_own_token(
    node: Node, http: httpx.AsyncClient
) -> None:
    held = await _held(node)
    bob = await _token(node, "bob", "shop", Scope.WRITE, "bob")
    answer = await http.post(
        CHECK,
        json={"agent": "bob", "paths": ["src/a.py", "docs/b.md"], "source": "hook"},
        headers={"Authorization": bob},
    )

    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["agent"] == "bob" and body["allowed"] is False
    refused, free = body["paths"]
    assert refused["path"] == "src/a.py" and refused["allowed"] is False
    assert refused["fencing_token"] is None
    assert refused["holder"] == {
        "agent": "alice",
        "reservation_id": held["id"],
        "paths": ["src/**"],
        "expires_at": held["expires_at"],
        "fencing_token": held["fencing_token"],
        "exclusive": True,
    }
    assert free["allowed"] is True and free["holder"] is None


async def test_the_check_refuses_another_projects_token_and_an_agent_token_of_another_agent(
    node: Node, http: httpx.AsyncClient
) -> None:
    await _held(node)
    body = {"agent": "bob", "paths": ["src/a.py"]}
    elsewhere = await _token(node, "blog-admin", "blog", Scope.ADMIN, None)
    alice = await _token(node, "alice", "shop", Scope.WRITE, "alice")
    shop_admin = await _token(node, "shop-admin", "shop", Scope.ADMIN, None)
    other_project = await http.post(CHECK, json=body, headers={"Authorization": elsewhere})
    other_agent = await http.post(CHECK, json=body, headers={"Authorization": alice})
    admin = await http.post(CHECK, json=body, headers={"Authorization": shop_admin})
    bad = await http.post(
        CHECK, json={"agent": "bob", "paths": ["../x"]}, headers={"Authorization": shop_admin}
    )

    # An agent of another project is not shown to exist.
    assert other_project.status_code == 404, other_project.text
    assert other_project.json()["code"] == "AGENT_NOT_FOUND"
    assert other_agent.status_code == 403, other_agent.text
    assert other_agent.json()["details"]["missing"] == "agent:bob"
    assert admin.status_code == 200 and admin.json()["allowed"] is False
    assert bad.status_code == 400 and bad.json()["details"]["field"] == "paths.0"


async def test_the_answer_shown_in_the_docs_has_the_answers_shape(
    node: Node, http: httpx.AsyncClient
) -> None:
    [block] = [b for b in of_kind(PAGE, "text") if '"fencing_token"' in b.body]
    shown = json.loads(block.body)
    await _held(node)
    admin = await _token(node, "shop-admin", "shop", Scope.ADMIN, None)
    real = await http.post(
        CHECK,
        json={"agent": "bob", "paths": ["src/api/routes.py", "README.md"]},
        headers={"Authorization": admin},
    )

    CheckAnswer.model_validate(shown)
    body = real.json()
    assert set(shown) == set(body)
    for item, got in zip(shown["paths"], body["paths"], strict=True):
        assert set(item) == set(got)
    assert set(shown["paths"][0]["holder"]) == set(body["paths"][0]["holder"])


async def test_an_agent_that_never_announced_is_checked_in_its_tokens_project(
    node: Node, http: httpx.AsyncClient
) -> None:
    """A guard of an agent that never announced still refuses what another holds."""
    held = await _held(node)
    carol = await _token(node, "carol", "shop", Scope.WRITE, "carol")
    reader = await _token(node, "reader", "shop", Scope.READ, None)
    answer = await http.post(
        CHECK, json={"agent": "carol", "paths": ["src/a.py"]}, headers={"Authorization": carol}
    )
    unknown = await http.post(
        CHECK, json={"agent": "carol", "paths": ["src/a.py"]}, headers={"Authorization": reader}
    )

    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["project"] == "shop" and body["allowed"] is False
    assert body["paths"][0]["holder"]["reservation_id"] == held["id"]
    assert unknown.status_code == 404 and unknown.json()["code"] == "AGENT_NOT_FOUND"
