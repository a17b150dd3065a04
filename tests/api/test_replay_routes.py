"""GET /api/v1/threads/{id}?as_of=… and /api/v1/threads/{id}/envelopes on an in-process node."""

from __future__ import annotations

import httpx

from .test_rest import announce, refused

HANDLE = "X-Bzzz-Agent-Handle"


async def _thread(http: httpx.AsyncClient) -> tuple[str, str]:
    """A thread of two agents with a decision both agree with; its id and a handle."""
    lead = await announce(http, "lead", "architect")
    await announce(http, "dev", "developer")
    created = await http.post(
        "/agents/dev/collaborate", json={"topic": "Cache"}, headers={HANDLE: lead}
    )
    assert created.status_code == 201, created.text
    return created.json()["thread"]["id"], lead


async def test_a_thread_is_read_as_of_a_sequence_and_its_envelopes_are_listed(
    http: httpx.AsyncClient,
) -> None:
    thread_id, _ = await _thread(http)
    listed = await http.get(f"/api/v1/threads/{thread_id}/envelopes")
    assert listed.status_code == 200, listed.text
    envelopes = listed.json()["envelopes"]
    assert envelopes[0]["type"] == "thread.created"
    assert all(e["verified"] for e in envelopes)
    first = await http.get(
        f"/api/v1/threads/{thread_id}", params={"as_of": str(envelopes[0]["seq"])}
    )
    live = await http.get(f"/api/v1/threads/{thread_id}")

    assert first.status_code == 200, first.text
    assert first.json()["content"]["as_of"]["sequence"] == envelopes[0]["seq"]
    assert first.json()["content"]["thread"]["participants"] == ["dev", "lead"]
    last = await http.get(f"/api/v1/threads/{thread_id}", params={"as_of": envelopes[-1]["time"]})
    assert last.json()["content"]["thread"] == live.json()["content"]["thread"]


async def test_a_bad_as_of_or_an_unknown_thread_is_an_error_response(
    http: httpx.AsyncClient,
) -> None:
    thread_id, _ = await _thread(http)
    refused(
        await http.get(f"/api/v1/threads/{thread_id}", params={"as_of": "last tuesday"}),
        400,
        "INVALID_PARAMETERS",
    )
    refused(
        await http.get(f"/api/v1/threads/{thread_id}", params={"as_of": "1999-01-01T00:00:00Z"}),
        404,
        "THREAD_NOT_FOUND",
    )
    refused(await http.get("/api/v1/threads/thread-nope/envelopes"), 404, "THREAD_NOT_FOUND")
    refused(await http.get(f"/api/v1/threads/{'t' * 2000}/envelopes"), 400, "INVALID_PARAMETERS")
