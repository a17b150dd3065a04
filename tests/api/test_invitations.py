"""An invitation into a thread (WHOOSH collaborate) goes to agents of the thread's project only."""

from __future__ import annotations

import httpx

HANDLE = "X-Bzzz-Agent-Handle"


async def announce(http: httpx.AsyncClient, agent_id: str, project: str) -> str:
    body = {"agent_id": agent_id, "role": "dev", "project": project}
    answer = await http.post("/api/v1/agents", json=body)
    assert answer.status_code == 201, answer.text
    return str(answer.json()["agent_handle"])


async def test_an_invitation_into_a_thread_stays_in_its_project(http: httpx.AsyncClient) -> None:
    lead = await announce(http, "lead", "alpha")
    await announce(http, "peer", "alpha")
    await announce(http, "mate", "alpha")
    outsider = await announce(http, "outsider", "beta")
    opened = await http.post("/agents/peer/collaborate", json={"topic": "alpha's plans"},
                             headers={HANDLE: lead})  # fmt: skip
    thread_id = opened.json()["thread"]["id"]

    foreign = await http.post("/agents/outsider/collaborate", json={"thread_id": thread_id},
                              headers={HANDLE: lead})  # fmt: skip
    inbox = await http.get("/api/v1/content", params={"address": "bzzz://outsider/inbox"},
                           headers={HANDLE: outsider})  # fmt: skip
    local = await http.post("/agents/mate/collaborate", json={"thread_id": thread_id},
                            headers={HANDLE: lead})  # fmt: skip

    assert (foreign.status_code, foreign.json()["code"]) == (400, "INVALID_PARAMETERS")
    assert inbox.status_code == 200, inbox.text
    assert inbox.json()["content"]["messages"] == []
    assert local.status_code == 201, local.text
    assert local.json()["post"]["delivery_results"]["recipients"] == ["mate"]
