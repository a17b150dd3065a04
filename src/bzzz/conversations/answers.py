"""What a post answers (``bzzz_post``'s result), and the address it went to."""

from __future__ import annotations

import time
from collections.abc import Callable
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
    online: Callable[[str], bool] = lambda agent_id: True,
) -> dict[str, Any]:
    """What bzzz_post answers: the message id, where it went, who got it and who did not.

    ``success`` says the post was stored. ``delivery_results.delivered`` says whether an agent
    online received it: a post whose recipients are all offline is kept in their inboxes
    (``queued``, read when they come back) and answers ``delivered: false`` with a
    ``reason``, as a post that no agent matched or that every recipient refused does.
    """
    undelivered = [
        {"agent_id": agent, "reason": reason}
        for agent, reason in outcome.get("undelivered", {}).items()
    ]
    if not recipients:
        undelivered.append({"agent_id": None, "reason": "no agent matches the address"})
    stored: list[str] = list(outcome.get("delivered", []))
    queued = [agent for agent in stored if not online(agent)]
    delivery: dict[str, Any] = {
        "delivered": len(queued) < len(stored),
        "recipients": stored,
        "delivery_time": round((time.perf_counter() - started) * 1000, 3),
        "undelivered": undelivered,
        "queued": queued,
    }
    if not delivery["delivered"]:
        delivery["reason"] = _why_not_delivered(recipients, queued, undelivered)
    result: dict[str, Any] = {
        "success": True,
        "message_id": message_id,
        "target_address": target_of(params),
        "message_type": params.message_type,
        "delivery_results": delivery,
        "posted_at": iso(domain.utcnow()),
    }
    if params.thread_id:
        result["thread_id"] = params.thread_id
    if outcome.get("tasks"):
        result["tasks"] = outcome["tasks"]
    if outcome.get("task_update"):
        result["task_update"] = outcome["task_update"]
    return result


def _why_not_delivered(
    recipients: list[str], queued: list[str], undelivered: list[dict[str, Any]]
) -> str:
    """Why no agent online received a post (its result's ``delivery_results.reason``)."""
    if not recipients:
        return "no online agent matches the address; the message is stored for no one"
    if queued:
        names = ", ".join(queued)
        return f"offline: {names} (kept in the inbox, read when the agent is back online)"
    return "; ".join(f"{u['agent_id']}: {u['reason']}" for u in undelivered)
