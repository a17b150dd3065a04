"""GET /api/v1/knowledge and /api/v1/knowledge/{fact_id}: a project's facts and one's history,
for the project's tokens only, described in the OpenAPI document and on the audit trail."""

from __future__ import annotations

from typing import Any

from audit.support import chain_of

from bzzz.eventlog import Caller
from bzzz.principal import LOCAL

from .test_console import Net, net  # noqa: F401 - the fixture

RETRIES = "Checkout retries carry idempotency keys; refunds do not."


async def _state(on: Net, project: str, subject: str, relation: str, obj: str) -> dict[str, Any]:
    fact: dict[str, Any] = await on.node.knowledge.state(
        Caller("routes-test", LOCAL), project, subject, relation, obj, statement=RETRIES
    )
    return fact


async def test_a_projects_token_reads_its_facts_and_a_facts_history(
    net: Net,  # noqa: F811 - the imported fixture
) -> None:
    first = await _state(net, "shop", "checkout retries", "carry", "no keys")
    net.clock.advance(60)  # the team changes its mind a minute later
    second = await _state(net, "shop", "checkout retries", "carry", "idempotency keys")
    await _state(net, "garden", "hoses", "are", "green")
    shop = await net.token("shop-reader", "shop")

    found = await net.ok(
        "GET", "/api/v1/knowledge", shop, params={"project": "shop", "about": "checkout retries"}
    )
    shown = await net.ok(
        "GET", f"/api/v1/knowledge/{first['id']}", shop, params={"project": "shop"}
    )
    then = await net.ok(
        "GET",
        "/api/v1/knowledge",
        shop,
        params={"project": "shop", "about": "checkout retries", "as_of": first["valid_from"]},
    )

    assert found["success"] is True
    assert [f["object"] for f in found["facts"]][:1] == ["idempotency keys"]
    assert all(f["project"] == "shop" for f in found["facts"])
    assert shown["fact"]["id"] == first["id"]
    assert shown["fact"]["valid_until"] is not None
    assert shown["fact"]["superseded_by"] == second["id"]
    assert [f["id"] for f in then["facts"]] == [first["id"]]  # as it stood before the change


async def test_another_projects_token_is_refused_and_the_refusal_is_audited(
    net: Net,  # noqa: F811 - the imported fixture
) -> None:
    fact = await _state(net, "shop", "checkout retries", "carry", "idempotency keys")
    garden = await net.token("garden-team", "garden")

    listed = await net.http.get("/api/v1/knowledge", params={"project": "shop"}, headers=garden)
    history = await net.http.get(
        f"/api/v1/knowledge/{fact['id']}", params={"project": "shop"}, headers=garden
    )

    assert listed.status_code == 403, listed.text
    assert listed.json()["code"] == "PERMISSION_DENIED"
    assert RETRIES not in listed.text
    assert history.status_code in (403, 404), history.text
    assert RETRIES not in history.text
    actions = [(r.action, r.outcome, r.target) for r in await chain_of(net.node)]
    assert ("http:GET /api/v1/knowledge", "PERMISSION_DENIED", "knowledge:shop") in actions


async def test_a_query_past_its_bounds_is_invalid_parameters_naming_the_field(
    net: Net,  # noqa: F811 - the imported fixture
) -> None:
    shop = await net.token("shop-reader", "shop")
    for params, field in (
        ({"project": "shop", "limit": "1000"}, "limit"),
        ({"project": "shop", "q": "x" * 501}, "q"),
        ({"project": "shop", "max_history": "-1"}, "max_history"),
        ({}, "project"),
        ({"project": "shop", "colour": "red"}, "colour"),
    ):
        answer = await net.http.get("/api/v1/knowledge", params=params, headers=shop)
        assert answer.status_code == 400, (params, answer.text)
        assert answer.json()["details"]["field"] == field, answer.text


async def test_the_openapi_document_describes_both_routes(
    net: Net,  # noqa: F811 - the imported fixture
) -> None:
    spec = (await net.http.get("/openapi.json")).json()
    listed = spec["paths"]["/api/v1/knowledge"]["get"]
    names = {p["name"] for p in listed["parameters"]}
    assert {"project", "about", "q", "as_of", "max_history", "limit"} <= names
    assert "403" in listed["responses"]
    assert "/api/v1/knowledge/{fact_id}" in spec["paths"]


async def test_a_proposed_fact_is_agreed_by_another_agent_of_the_project_not_its_author(
    net: Net,  # noqa: F811 - the imported fixture
) -> None:
    proposed = await net.node.knowledge.state(
        Caller("routes-test", LOCAL), "shop", "refunds", "carry", "no keys",
        status="proposed", author="arch",
    )  # fmt: skip
    shop = await net.token("shop-dev", "shop")
    await net.ok("POST", "/api/v1/agents", shop, json={"agent_id": "dev", "role": "developer"})
    garden = await net.token("garden-team", "garden")
    path = f"/api/v1/knowledge/{proposed['id']}/agree"

    elsewhere = await net.http.post(path, json={}, headers=garden)
    before = await net.ok("GET", "/api/v1/knowledge", shop, params={"project": "shop"})
    agreed = await net.ok("POST", path, shop, json={"agent_id": "dev"})
    someone_else = await net.http.post(path, json={"agent_id": "arch"}, headers=shop)

    assert elsewhere.status_code in (400, 403) and "no keys" not in elsewhere.text
    assert [f["status"] for f in before["facts"]] == ["proposed"]
    assert agreed["fact"]["status"] == "agreed" and "dev" in agreed["fact"]["source"]["agents"]
    # An agent the token does not hold cannot be named to agree.
    assert someone_else.status_code in (400, 403, 404), someone_else.text
    actions = [(r.action, r.outcome) for r in await chain_of(net.node)]
    assert (f"http:POST {path}", "ok") in actions
