"""Semantic addresses ``bzzz://agent:role@project:task/path``: parse, format, match.

An address may name another network (federation): ``bzzz://agent:role@project:task?network=<id>``;
without it an address is on the caller's own network.

Every part is optional. ``*``, an empty part or an omitted part means "any" and is held as
``None``. The canonical form spells every part out (``*`` for any), so two addresses that mean
the same thing format to the same text, and ``parse_address(format_address(a)) == a``.

An ``Address`` validates itself on construction, so one that exists always has a canonical form
that parses back to it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from bzzz.errors import InvalidParameters

SCHEME = "bzzz://"
WILDCARD = "*"
MAX_ADDRESS_LENGTH = 1024
MAX_PART_LENGTH = 128
MAX_PATH_LENGTH = 512

_PART_RE = re.compile(r"[A-Za-z0-9._-]+")
_SEGMENT_RE = re.compile(r"[A-Za-z0-9._~-]+")
_NETWORK_RE = re.compile(r"[A-Za-z0-9_-]{1,64}")
_PART_ALLOWED = "letters, digits, '-', '_', '.'"
_SEGMENT_ALLOWED = "letters, digits, '-', '_', '.', '~'"
_PART_NAMES = ("agent", "role", "project", "task")
# Error messages and details go to clients; an oversized input must not be echoed in full.
_ECHO_LIMIT = 200


@dataclass(frozen=True, slots=True)
class Address:
    """A parsed semantic address; ``None`` in a part means "any"."""

    agent: str | None = None
    role: str | None = None
    project: str | None = None
    task: str | None = None
    path: str | None = None
    network: str | None = None

    def __post_init__(self) -> None:
        for name in _PART_NAMES:
            object.__setattr__(self, name, _check_part(name, getattr(self, name)))
        object.__setattr__(self, "path", _check_path(self.path))
        object.__setattr__(self, "network", _check_network(self.network))
        canonical = format_address(self)
        if len(canonical) > MAX_ADDRESS_LENGTH:
            raise InvalidParameters(
                f"semantic address is {len(canonical)} characters long in canonical form; "
                f"the maximum is {MAX_ADDRESS_LENGTH}",
                details={"address": _clip(canonical)},
            )

    @property
    def is_wildcard(self) -> bool:
        """True when the address does not name one agent (its agent part is "any")."""
        return self.agent is None

    def matches(self, agent_id: str, role: str, project: str | None, task: str | None) -> bool:
        """True when an agent with these attributes is reached by this address."""
        return (
            _equal_or_any(self.agent, agent_id)
            and _equal_or_any(self.role, role)
            and _declared_fits(self.project, project)
            and _declared_fits(self.task, task)
        )

    def covers(self, other: Address) -> bool:
        """True when every address ``other`` could stand for is also reached by this one."""
        mine = (self.agent, self.role, self.project, self.task)
        theirs = (other.agent, other.role, other.project, other.task)
        if any(m is not None and m != t for m, t in zip(mine, theirs, strict=True)):
            return False
        return _path_covers(self.path, other.path)

    def to_dict(self, raw: str) -> dict[str, str | None]:
        """The API reference's ``parsed_address`` object, with ``raw`` as given by the caller."""
        shown: dict[str, str | None] = {
            "agent": self.agent,
            "role": self.role,
            "project": self.project,
            "task": self.task,
            "path": self.path,
            "raw": raw,
        }
        if self.network:
            shown["network"] = self.network
        return shown

    def with_path(self, path: str | None) -> Address:
        """A copy of this address with its path replaced (validated like a parsed path)."""
        return replace(self, path=path)


def parse_address(text: object) -> Address:
    """Parse ``bzzz://agent:role@project:task/path``; raise InvalidParameters when malformed."""
    if not isinstance(text, str):
        raise InvalidParameters(
            f"semantic address must be a string, got {type(text).__name__}",
            details={"type": type(text).__name__},
        )
    stripped = text.strip()
    if not stripped:
        raise InvalidParameters("semantic address is empty", details={"address": ""})
    if len(stripped) > MAX_ADDRESS_LENGTH:
        raise InvalidParameters(
            f"semantic address is {len(stripped)} characters long; "
            f"the maximum is {MAX_ADDRESS_LENGTH}",
            details={"address": _clip(stripped)},
        )
    prefix = stripped[: len(SCHEME)]
    if not (prefix.isascii() and prefix.lower() == SCHEME):
        raise InvalidParameters(
            f"semantic address must start with {SCHEME!r}", details={"address": _clip(stripped)}
        )
    rest, _, query = stripped[len(SCHEME) :].partition("?")
    network = _network_of(query, stripped) if query or "?" in stripped else None
    authority, slash, path = rest.partition("/")
    if authority.count("@") > 1:
        raise InvalidParameters(
            f"semantic address part {_clip(authority)!r} contains more than one '@'",
            details={"address": _clip(stripped), "part": "agent:role@project:task"},
        )
    left, _, right = authority.partition("@")
    agent, role = _split_pair(left, "agent:role")
    project, task = _split_pair(right, "project:task")
    return Address(agent, role, project, task, (slash + path) or None, network)


def format_address(address: Address) -> str:
    """The canonical text of an address: every part spelt out, ``*`` for any."""
    network = f"?network={address.network}" if address.network else ""
    return (
        f"{SCHEME}{address.agent or WILDCARD}:{address.role or WILDCARD}"
        f"@{address.project or WILDCARD}:{address.task or WILDCARD}{address.path or ''}"
        f"{network}"
    )


def _network_of(query: str, address: str) -> str:
    key, equals, value = query.partition("=")
    if key != "network" or not equals or not value:
        raise InvalidParameters(
            f"semantic address query {_clip(query)!r} is not understood; the only one is "
            "'?network=<network id>'",
            details={"address": _clip(address), "part": "network"},
        )
    return value


def _check_network(value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not _NETWORK_RE.fullmatch(value):
        raise InvalidParameters(
            f"network {_clip(str(value))!r} is not a network id (1-64 letters, digits, '-', '_')",
            details={"part": "network", "value": _clip(str(value))},
        )
    return value


def agent_address(agent_id: str, role: str, project: str | None, task: str | None) -> str:
    """The canonical address of one concrete agent (its project and task may be None)."""
    address = Address(agent_id, role, project, task)
    if address.agent is None:
        raise InvalidParameters(
            f"agent_id {agent_id!r} must name one agent, not a wildcard",
            details={"part": "agent", "value": agent_id},
        )
    return format_address(address)


def _split_pair(text: str, name: str) -> tuple[str, str]:
    if text.count(":") > 1:
        raise InvalidParameters(
            f"{name} part {_clip(text)!r} contains more than one ':'",
            details={"part": name, "value": _clip(text)},
        )
    first, _, second = text.partition(":")
    return first, second


def _check_part(name: str, value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidParameters(
            f"{name} part must be a string or None, got {type(value).__name__}",
            details={"part": name, "type": type(value).__name__},
        )
    if value in ("", WILDCARD):
        return None
    if len(value) > MAX_PART_LENGTH:
        raise InvalidParameters(
            f"{name} part is {len(value)} characters long; the maximum is {MAX_PART_LENGTH}",
            details={"part": name, "value": _clip(value)},
        )
    if not _PART_RE.fullmatch(value):
        raise InvalidParameters(
            f"{name} part {value!r} contains invalid characters; allowed: {_PART_ALLOWED}",
            details={"part": name, "value": value},
        )
    return value


def _check_path(value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidParameters(
            f"path must be a string or None, got {type(value).__name__}",
            details={"part": "path", "type": type(value).__name__},
        )
    if not value.startswith("/"):
        raise _path_error(value, "must start with '/'")
    # One trailing slash is tolerated and dropped so "/inbox/" and "/inbox" are the same path.
    path = value.removesuffix("/")
    if not path:
        return None
    if len(path) > MAX_PATH_LENGTH:
        raise _path_error(path, f"is {len(path)} characters long; the maximum is {MAX_PATH_LENGTH}")
    for segment in path[1:].split("/"):
        if not segment:
            raise _path_error(path, "contains an empty segment")
        if segment in (".", ".."):
            # Dot segments would let "/inbox/../x" pass a prefix check for "/inbox".
            raise _path_error(
                path, f"contains the segment {segment!r}; '.' and '..' are not allowed"
            )
        if not _SEGMENT_RE.fullmatch(segment):
            raise _path_error(path, f"contains invalid characters; allowed: {_SEGMENT_ALLOWED}")
    return path


def _path_error(path: str, problem: str) -> InvalidParameters:
    return InvalidParameters(
        f"path {_clip(path)!r} {problem}", details={"part": "path", "value": _clip(path)}
    )


def _equal_or_any(wanted: str | None, actual: str) -> bool:
    return wanted is None or wanted == actual


def _declared_fits(wanted: str | None, declared: str | None) -> bool:
    # An agent that declared no project (or task) is reachable from any project (or task).
    return wanted is None or declared in (None, "", WILDCARD) or wanted == declared


def _path_covers(mine: str | None, theirs: str | None) -> bool:
    if mine is None:
        return True
    if theirs is None:
        return False
    # Compare whole segments, so "/inbox" covers "/inbox/x" but not "/inboxes".
    return theirs == mine or theirs.startswith(mine + "/")


def _clip(text: str) -> str:
    return text if len(text) <= _ECHO_LIMIT else text[:_ECHO_LIMIT] + "..."
