"""What a post answers (``bzzz_post``'s result), and the address it went to."""

from __future__ import annotations

import time
from typing import Any

from bzzz import domain
from bzzz.domain import iso
from bzzz.schemas import PostInput


def target_of(params: PostInput) -> str:
    """The address a post went to: the one given, else its thread's."""
    return params.target_address or f"bzzz://*/threads/{params.thread_id}"


def post_result(
    params: PostInput,
    message_id: str,
    recipients: list[str],
    outcome: dict[str, Any],
    started: float,
) -> dict[str, Any]:
    """What bzzz_post answers: the message id, where it went, what it delivered or not."""
    undelivered = [
        {"agent_id": agent, "reason": reason}
        for agent, reason in outcome.get("undelivered", {}).items()
    ]
    if not recipients:
        undelivered.append({"agent_id": None, "reason": "no agent matches the address"})
    result: dict[str, Any] = {
        "success": True,
        "message_id": message_id,
        "target_address": target_of(params),
        "message_type": params.message_type,
        "delivery_results": {
            "delivered": bool(outcome.get("delivered")),
            "recipients": outcome.get("delivered", []),
            "delivery_time": round((time.perf_counter() - started) * 1000, 3),
            "undelivered": undelivered,
        },
        "posted_at": iso(domain.utcnow()),
    }
    if params.thread_id:
        result["thread_id"] = params.thread_id
    if outcome.get("tasks"):
        result["tasks"] = outcome["tasks"]
    if outcome.get("task_update"):
        result["task_update"] = outcome["task_update"]
    return result
