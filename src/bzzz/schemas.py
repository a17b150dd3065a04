"""Wire shapes of the six tools' inputs, with every bound a hostile client could test.

``validate_input`` turns pydantic's errors into one ``InvalidParameters`` that names the field
and the problem, never echoing large or internal text.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Annotated, Any, Literal, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from bzzz.domain import EVENT_TYPES, TASK_UPDATE_TYPES, THREAD_MESSAGE_TYPES
from bzzz.errors import InvalidParameters

# The event types one subscription names at most: every one there is, and room for more.
MAX_EVENT_TYPES = max(16, len(EVENT_TYPES))

MAX_CONTENT_BYTES = 256 * 1024
# The deepest nesting of objects and arrays in a tool's arguments or a REST body (the object
# itself is level 1; on /mcp the JSON-RPC request and its params add two levels above it).
# Deeper JSON is refused before it is parsed deeply: Python's recursion would otherwise be
# what answers.
MAX_JSON_DEPTH = 64

# The message types the node itself acts on; other types are carried as they are.
ACTED_ON_TYPES = ("task_assignment", *TASK_UPDATE_TYPES, *THREAD_MESSAGE_TYPES)
# A type this long that is one edit away from an acted-on one is a slip, not a new type.
SLIP_MIN_LENGTH = 8


def _subject_token(value: str) -> str:
    # Ids become NATS subject tokens (bzzz.<network>.agent.<id>): a dot may only separate
    # non-empty parts, or the subject is invalid and the publish could never be stored.
    if any(not part for part in value.split(".")):
        raise PydanticCustomError(
            "subject_token",
            "'{value}' cannot be an id: a dot may only stand between letters, digits, '-' or "
            "'_' (no '.' or '..', no leading, trailing or double dots)",
            {"value": value[:64]},
        )
    return value


Identifier = Annotated[
    str,
    StringConstraints(strip_whitespace=True, pattern=r"^[A-Za-z0-9._-]{1,128}$"),
    AfterValidator(_subject_token),
]
# Ids the network minted (messages, threads, tasks) are at most 64 characters long.
MintedId = Annotated[
    str,
    StringConstraints(strip_whitespace=True, pattern=r"^[A-Za-z0-9._-]{1,64}$"),
    AfterValidator(_subject_token),
]
ShortText = Annotated[str, StringConstraints(max_length=256)]
AddressText = Annotated[str, StringConstraints(min_length=1, max_length=1024)]
Priority = Literal["low", "medium", "high", "urgent"]


def as_of_point(value: Any) -> int | datetime | None:
    """A log sequence (a positive integer, or its digits) or an ISO 8601 time (UTC if it
    names no zone): the point ``as_of`` replays a thread to."""
    if value is None or isinstance(value, datetime):
        return value if value is None or value.tzinfo else value.replace(tzinfo=UTC)
    if isinstance(value, str) and value.strip().isdigit() and len(value.strip()) <= 19:
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool) and 1 <= value < 2**63:
        return value
    if isinstance(value, str) and len(value) <= 64:
        try:
            when = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            pass
        else:
            return when if when.tzinfo else when.replace(tzinfo=UTC)
    raise PydanticCustomError(
        "as_of", "as_of must be an ISO 8601 time or a log sequence number (1 or more)"
    )


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
    before: MintedId | None = None
    after: MintedId | None = None
    # A thread as it stood at a time (ISO 8601) or a log sequence: replayed from the log.
    # Of a project's knowledge (bzzz://*@PROJECT/knowledge): the facts valid at a time.
    as_of: Annotated[int | datetime | None, BeforeValidator(as_of_point)] = None
    # A project's knowledge only: an entity, words to rank by, how many facts (at most 100).
    about: Annotated[str, StringConstraints(min_length=1, max_length=200)] | None = None
    q: Annotated[str, StringConstraints(min_length=1, max_length=500)] | None = None
    limit: int | None = Field(None, ge=1, le=100)


def _one_edit_apart(a: str, b: str) -> bool:
    """One insertion, deletion, substitution or swap of neighbours turns ``a`` into ``b``."""
    if abs(len(a) - len(b)) > 1 or a == b:
        return False
    if len(a) == len(b):
        diffs = [i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y]
        swapped = len(diffs) == 2 and diffs[1] == diffs[0] + 1 and a[diffs[0]] == b[diffs[1]]
        return len(diffs) == 1 or (swapped and a[diffs[1]] == b[diffs[0]])
    short, long = (a, b) if len(a) < len(b) else (b, a)
    i = next((k for k in range(len(short)) if short[k] != long[k]), len(short))
    return short[i:] == long[i + 1 :]


def slip_for(message_type: str) -> list[str]:
    """The acted-on types ``message_type`` is likely a slip for (empty: not a slip)."""
    if message_type in ACTED_ON_TYPES:
        return []
    lowered = message_type.lower()
    return [
        kind
        for kind in ACTED_ON_TYPES
        if kind.startswith(lowered)
        or lowered == kind
        or (len(kind) >= SLIP_MIN_LENGTH and _one_edit_apart(lowered, kind))
    ]


def _check_message_type(value: str) -> str:
    likely = slip_for(value)
    if likely:
        raise PydanticCustomError(
            "message_type_slip",
            "'{value}' looks like a slip: did you mean {likely}? The types the node acts on: "
            "{acted_on}; any other type is carried as it is",
            {
                "value": value,
                "likely": " or ".join(likely),
                "acted_on": ", ".join(ACTED_ON_TYPES),
            },
        )
    return value


class PostInput(_Input):
    """bzzz_post parameters."""

    target_address: AddressText | None = None
    message_type: Annotated[
        str,
        StringConstraints(pattern=r"^[A-Za-z0-9_.-]{1,64}$"),
        AfterValidator(_check_message_type),
    ]
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

    @model_validator(mode="after")
    def _target_or_thread(self) -> PostInput:
        if self.target_address is None and self.thread_id is None:
            raise PydanticCustomError(
                "missing_target",
                "target_address is required unless thread_id is given (a post goes to an "
                "address or into a thread)",
            )
        return self


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
    # At most every event type (a dashboard's stream asks for all of them).
    event_types: list[Annotated[str, StringConstraints(min_length=1, max_length=64)]] | None = (
        Field(None, min_length=1, max_length=MAX_EVENT_TYPES)
    )
    filter_address: AddressText | None = None
    callback_webhook: Annotated[str, StringConstraints(max_length=2048)] | None = None
    action: Literal["subscribe", "unsubscribe"] = "subscribe"
    subscription_id: MintedId | None = None


ModelT = TypeVar("ModelT", bound=BaseModel)


def too_deep(arguments: dict[str, Any], limit: int = MAX_JSON_DEPTH) -> str | None:
    """The argument (top-level key) whose value nests past ``limit`` levels (the arguments
    object being level 1), None when none does; iterative, so no depth can overflow it."""
    stack: list[tuple[Any, int, str]] = [
        (value, 2, str(name)[:64]) for name, value in arguments.items()
    ]
    while stack:
        value, depth, field = stack.pop()
        if isinstance(value, dict):
            children: Any = value.values()
        elif isinstance(value, list | tuple):
            children = value
        else:
            continue
        if depth > limit:
            return field
        stack.extend(
            (child, depth + 1, field)
            for child in children
            if isinstance(child, dict | list | tuple)
        )
    return None


def too_deep_error(field: str, limit: int = MAX_JSON_DEPTH) -> InvalidParameters:
    """The refusal of JSON nested past ``limit`` levels, naming the field that holds it."""
    problem = f"nested deeper than {limit} levels of objects and arrays"
    return InvalidParameters(
        f"invalid parameter '{field}': {problem}",
        details={
            "field": field,
            "limit": limit,
            "problems": [{"field": field, "problem": problem}],
        },
    )


def _describe(exc: ValidationError) -> tuple[str, list[dict[str, str]]]:
    problems = []
    for error in exc.errors(include_url=False, include_input=False, include_context=False):
        field = ".".join(str(part) for part in error["loc"])
        if not field and error["type"] == "missing_target":
            field = "target_address"
        problems.append({"field": field or "parameters", "problem": error["msg"]})
    first = problems[0]
    message = f"invalid parameter '{first['field']}': {first['problem']}"
    if len(problems) > 1:
        message += f" (and {len(problems) - 1} more)"
    return message, problems


def _text_problem(value: str, *, empty_ok: bool) -> str | None:
    if not value and not empty_ok:
        return "must not be empty"
    if "\x00" in value:
        return "must not contain a NUL character"
    return None


def _text_problems(value: Any, field: str, *, top: bool) -> list[dict[str, str]]:
    """Empty strings (in parameters and their lists) and NULs (anywhere) under ``field``."""
    if isinstance(value, str):
        problem = _text_problem(value, empty_ok=not top)
        return [{"field": field, "problem": problem}] if problem else []
    if isinstance(value, list):
        return [
            p for i, item in enumerate(value) for p in _text_problems(item, f"{field}.{i}", top=top)
        ]
    if isinstance(value, dict) and _holds_nul(value):
        return _nuls(value, field)
    return []


def _holds_nul(value: dict[str, Any]) -> bool:
    # One pass in C over the whole object (content may be 256 KB); JSON escapes NUL as \u0000.
    return "\\u0000" in json.dumps(value, default=str)


def _nuls(value: Any, field: str) -> list[dict[str, str]]:
    """Where the NULs of an object are: inside an object an empty string is data, a NUL is
    not (PostgreSQL cannot store it), in a key or a value."""
    if isinstance(value, str):
        return (
            [{"field": field, "problem": "must not contain a NUL character"}]
            if "\x00" in value
            else []
        )
    found: list[dict[str, str]] = []
    if isinstance(value, list):
        for i, item in enumerate(value):
            found += _nuls(item, f"{field}.{i}")
    elif isinstance(value, dict):
        for key, item in value.items():
            if isinstance(key, str) and "\x00" in key:
                found.append({"field": field, "problem": "a key contains a NUL character"})
            found += _nuls(item, f"{field}.{key}")
    return found


def check_text(arguments: dict[str, Any]) -> None:
    """Refuse an empty string or a NUL character in a text parameter, naming the field."""
    problems = [
        p
        for name, value in arguments.items()
        for p in _text_problems(value, str(name)[:64], top=True)
    ][:20]
    if problems:
        first = problems[0]
        raise InvalidParameters(
            f"invalid parameter '{first['field']}': {first['problem']}",
            details={"field": first["field"], "problems": problems},
        )


def validate_input(model: type[ModelT], arguments: dict[str, Any]) -> ModelT:
    """Validate raw tool arguments into ``model`` or raise InvalidParameters naming the field
    (``details.field``: the first one at fault; ``details.problems``: every one)."""
    deep = too_deep(arguments)
    if deep is not None:
        raise too_deep_error(deep)
    check_text(arguments)
    try:
        value = model.model_validate(arguments)
    except ValidationError as exc:
        message, problems = _describe(exc)
        details: dict[str, Any] = {"field": problems[0]["field"], "problems": problems}
        if any(e["type"] == "message_type_slip" for e in exc.errors()):
            details["acted_on"] = list(ACTED_ON_TYPES)
        raise InvalidParameters(message, details=details) from None
    content = getattr(value, "content", None)
    if content is not None:
        size = len(json.dumps(content, default=str))
        if size > MAX_CONTENT_BYTES:
            raise InvalidParameters(
                f"content is too large ({size} bytes; at most {MAX_CONTENT_BYTES})",
                details={"field": "content", "size": size, "limit": MAX_CONTENT_BYTES},
            )
    return value
