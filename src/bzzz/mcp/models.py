"""Output shapes of the six first tools (bzzz_reserve's is beside its tool, mcp/reserve.py).

Every field but ``success`` is optional so that one schema fits both the success result and the
reference's ErrorResponse (some clients validate error results against the output schema too).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class ToolResponse(BaseModel):
    """Fields every tool result may carry; the error fields are the reference's ErrorResponse."""

    model_config = ConfigDict(extra="allow")

    success: bool = Field(description="false when the call failed; then error/code/details")
    error: str | None = Field(None, description="what went wrong (errors only)")
    code: str | None = Field(None, description="error code, e.g. INVALID_PARAMETERS")
    details: Any = Field(None, description="structured error details")
    timestamp: str | None = None


class AnnounceOutput(ToolResponse):
    """bzzz_announce result."""

    message: str | None = None
    agent: dict[str, Any] | None = None


class LookupOutput(ToolResponse):
    """bzzz_lookup result."""

    address: str | None = None
    parsed_address: dict[str, Any] | None = None
    matches: list[dict[str, Any]] | None = None
    count: int | None = None
    total_matches: int | None = None
    query_time: str | None = None


class GetOutput(ToolResponse):
    """bzzz_get result."""

    address: str | None = None
    content: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None
    retrieved_at: str | None = None


class PostOutput(ToolResponse):
    """bzzz_post result."""

    message_id: str | None = None
    target_address: str | None = None
    message_type: str | None = None
    thread_id: str | None = None
    delivery_results: dict[str, Any] | None = None
    tasks: dict[str, str] | None = None
    task_update: dict[str, Any] | None = None
    posted_at: str | None = None
    fact: dict[str, Any] | None = Field(None, description="the fact stated (message_type fact)")


class ThreadOutput(ToolResponse):
    """bzzz_thread result."""

    action: str | None = None
    thread_id: str | None = None
    result: dict[str, Any] | list[dict[str, Any]] | None = None


class SubscribeOutput(ToolResponse):
    """bzzz_subscribe result."""

    subscription_id: str | None = None
    event_types: list[str] | None = None
    filter_address: str | None = None
    callback_webhook: str | None = None
    webhook_secret: str | None = None
    signature_header: str | None = None
    resource_uri: str | None = None
    subscribed_at: str | None = None
    status: str | None = None
