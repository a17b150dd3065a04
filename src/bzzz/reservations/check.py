"""The reservation check: may this agent write these paths now, and with which fencing token?

Any tool asks it before a write (a git guard, an agent runner's hook, a person): for each path
(a plain path relative to the repository, matched by the reservations' patterns as
``globs.matches`` does) the answer says whether the agent may write it, the fencing token of
the agent's own live reservation that covers it (the number a writer presents: a later grant
of the path always carries a larger one), and who else holds it. A path another agent holds
exclusively is refused; one held shared by others, or held by nobody, is allowed. When the
agent's own reservation of the path ended (released, expired, its agent erased or moved, its
node removed) the answer says so, with the token it had (``reservation_ends``), rather than
being silent.

The input is bounded (``MAX_PATHS`` paths of at most ``MAX_PATH_LENGTH`` characters); an
enforced check that refuses a path puts a ``reservation.refused`` envelope on the log, whose
applier gives subscribers one ``reservation_refused`` event (addressed to the refused agent)
naming the agent, the refused paths, their holder and the source that asked.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints
from pydantic_core import PydanticCustomError
from sqlalchemy.orm import Session

from bzzz import domain
from bzzz.network.envelope import Envelope
from bzzz.reservations.globs import overlap
from bzzz.schemas import Identifier
from bzzz.store.models import AgentRow, ReservationEndRow, ReservationRow
from bzzz.store.projection import (
    NAME_LENGTH,
    Applied,
    ProjectionLimits,
    _address_of,
    _event,
    _optional_text,
    _text,
)

MAX_PATHS = 256
MAX_PATH_LENGTH = 1024
SOURCES = ("guard", "hook", "cli", "api")
Source = Literal["guard", "hook", "cli", "api"]
REFUSED = "reservation.refused"
REFUSED_EVENT = "reservation_refused"
# What one reservation_refused event names at most (a commit may touch many paths).
REFUSED_PATHS = 64
REFUSED_HOLDERS = 16


def normalize_path(value: str) -> str:
    """A plain path relative to the repository in its one spelling (no ``./``, no leading or
    trailing ``/``); ValueError when it is empty, climbs out (``..``) or holds control
    characters, a ``\\`` or an empty segment."""
    if any(ord(c) < 32 or c == "\\" or 0xD800 <= ord(c) <= 0xDFFF for c in value):
        raise ValueError("a path holds no control characters, surrogates or '\\'")
    text = value
    while text.startswith("./"):
        text = text[2:]
    text = text.strip("/")
    if not text:
        raise ValueError("a path must name a file under the repository")
    segments = text.split("/")
    if any(s == "" for s in segments):
        raise ValueError(f"'{value[:80]}' has an empty segment ('//')")
    if any(s in (".", "..") for s in segments):
        raise ValueError(f"'{value[:80]}' may not hold '.' or '..' segments")
    return text


def _path(value: str) -> str:
    try:
        return normalize_path(value)
    except ValueError as exc:
        raise PydanticCustomError("check_path", "{problem}", {"problem": str(exc)}) from None


CheckPath = Annotated[
    str, StringConstraints(min_length=1, max_length=MAX_PATH_LENGTH), AfterValidator(_path)
]


class CheckInput(BaseModel):
    """POST /api/v1/reservations/check: may ``agent`` write ``paths`` now?"""

    model_config = ConfigDict(extra="forbid")

    agent: Identifier = Field(description="the agent that is about to write")
    paths: list[CheckPath] = Field(
        min_length=1,
        max_length=MAX_PATHS,
        description=(
            f"paths relative to the repository (its project's root), at most {MAX_PATHS}, "
            f"each at most {MAX_PATH_LENGTH} characters"
        ),
    )
    enforce: bool = Field(
        False, description="record a reservation_refused event when a path is refused"
    )
    source: Source | None = Field(None, description="who asks: guard | hook | cli | api")


@dataclass(frozen=True, slots=True)
class Held:
    """A reservation as the check compares it (a live row or an ended one)."""

    id: str
    agent_id: str
    mode: str
    paths: tuple[str, ...]
    fencing_token: int
    expires_at: datetime | None = None
    reason: str | None = None  # an ended one's
    ended_at: datetime | None = None

    @classmethod
    def live(cls, row: ReservationRow) -> Held:
        return cls(
            row.id,
            row.agent_id,
            row.mode,
            tuple(row.paths),
            row.fencing_token or 0,
            expires_at=row.expires_at,
        )

    @classmethod
    def expired(cls, row: ReservationRow) -> Held:
        """A live row past its end that no sweep removed yet: ended, as it will be."""
        return cls(
            row.id,
            row.agent_id,
            row.mode,
            tuple(row.paths),
            row.fencing_token or 0,
            reason="expired",
            ended_at=row.expires_at,
        )

    @classmethod
    def ended(cls, row: ReservationEndRow) -> Held:
        return cls(
            row.id,
            row.agent_id,
            row.mode,
            tuple(row.paths),
            row.fencing_token or 0,
            reason=row.reason,
            ended_at=row.ended_at,
        )

    def covers(self, literal: str) -> bool:
        return any(overlap(p, literal) for p in self.paths)

    def as_holder(self) -> dict[str, Any]:
        return {
            "agent": self.agent_id,
            "reservation_id": self.id,
            "paths": list(self.paths),
            "expires_at": domain.iso(self.expires_at) if self.expires_at else None,
            "fencing_token": self.fencing_token,
            "exclusive": self.mode == "exclusive",
        }

    def as_end(self) -> dict[str, Any]:
        return {
            "reservation_id": self.id,
            "fencing_token": self.fencing_token,
            "reason": self.reason,
            "ended_at": domain.iso(self.ended_at) if self.ended_at else None,
        }


def literal_of(path: str) -> str:
    """A plain path as a pattern that matches it alone (``globs.matches``'s escaping)."""
    return "".join(f"[{c}]" if c in "*?[" else c for c in path)


def decide(agent_id: str, path: str, live: Sequence[Held], ended: Sequence[Held]) -> dict[str, Any]:
    """One path's answer: ``live`` are the project's live reservations (creation order),
    ``ended`` the agent's ended ones (newest first)."""
    literal = literal_of(path)
    covering = [h for h in live if h.covers(literal)]
    own = [h for h in covering if h.agent_id == agent_id]
    others = [h for h in covering if h.agent_id != agent_id]
    blocking = next((h for h in others if h.mode == "exclusive"), None)
    holder = blocking or (others[0] if others else None)
    mine = max(own, key=lambda h: h.fencing_token) if own else None
    end = None
    if mine is None:
        gone = [h for h in ended if h.covers(literal)]
        end = max(gone, key=lambda h: h.fencing_token) if gone else None
    if mine is not None:
        reason = "held"
    elif end is not None:
        reason = str(end.reason)
    elif blocking is not None:
        reason = "reserved_by_other"
    elif holder is not None:
        reason = "shared_by_others"
    else:
        reason = "unreserved"
    return {
        "path": path,
        "allowed": blocking is None,
        "fencing_token": mine.fencing_token if mine else None,
        "reservation_id": mine.id if mine else None,
        "expires_at": domain.iso(mine.expires_at) if mine and mine.expires_at else None,
        "reason": reason,
        "holder": holder.as_holder() if holder else None,
        "ended": end.as_end() if end else None,
    }


def refusal_payload(
    agent_id: str, project: str | None, source: str | None, refused: list[dict[str, Any]]
) -> dict[str, Any]:
    """The ``reservation.refused`` payload of an enforced check's refused paths."""
    holders: dict[str, dict[str, Any]] = {}
    for item in refused:
        holder = item["holder"]
        holders.setdefault(holder["reservation_id"], holder)
    return {
        "agent_id": agent_id,
        "project": project,
        "source": source,
        "paths": [item["path"] for item in refused[:REFUSED_PATHS]],
        "refused_count": len(refused),
        "holders": list(holders.values())[:REFUSED_HOLDERS],
    }


def _holder(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise TypeError("a holder is an object")
    paths = value.get("paths")
    if not isinstance(paths, list) or len(paths) > 16:
        raise TypeError("a holder's paths are a list of at most 16 patterns")
    token = value.get("fencing_token")
    if not isinstance(token, int) or isinstance(token, bool):
        raise TypeError("a holder's fencing_token is an integer")
    return {
        "agent": _text(value.get("agent"), NAME_LENGTH, "agent"),
        "reservation_id": _text(value.get("reservation_id"), 64, "reservation_id"),
        "paths": [_text(p, 256, "paths") for p in paths],
        "expires_at": _optional_text(value.get("expires_at"), 64, "expires_at"),
        "fencing_token": token,
        "exclusive": bool(value.get("exclusive")),
    }


def apply_refused(session: Session, env: Envelope, limits: ProjectionLimits) -> Applied:
    """Tell subscribers that an enforced check refused an agent paths another one holds."""
    p = env.payload
    agent_id = _text(p["agent_id"], NAME_LENGTH, "agent_id")
    project = _optional_text(p.get("project"), NAME_LENGTH, "project")
    source = p.get("source")
    if source is not None and source not in SOURCES:
        raise ValueError(f"source must be one of {SOURCES}")
    paths = p["paths"]
    if not isinstance(paths, list) or not 1 <= len(paths) <= REFUSED_PATHS:
        raise TypeError(f"paths must be a list of 1 to {REFUSED_PATHS} paths")
    holders = p["holders"]
    if not isinstance(holders, list) or not 1 <= len(holders) <= REFUSED_HOLDERS:
        raise TypeError(f"holders must be a list of 1 to {REFUSED_HOLDERS}")
    count = p.get("refused_count", len(paths))
    if not isinstance(count, int) or isinstance(count, bool) or count < len(paths):
        raise TypeError("refused_count counts the refused paths")
    shown_holders = [_holder(h) for h in holders]
    data = {
        "project": project,
        "agent_id": agent_id,
        "source": source,
        "paths": [_text(x, MAX_PATH_LENGTH, "paths") for x in paths],
        "refused_count": count,
        "holder": shown_holders[0],
        "holders": shown_holders,
    }
    agent = session.get(AgentRow, agent_id)
    address = _address_of(agent) if agent is not None else f"bzzz://{agent_id}"
    return Applied({"ok": True}, [_event(env, REFUSED_EVENT, address, data)])
