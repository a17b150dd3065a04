"""Glob patterns over project paths, and whether two of them can match one common path.

A pattern is a relative path of ``/``-separated segments. Within a segment ``*`` matches any
run of characters, ``?`` one character, ``[abc]`` / ``[a-z]`` one of a set (``[!…]`` or
``[^…]`` one outside it); ``**`` as a whole segment matches zero or more segments. ``/`` is
never matched by a wildcard inside a segment. There are no escapes: ``[*]`` is a literal star.
A trailing ``/`` names a folder and everything under it (``src/`` is ``src/**``).

:func:`overlap` is an exact test, not a string comparison: it runs the product of the two
patterns as automata (segment by segment, and inside a segment character by character) and
says whether some path is accepted by both. Both steps are dynamic programs over pairs of
positions, so the cost is the product of the patterns' lengths.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

MAX_PATTERN_LENGTH = 512
MAX_UNICODE = 0x10FFFF
_SLASH = ord("/")
# Every character a path segment may hold: all of Unicode but '/'.
_ANY: tuple[tuple[int, int], ...] = ((0, _SLASH - 1), (_SLASH + 1, MAX_UNICODE))


class PatternError(ValueError):
    """A pattern that is not a valid project path glob; the message says why."""


@dataclass(frozen=True, slots=True)
class _Char:
    """One character position: the closed code-point ranges it accepts (sorted, disjoint)."""

    ranges: tuple[tuple[int, int], ...]


@dataclass(frozen=True, slots=True)
class _Star:
    """``*``: any run of characters within the segment."""


_STAR = _Star()
_Token = _Char | _Star
_Fits = Callable[[int, int], bool]


def normalize(pattern: str) -> str:
    """The pattern in its one spelling (no ``./``, no leading ``/``, ``dir/`` as ``dir/**``);
    PatternError when it is not a valid relative path glob."""
    if not isinstance(pattern, str) or not pattern.strip():
        raise PatternError("a path pattern must be a non-empty string")
    if len(pattern) > MAX_PATTERN_LENGTH:
        raise PatternError(f"a path pattern has at most {MAX_PATTERN_LENGTH} characters")
    if any(ord(c) < 32 or c == "\\" for c in pattern):
        raise PatternError("a path pattern holds no control characters and no '\\'")
    text = pattern.strip()
    while text.startswith("./"):
        text = text[2:]
    text = text.lstrip("/")
    if text.endswith("/"):
        text += "**"
    segments = text.split("/")
    if any(s == "" for s in segments):
        raise PatternError(f"'{pattern}' has an empty segment ('//')")
    if any(s in (".", "..") for s in segments):
        raise PatternError(f"'{pattern}' may not hold '.' or '..' segments")
    # '**/**' means what '**' does.
    collapsed: list[str] = []
    for segment in segments:
        if not (segment == "**" and collapsed and collapsed[-1] == "**"):
            collapsed.append(segment)
    normal = "/".join(collapsed)
    _compile(normal)  # PatternError for a bad character class
    return normal


def overlap(a: str, b: str) -> bool:
    """Whether some path matches both patterns (each as :func:`normalize` leaves it)."""
    if _literal_heads_differ(a, b):
        return False  # the common case, decided without running the automata
    return _overlap_cached(a, b) if a <= b else _overlap_cached(b, a)


@lru_cache(maxsize=65_536)
def _overlap_cached(a: str, b: str) -> bool:
    return _overlap_segments(_compile(a), _compile(b))


_WILD = frozenset("*?[")


def _literal_heads_differ(a: str, b: str) -> bool:
    """Whether the patterns differ in a leading segment that is plain text in both."""
    for x, y in zip(a.split("/"), b.split("/"), strict=False):
        if _WILD & set(x) or _WILD & set(y):
            return False
        if x != y:
            return True
    return False


def matches(pattern: str, path: str) -> bool:
    """Whether ``path`` (a plain relative path) matches ``pattern``."""
    literal = "".join(f"[{c}]" if c in "*?[" else c for c in path.strip("/"))
    return overlap(pattern, literal)


@lru_cache(maxsize=16_384)
def _compile(pattern: str) -> tuple[str | None, ...]:
    """The pattern's segments (None for ``**``), each checked to be a valid segment glob."""
    segments = tuple(None if s == "**" else s for s in pattern.split("/"))
    for segment in segments:
        if segment is not None:
            _segment(segment)
    return segments


@lru_cache(maxsize=16_384)
def _segment(text: str) -> tuple[_Token, ...]:
    tokens: list[_Token] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c == "*":
            if not tokens or tokens[-1] is not _STAR:
                tokens.append(_STAR)  # '**' inside a segment is one '*'
            i += 1
        elif c == "?":
            tokens.append(_Char(_ANY))
            i += 1
        elif c == "[":
            char, i = _char_class(text, i)
            tokens.append(char)
        else:
            tokens.append(_Char(((ord(c), ord(c)),)))
            i += 1
    return tuple(tokens)


def _char_class(text: str, start: int) -> tuple[_Char, int]:
    """The class opening at ``text[start]`` (a '['), and the index after its ']'."""
    i = start + 1
    negated = i < len(text) and text[i] in "!^"
    if negated:
        i += 1
    ranges: list[tuple[int, int]] = []
    first = True
    while i < len(text) and (first or text[i] != "]"):
        low = text[i]
        if i + 2 < len(text) and text[i + 1] == "-" and text[i + 2] != "]":
            high = text[i + 2]
            if ord(high) < ord(low):
                raise PatternError(f"'{text}': range '{low}-{high}' runs backwards")
            ranges.append((ord(low), ord(high)))
            i += 3
        else:
            ranges.append((ord(low), ord(low)))
            i += 1
        first = False
    if i >= len(text):
        raise PatternError(f"'{text}': '[' opens a set that no ']' closes")
    merged = _merge(ranges)
    accepted = _complement(merged) if negated else _intersect(merged, _ANY)
    if not accepted:
        raise PatternError(f"'{text}': the set '{text[start : i + 1]}' matches no character")
    return _Char(accepted), i + 1


def _merge(ranges: list[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    merged: list[tuple[int, int]] = []
    for low, high in sorted(ranges):
        if merged and low <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], high))
        else:
            merged.append((low, high))
    return tuple(merged)


def _complement(ranges: tuple[tuple[int, int], ...]) -> tuple[tuple[int, int], ...]:
    outside: list[tuple[int, int]] = []
    next_low = 0
    for low, high in ranges:
        if low > next_low:
            outside.append((next_low, low - 1))
        next_low = high + 1
    if next_low <= MAX_UNICODE:
        outside.append((next_low, MAX_UNICODE))
    return _intersect(tuple(outside), _ANY)


def _intersect(
    a: tuple[tuple[int, int], ...], b: tuple[tuple[int, int], ...]
) -> tuple[tuple[int, int], ...]:
    both: list[tuple[int, int]] = []
    i = j = 0
    while i < len(a) and j < len(b):
        low, high = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if low <= high:
            both.append((low, high))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return tuple(both)


def _overlap_segments(a: tuple[str | None, ...], b: tuple[str | None, ...]) -> bool:
    """Product of two segment sequences: ``**`` loops over any segment, others step together."""
    loops_a = tuple(x is None for x in a)
    loops_b = tuple(y is None for y in b)

    def fits(i: int, j: int) -> bool:
        x, y = a[i], b[j]
        return x is not None and y is not None and _segments_overlap(x, y)

    return _meets(loops_a, loops_b, fits)


@lru_cache(maxsize=65_536)
def _segments_overlap(x: str, y: str) -> bool:
    """Whether two segment globs (text, so the cache hashes strings) share a segment."""
    return x == y or _overlap_tokens(_segment(x), _segment(y))


def _overlap_tokens(a: tuple[_Token, ...], b: tuple[_Token, ...]) -> bool:
    """Whether two segment globs accept a common non-empty segment."""
    if not a or not b:
        return False

    def fits(i: int, j: int) -> bool:
        x, y = a[i], b[j]
        return (
            isinstance(x, _Char) and isinstance(y, _Char) and bool(_intersect(x.ranges, y.ranges))
        )

    return _meets(tuple(x is _STAR for x in a), tuple(y is _STAR for y in b), fits)


def _meets(loops_a: tuple[bool, ...], loops_b: tuple[bool, ...], fits: _Fits) -> bool:
    """Whether two sequences of positions reach their ends together, from their starts.

    A loop position (``*`` in a segment, ``**`` in a path) consumes any number of the other's
    steps, none included; two plain positions step together when ``fits`` says they accept a
    common element. Every move goes right or down in the table of position pairs, so one pass
    over it in row order sees every pair after all pairs that lead to it.
    """
    n, m = len(loops_a), len(loops_b)
    reach = [[False] * (m + 1) for _ in range(n + 1)]
    reach[0][0] = True
    for i in range(n + 1):
        row = reach[i]
        below = reach[i + 1] if i < n else row
        loop_a = i < n and loops_a[i]
        for j in range(m + 1):
            if not row[j]:
                continue
            loop_b = j < m and loops_b[j]
            if loop_a:
                below[j] = True  # a's loop ends
                if j < m:
                    row[j + 1] = True  # a's loop takes b's position
            if loop_b:
                row[j + 1] = True
                if i < n:
                    below[j] = True
            if i < n and j < m and not (loop_a or loop_b) and fits(i, j):
                reach[i + 1][j + 1] = True
    return reach[n][m]
