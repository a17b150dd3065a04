"""bzzz_reserve's parameters, as every face (MCP, REST, CLI) validates them (a pattern's shape
limits live in ``reservations.globs``)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints
from pydantic_core import PydanticCustomError

from bzzz.reservations.globs import (
    MAX_PATTERN_LENGTH,
    MAX_SEGMENTS,
    MAX_SET_SEGMENT,
    MAX_WILDCARDS,
    PatternError,
    normalize,
)
from bzzz.reservations.projection import MAX_PATHS, MAX_TTL, MIN_TTL, REASON_LENGTH
from bzzz.schemas import Identifier, MintedId

DEFAULT_TTL = 1800
Action = Literal["reserve", "release", "renew", "list"]
Mode = Literal["exclusive", "shared"]


def _pattern(value: str) -> str:
    try:
        return normalize(value)
    except PatternError as exc:
        raise PydanticCustomError("path_pattern", "{problem}", {"problem": str(exc)}) from None


Pattern = Annotated[
    str, StringConstraints(min_length=1, max_length=MAX_PATTERN_LENGTH), AfterValidator(_pattern)
]


class ReserveInput(BaseModel):
    """bzzz_reserve parameters."""

    model_config = ConfigDict(extra="forbid", strict=False)

    action: Action = "reserve"
    paths: list[Pattern] | None = Field(
        None,
        min_length=1,
        max_length=MAX_PATHS,
        description=(
            f"glob patterns under the agent's project, at most {MAX_PATHS}; each at most "
            f"{MAX_PATTERN_LENGTH} characters, {MAX_SEGMENTS} segments and {MAX_WILDCARDS} "
            f"wildcards ('*', '**', '?', '[…]'), a segment holding '?' or '[…]' at most "
            f"{MAX_SET_SEGMENT} characters"
        ),
    )
    mode: Mode = "exclusive"
    ttl: int = Field(DEFAULT_TTL, ge=MIN_TTL, le=MAX_TTL, strict=True)
    reason: (
        Annotated[str, StringConstraints(strip_whitespace=True, max_length=REASON_LENGTH)] | None
    ) = None
    reservation_id: MintedId | None = None
    agent_id: Identifier | None = None
    project: Identifier | None = None
