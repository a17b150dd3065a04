"""GET /api/v1/threads/{thread_id}/envelopes: a thread's envelopes as the signed log holds them.

In log order, each verified again (who signed it, whether the signature holds), retention's
stand-ins as such: what `bzzz thread replay --json` prints, for whoever may read the thread
(the dashboard's time slider takes its stops from it). The thread itself as it stood at one of
them is GET /api/v1/threads/{thread_id}?as_of=….
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict
from starlette.requests import Request

from bzzz.api import answers as a
from bzzz.api.handlers import API, Operation, caller_of
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


def operations(node: Node) -> list[Operation]:
    """The replay's route."""

    async def envelopes(request: Request) -> dict[str, Any]:
        thread_id = request.path_params["thread_id"]
        # The thread id is checked as bzzz_get checks an address's.
        validate_input(GetInput, {"address": f"bzzz://*/threads/{thread_id}"})
        found = await node.agents.thread_envelopes(caller_of(request), thread_id)
        return {"success": True, "thread_id": thread_id, "envelopes": found, "count": len(found)}

    return [
        Operation("GET", f"{API}/threads/{{thread_id}}/envelopes",
                  "A thread's envelopes in log order, each verified again (a replay)",
                  envelopes, "threads", answer=EnvelopesAnswer, errors=(400, 403, 404)),
    ]  # fmt: skip
