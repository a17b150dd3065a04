"""GET /api/v1/threads/{thread_id}/envelopes: a thread's envelopes as the signed log holds them;
GET /api/v1/threads/{thread_id}/timeline: the same entries, each with what it did.

In log order, each verified again (who signed it, whether the signature holds), retention's
stand-ins as such: what `bzzz thread replay --json` prints, for whoever may read the thread
(the dashboard's time slider takes its stops from it). The thread itself as it stood at one of
them is GET /api/v1/threads/{thread_id}?as_of=….

The timeline (``conversations/timeline.py``) is the thread as it happened: joins, leaves,
pauses, resumptions, resolutions and closes (who, why), escalations raised (rule, priority,
reason) and what their actions did, decisions, stances and the consensus, and each message by
its id, in log order. The dashboard's transcript interleaves it with the thread's messages and
its history slider stops at its entries.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from starlette.requests import Request

from bzzz.api import answers as a
from bzzz.api.handlers import API, Operation, caller_of, query_of
from bzzz.node.core import Node
from bzzz.schemas import GetInput, validate_input


class Replayed(BaseModel):
    """One envelope of the thread (or the stand-in of a purged one)."""

    seq: int
    envelope_id: str | None
    type: str | None
    time: str | None
    origin: str | None
    signed_by: str | None
    verified: bool
    problem: str | None
    stand_in: dict[str, Any] | None

    model_config = ConfigDict(extra="allow")


class EnvelopesAnswer(a.Answer):
    """GET /api/v1/threads/{thread_id}/envelopes."""

    thread_id: str
    envelopes: list[Replayed]
    count: int


# The entries one answer holds at most (the last ones up to as_of): the answer's size is
# bounded whatever the thread's length; reading the log is counted as an as_of read.
MAX_ENTRIES = 5000


class TimelineQuery(BaseModel):
    """GET /api/v1/threads/{thread_id}/timeline."""

    model_config = ConfigDict(extra="forbid")

    as_of: int | None = Field(
        None, ge=1, description="the entries up to this log sequence (default: all)"
    )
    limit: int = Field(
        MAX_ENTRIES, ge=1, le=MAX_ENTRIES, description="the last this many entries at most"
    )


class TimelineEntry(Replayed):
    """One entry of the thread's timeline: the log's record and what it did.

    ``kind``: created, joined, left, paused, resumed, resolved, closed, escalated,
    escalation_action, message, decision, stance, consensus, summarized, slurp; refused (the
    projector refused it: it changed nothing), unreadable (it does not verify, or is sealed
    under a key this node lacks), other."""

    kind: str
    applied: bool | None
    by: str | None = None


class TimelineAnswer(a.Answer):
    """GET /api/v1/threads/{thread_id}/timeline."""

    thread_id: str
    entries: list[TimelineEntry]
    count: int
    more: bool


def _thread_id(request: Request) -> str:
    thread_id: str = request.path_params["thread_id"]
    # The thread id is checked as bzzz_get checks an address's.
    validate_input(GetInput, {"address": f"bzzz://*/threads/{thread_id}"})
    return thread_id


def operations(node: Node) -> list[Operation]:
    """The replay's routes."""

    async def envelopes(request: Request) -> dict[str, Any]:
        thread_id = _thread_id(request)
        found = await node.agents.thread_envelopes(caller_of(request), thread_id)
        return {"success": True, "thread_id": thread_id, "envelopes": found, "count": len(found)}

    async def timeline(request: Request) -> dict[str, Any]:
        thread_id = _thread_id(request)
        query = query_of(request, TimelineQuery)
        found = await node.timeline.timeline(caller_of(request), thread_id, as_of=query.as_of)
        shown = found[-query.limit :]
        return {"success": True, "thread_id": thread_id, "entries": shown, "count": len(shown),
                "more": len(found) > len(shown)}  # fmt: skip

    return [
        Operation("GET", f"{API}/threads/{{thread_id}}/timeline",
                  "A thread as it happened: its log's entries, each with what it did",
                  timeline, "threads", query=TimelineQuery, answer=TimelineAnswer,
                  errors=(400, 403, 404, 429)),
        Operation("GET", f"{API}/threads/{{thread_id}}/envelopes",
                  "A thread's envelopes in log order, each verified again (a replay)",
                  envelopes, "threads", answer=EnvelopesAnswer, errors=(400, 403, 404)),
    ]  # fmt: skip
