"""Wire shapes of the six tools' inputs, with every bound a hostile client could test.

``validate_input`` turns pydantic's errors into one ``InvalidParameters`` that names the field
and the problem, never echoing large or internal text.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    field_validator,
)

from bzzz.errors import InvalidParameters

MAX_CONTENT_BYTES = 256 * 1024

Identifier = Annotated[
    str, StringConstraints(strip_whitespace=True, pattern=r"^[A-Za-z0-9._-]{1,128}$")
]
# Ids the network minted (messages, threads, tasks) are at most 64 characters long.
MintedId = Annotated[
    str, StringConstraints(strip_whitespace=True, pattern=r"^[A-Za-z0-9._-]{1,64}$")
]
ShortText = Annotated[str, StringConstraints(max_length=256)]
AddressText = Annotated[str, StringConstraints(min_length=1, max_length=1024)]
Priority = Literal["low", "medium", "high", "urgent"]


class _Input(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=False)


class AnnounceInput(_Input):
    """bzzz_announce parameters."""

    agent_id: Identifier
    role: Identifier
    capabilities: list[Annotated[str, StringConstraints(min_length=1, max_length=128)]] = Field(
        default_factory=list, max_length=64
    )
    specialization: ShortText | None = None
    max_tasks: int = Field(3, ge=1, le=1000)
    project: Identifier | None = None
    task: Identifier | None = None


class FilterCriteria(_Input):
    """bzzz_lookup filter_criteria."""

    expertise: list[Annotated[str, StringConstraints(min_length=1, max_length=128)]] = Field(
        default_factory=list, max_length=32
    )
    availability: bool | None = None
    performance_threshold: float | None = Field(None, ge=0, le=1)


class LookupInput(_Input):
    """bzzz_lookup parameters."""

    semantic_address: AddressText
    filter_criteria: FilterCriteria | None = None
    limit: int = Field(100, ge=1, le=1000)


class GetInput(_Input):
    """bzzz_get parameters."""

    address: AddressText
    include_metadata: bool = True
    max_history: int = Field(10, ge=0, le=1000)


class PostInput(_Input):
    """bzzz_post parameters."""

    target_address: AddressText
    message_type: Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_.-]{1,64}$")]
    content: dict[str, Any]
    priority: Priority = "medium"
    thread_id: Identifier | None = None
    agent_id: Identifier | None = None
    reply_to: MintedId | None = None
    stance: Literal["agree", "disagree"] | None = None

    @field_validator("content")
    @classmethod
    def _strict_json(cls, content: dict[str, Any]) -> dict[str, Any]:
        # NaN and Infinity parse, but the envelope's wire form turns them into null, so the
        # signature would no longer match and the network would drop the message.
        try:
            json.dumps(content, allow_nan=False, default=str)
        except ValueError:
            raise ValueError("content must be plain JSON (no NaN or Infinity)") from None
        return content


class ThreadInput(_Input):
    """bzzz_thread parameters."""

    action: Literal[
        "create",
        "join",
        "leave",
        "list",
        "summarize",
        "pause",
        "resume",
        "resolve",
        "close",
        "review",
    ]
    thread_id: Identifier | None = None
    participants: list[Identifier] | None = Field(None, max_length=100)
    topic: (
        Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=512)]
        | None
    ) = None
    agent_id: Identifier | None = None
    reason: (
        Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=2000)]
        | None
    ) = None
    roles: list[Identifier] | None = Field(None, min_length=1, max_length=10)
    task_id: MintedId | None = None
    criteria: list[Annotated[str, StringConstraints(min_length=1, max_length=256)]] | None = Field(
        None, min_length=1, max_length=20
    )


class SubscribeInput(_Input):
    """bzzz_subscribe parameters."""

    # Required to subscribe; unsubscribe names only the subscription_id.
    event_types: list[Annotated[str, StringConstraints(min_length=1, max_length=64)]] | None = (
        Field(None, min_length=1, max_length=16)
    )
    filter_address: AddressText | None = None
    callback_webhook: Annotated[str, StringConstraints(max_length=2048)] | None = None
    action: Literal["subscribe", "unsubscribe"] = "subscribe"
    subscription_id: MintedId | None = None


ModelT = TypeVar("ModelT", bound=BaseModel)


def _describe(exc: ValidationError) -> tuple[str, list[dict[str, str]]]:
    problems = []
    for error in exc.errors(include_url=False, include_input=False, include_context=False):
        field = ".".join(str(part) for part in error["loc"]) or "parameters"
        problems.append({"field": field, "problem": error["msg"]})
    first = problems[0]
    message = f"invalid parameter '{first['field']}': {first['problem']}"
    if len(problems) > 1:
        message += f" (and {len(problems) - 1} more)"
    return message, problems


def validate_input(model: type[ModelT], arguments: dict[str, Any]) -> ModelT:
    """Validate raw tool arguments into ``model`` or raise InvalidParameters naming the field."""
    try:
        value = model.model_validate(arguments)
    except ValidationError as exc:
        message, problems = _describe(exc)
        raise InvalidParameters(message, details={"problems": problems}) from None
    content = getattr(value, "content", None)
    if content is not None:
        size = len(json.dumps(content, default=str))
        if size > MAX_CONTENT_BYTES:
            raise InvalidParameters(
                f"content is too large ({size} bytes; at most {MAX_CONTENT_BYTES})",
                details={"field": "content", "size": size, "limit": MAX_CONTENT_BYTES},
            )
    return value
