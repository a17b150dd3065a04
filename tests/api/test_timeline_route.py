"""GET /api/v1/threads/{id}/timeline on an in-process node: the entries in log order, cut at
as_of and to the last ``limit``; bad input and an unknown thread are error responses."""

from __future__ import annotations

import httpx

from bzzz.eventlog import Caller
from bzzz.node.core import Node
from bzzz.schemas import AnnounceInput, ThreadInput

from .test_replay_routes import _thread
from .test_rest import refused


async def test_the_timeline_is_cut_at_as_of_and_to_its_limit(
    http: httpx.AsyncClient, node: Node
) -> None:
    thread_id, _ = await _thread(http)
    qa = Caller("s-qa")
    await node.agents.announce(qa, AnnounceInput(agent_id="qa", role="tester"))
    await node.conversations.thread(qa, ThreadInput(action="join", thread_id=thread_id))
    whole = (await http.get(f"/api/v1/threads/{thread_id}/timeline")).json()
    first = await http.get(
        f"/api/v1/threads/{thread_id}/timeline", params={"as_of": str(whole["entries"][0]["seq"])}
    )
    last = await http.get(f"/api/v1/threads/{thread_id}/timeline", params={"limit": "1"})

    assert [e["kind"] for e in whole["entries"]] == ["created", "joined"]
    assert whole["entries"][0]["by"] == "lead" and whole["entries"][1]["agent"] == "qa"
    assert whole["more"] is False
    assert [e["kind"] for e in first.json()["entries"]] == ["created"]
    assert [e["kind"] for e in last.json()["entries"]] == ["joined"]
    assert last.json()["more"] is True


async def test_bad_timeline_requests_are_error_responses(http: httpx.AsyncClient) -> None:
    thread_id, _ = await _thread(http)
    url = f"/api/v1/threads/{thread_id}/timeline"
    refused(await http.get(url, params={"as_of": "0"}), 400, "INVALID_PARAMETERS")
    refused(await http.get(url, params={"limit": "5001"}), 400, "INVALID_PARAMETERS")
    refused(await http.get(url, params={"since": "1"}), 400, "INVALID_PARAMETERS")
    refused(await http.get("/api/v1/threads/thread-nope/timeline"), 404, "THREAD_NOT_FOUND")
    refused(await http.get(f"/api/v1/threads/{'t' * 2000}/timeline"), 400, "INVALID_PARAMETERS")
