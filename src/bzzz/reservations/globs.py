"""Glob patterns over project paths, and whether two of them can match one common path.

A pattern is a relative path of ``/``-separated segments. Within a segment ``*`` matches any
run of characters, ``?`` one character, ``[abc]`` / ``[a-z]`` one of a set (``[!…]`` or
``[^…]`` one outside it); ``**`` as a whole segment matches zero or more segments. ``/`` is
never matched by a wildcard inside a segment. There are no escapes: ``[*]`` is a literal star.
A trailing ``/`` names a folder and everything under it (``src/`` is ``src/**``).

A pattern's shape is bounded (an outsider chooses it, and every node serving the project
decides overlaps in its log's applier): at most ``MAX_PATTERN_LENGTH`` (256) characters,
``MAX_SEGMENTS`` (32) segments and ``MAX_WILDCARDS`` (16) wildcards (each ``*`` run, ``**``,
``?`` and ``[…]`` of more than one character counts one), and a segment holding ``?`` or
``[…]`` at most ``MAX_SET_SEGMENT`` (32) characters.

:func:`overlap` is an exact test, not a string comparison, and its cost is linear in the
patterns' lengths but for one case. It looks at both levels the same way: a pattern is a
sequence of positions (segments; inside a segment, characters) cut into chunks by its loops
(``**``; inside a segment, ``*``). Two positions *meet* when some element fits both.

- Neither has a loop: they meet when they are as long and meet position by position.
- Both have one: they meet exactly when their first chunks meet over the shorter one's length
  and so do their last chunks, from the end. (A common path: the longer first chunk, then every
  middle chunk of one, then every middle chunk of the other, then the longer last chunk; each
  loop takes what lies between its pattern's chunks.)
- One has loops, the other none: the plain one is matched by the looped one — its first and
  last chunks at the two ends, then each middle chunk at the leftmost place it fits, in order
  (the leftmost place leaves the most room to the rest, so the greedy search is exact). Plain
  text is searched with ``str.find``, or a regular expression without repetition when the
  chunk holds sets (C does the search, in linear time for each place it tries).

A pair of patterns costs O(length) comparisons of text, done in C, plus Python work on the
segments that hold ``?`` or sets (at most 32 characters each) and on the segments of the
segment-level search (at most 32 x 32); each pair's answer is remembered, and so is each
request's against each live pattern. ``bench/reservation_overlap.py`` measures the worst
shapes at the caps.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TypeVar

MAX_PATTERN_LENGTH = 256
MAX_SEGMENTS = 32
MAX_WILDCARDS = 16
# A segment holding '?' or a set is compared character by character in Python: kept short.
MAX_SET_SEGMENT = 32
MAX_UNICODE = 0x10FFFF
_SLASH = ord("/")
# Every character a path segment may hold: all of Unicode but '/'.
_ANY: tuple[tuple[int, int], ...] = ((0, _SLASH - 1), (_SLASH + 1, MAX_UNICODE))

# A character position: a literal character, or the closed code-point ranges it accepts.
_Char = str | tuple[tuple[int, int], ...]
_T = TypeVar("_T")


class PatternError(ValueError):
    """A pattern that is not a valid project path glob; the message says why."""


@dataclass(frozen=True, slots=True)
class _Run:
    """A chunk of a segment glob (no ``*`` inside): its positions, and its text if all are
    literal characters (then ``str`` operations compare it)."""

    chars: tuple[_Char, ...]
    text: str | None


def normalize(pattern: str) -> str:
    """The pattern in its one spelling (no ``./``, no leading ``/``, ``dir/`` as ``dir/**``);
    PatternError when it is not a valid relative path glob or passes a shape limit."""
    if not isinstance(pattern, str) or not pattern.strip():
        raise PatternError("a path pattern must be a non-empty string")
    if len(pattern) > MAX_PATTERN_LENGTH:
        raise PatternError(f"a path pattern has at most {MAX_PATTERN_LENGTH} characters")
    if any(ord(c) < 32 or c == "\\" or 0xD800 <= ord(c) <= 0xDFFF for c in pattern):
        raise PatternError("a path pattern holds no control characters, surrogates or '\\'")
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
    _check_shape(normal, collapsed)
    return normal


def _check_shape(normal: str, segments: list[str]) -> None:
    """PatternError when the pattern passes a shape limit (or holds a bad character class)."""
    if len(segments) > MAX_SEGMENTS:
        raise PatternError(f"a path pattern has at most {MAX_SEGMENTS} segments")
    for segment in segments:
        if len(segment) > MAX_SET_SEGMENT and ("?" in segment or "[" in segment):
            raise PatternError(
                f"a segment holding '?' or '[…]' has at most {MAX_SET_SEGMENT} characters; "
                f"'{segment[:40]}…' has {len(segment)}"
            )
    wildcards = sum(_wildcards(s) for s in segments)
    if wildcards > MAX_WILDCARDS:
        raise PatternError(
            f"a path pattern has at most {MAX_WILDCARDS} wildcards ('*', '**', '?', '[…]'); "
            f"'{normal[:40]}…' has {wildcards}"
        )


def _wildcards(segment: str) -> int:
    if segment == "**":
        return 1
    runs = _segment(segment)
    return len(runs) - 1 + sum(1 for run in runs for c in run.chars if not isinstance(c, str))


def overlap(a: str, b: str) -> bool:
    """Whether some path matches both patterns (each as :func:`normalize` leaves it)."""
    if a == b:
        return True
    (lead_a, trail_a), (lead_b, trail_b) = _anchors(a), _anchors(b)
    if not (lead_a.startswith(lead_b) or lead_b.startswith(lead_a)):
        return False  # the common case, decided by comparing text
    if not (trail_a.endswith(trail_b) or trail_b.endswith(trail_a)):
        return False
    return _overlap_cached(a, b) if a < b else _overlap_cached(b, a)


_WILD = re.compile(r"[*?\[]")
_CLOSING = re.compile(r"[*?\[\]][^*?\[\]]*$")


@lru_cache(maxsize=16_384)
def _anchors(pattern: str) -> tuple[str, str]:
    """The plain text every path the pattern matches starts with, and ends with.

    Cut at the first and after the last wildcard character; a ``/`` beside a ``**`` segment
    is not required (``src/**`` matches ``src``).
    """
    first = _WILD.search(pattern)
    if first is None:
        return pattern, pattern
    lead = pattern[: first.start()]
    if lead.endswith("/") and pattern.startswith("**", first.start()):
        after = first.start() + 2
        if after == len(pattern) or pattern[after] == "/":
            lead = lead[:-1]
    last = _CLOSING.search(pattern)
    assert last is not None  # a wildcard character is in it
    trail = pattern[last.start() + 1 :]
    if trail.startswith("/") and pattern[: last.start() + 1].endswith("**"):
        before = last.start() - 2
        if before < 0 or pattern[before] == "/":
            trail = trail[1:]
    return lead, trail


@lru_cache(maxsize=65_536)
def _overlap_cached(a: str, b: str) -> bool:
    return _meet(_split(a), _split(b), _segments_overlap)


@lru_cache(maxsize=65_536)
def overlaps_any(patterns: tuple[str, ...], other: str) -> bool:
    """Whether ``other`` overlaps one of ``patterns`` (a request's against one live pattern:
    remembered, so a request's check warmed off the event loop costs a lookup on it)."""
    return any(overlap(p, other) for p in patterns)


def matches(pattern: str, path: str) -> bool:
    """Whether ``path`` (a plain relative path) matches ``pattern``."""
    literal = "".join(f"[{c}]" if c in "*?[" else c for c in path.strip("/"))
    return overlap(pattern, literal)


@lru_cache(maxsize=16_384)
def _split(pattern: str) -> tuple[tuple[str, ...], ...]:
    """The pattern's segments, cut into chunks at each ``**`` (each segment checked)."""
    chunks: list[tuple[str, ...]] = []
    current: list[str] = []
    for segment in pattern.split("/"):
        if segment == "**":
            chunks.append(tuple(current))
            current = []
        else:
            _segment(segment)
            current.append(segment)
    chunks.append(tuple(current))
    return tuple(chunks)


@lru_cache(maxsize=65_536)
def _segments_overlap(x: str, y: str) -> bool:
    """Whether two segment globs (text, so the cache hashes strings) share a segment."""
    if x == y:
        return True
    a, b = _segment(x), _segment(y)
    if len(a) == 1 and len(b) == 1 and a[0].text is not None and b[0].text is not None:
        return a[0].text == b[0].text  # two plain names ('[x]' is 'x')
    return _meet_runs(a, b)


@lru_cache(maxsize=16_384)
def _segment(text: str) -> tuple[_Run, ...]:
    """A segment glob cut into runs at each ``*`` (``**`` inside a segment is one ``*``)."""
    runs: list[_Run] = []
    chars: list[_Char] = []
    plain = True
    i = 0
    while i < len(text):
        literal = _LITERAL.match(text, i)
        if literal is not None:
            chars.extend(literal.group())  # one position a character, compared as text
            i = literal.end()
        elif text[i] == "*":
            runs.append(_run(chars, plain))
            chars, plain = [], True
            while i < len(text) and text[i] == "*":
                i += 1
        else:
            char, i = (_ANY, i + 1) if text[i] == "?" else _char_class(text, i)
            chars.append(char)
            plain = plain and isinstance(char, str)
    runs.append(_run(chars, plain))
    return tuple(runs)


_LITERAL = re.compile(r"[^*?\[]+")


def _run(chars: list[_Char], plain: bool) -> _Run:
    text = "".join(c for c in chars if isinstance(c, str)) if plain else None
    return _Run(tuple(chars), text)


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
    if len(accepted) == 1 and accepted[0][0] == accepted[0][1]:
        return chr(accepted[0][0]), i + 1  # a set of one character is that character
    return accepted, i + 1


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


def _holds(ranges: tuple[tuple[int, int], ...], code: int) -> bool:
    # A loop, not any(): this runs for most character comparisons and a generator costs more.
    for low, high in ranges:  # noqa: SIM110
        if low <= code <= high:
            return True
    return False


def _chars_meet(x: _Char, y: _Char) -> bool:
    """Whether two character positions accept a common character."""
    if isinstance(x, str):
        return x == y if isinstance(y, str) else _holds(y, ord(x))
    if isinstance(y, str):
        return _holds(x, ord(y))
    return bool(_intersect(x, y))


# --- the one algorithm, at both levels ---------------------------------------------------------


def _meet(
    a: Sequence[Sequence[_T]], b: Sequence[Sequence[_T]], meets: Callable[[_T, _T], bool]
) -> bool:
    """Whether two chunked patterns (chunks of positions, a loop between two chunks) accept a
    common sequence; ``meets`` says whether two positions accept a common element."""
    if len(a) == 1 and len(b) == 1:
        return len(a[0]) == len(b[0]) and _aligned(a[0], 0, b[0], meets)
    if len(a) > 1 and len(b) > 1:
        first = min(len(a[0]), len(b[0]))
        last = min(len(a[-1]), len(b[-1]))
        return _aligned(a[0], 0, b[0][:first], meets) and _aligned(
            a[-1], len(a[-1]) - last, b[-1][len(b[-1]) - last :], meets
        )
    plain, looped = (a[0], b) if len(a) == 1 else (b[0], a)
    return _fits(plain, looped, meets)


def _aligned(
    text: Sequence[_T], at: int, chunk: Sequence[_T], meets: Callable[[_T, _T], bool]
) -> bool:
    """Whether ``chunk`` meets ``text`` position by position from ``at``."""
    for k, c in enumerate(chunk):
        x = text[at + k]
        if x != c and not meets(x, c):  # equal positions meet (no set is empty)
            return False
    return True


def _fits(
    plain: Sequence[_T], looped: Sequence[Sequence[_T]], meets: Callable[[_T, _T], bool]
) -> bool:
    """Whether a loop-less pattern meets a looped one: ends anchored, middles leftmost."""
    head, tail = looped[0], looped[-1]
    end = len(plain) - len(tail)
    if len(head) > end or not _aligned(plain, 0, head, meets):
        return False
    if not _aligned(plain, end, tail, meets):
        return False
    at = len(head)
    for chunk in looped[1:-1]:
        found = _leftmost(plain, chunk, at, end, meets)
        if found < 0:
            return False
        at = found + len(chunk)
    return True


def _leftmost(
    text: Sequence[_T], chunk: Sequence[_T], start: int, end: int, meets: Callable[[_T, _T], bool]
) -> int:
    for at in range(start, end - len(chunk) + 1):
        if _aligned(text, at, chunk, meets):
            return at
    return -1


def _meet_runs(a: tuple[_Run, ...], b: tuple[_Run, ...]) -> bool:
    """Whether two segment globs accept a common segment.

    Plain runs are compared as text (``str``), and a plain segment is searched for a looped
    one's runs that hold sets by regular expressions without repetition (one per run,
    remembered): the search runs in C. What is left to Python loops holds a ``?`` or a set,
    so is at most ``MAX_SET_SEGMENT`` characters long.
    """
    if len(a) > 1 and len(b) > 1:
        return _ends_meet(a[0], b[0], head=True) and _ends_meet(a[-1], b[-1], head=False)
    if len(a) == 1 and len(b) == 1:
        return len(a[0].chars) == len(b[0].chars) and _aligned(a[0].chars, 0, b[0].chars,
                                                               _chars_meet)  # fmt: skip
    plain, looped = (a[0], b) if len(a) == 1 else (b[0], a)
    if plain.text is not None:
        return _fits_text(plain.text, looped)
    return _meet([plain.chars], [r.chars for r in looped], _chars_meet)


def _ends_meet(x: _Run, y: _Run, *, head: bool) -> bool:
    """Whether two first runs (``head``) or two last runs meet over the shorter's length."""
    if x.text is not None and y.text is not None:
        if head:
            return x.text.startswith(y.text) or y.text.startswith(x.text)
        return x.text.endswith(y.text) or y.text.endswith(x.text)
    n = min(len(x.chars), len(y.chars))
    if head:
        return _aligned(x.chars, 0, y.chars[:n], _chars_meet)
    return _aligned(x.chars, len(x.chars) - n, y.chars[len(y.chars) - n :], _chars_meet)


def _fits_text(plain: str, looped: tuple[_Run, ...]) -> bool:
    """:func:`_fits` for plain text: runs compared as text, or by their regular expression."""
    head, tail = looped[0], looped[-1]
    end = len(plain) - len(tail.chars)
    if len(head.chars) > end or not _run_at(plain, head, 0) or not _run_at(plain, tail, end):
        return False
    at = len(head.chars)
    for run in looped[1:-1]:
        if run.text is not None:
            found = plain.find(run.text, at, end)
        else:
            hit = _regex(run).search(plain, at, end)
            found = -1 if hit is None else hit.start()
        if found < 0:
            return False
        at = found + len(run.chars)
    return True


def _run_at(plain: str, run: _Run, at: int) -> bool:
    if run.text is not None:
        return plain.startswith(run.text, at)
    return _regex(run).match(plain, at, at + len(run.chars)) is not None


@lru_cache(maxsize=16_384)
def _regex(run: _Run) -> re.Pattern[str]:
    """A run as a regular expression of one character a position (no repetition)."""
    parts = []
    for c in run.chars:
        if isinstance(c, str):
            parts.append(re.escape(c))
        elif sum(high - low + 1 for low, high in c) > MAX_UNICODE // 2:
            # A wide set ('?', '[!a]') compiles fast as what it leaves out.
            outside = _complement_all(c)
            parts.append("[^" + "".join(_class_range(low, high) for low, high in outside) + "]")
        else:
            parts.append("[" + "".join(_class_range(low, high) for low, high in c) + "]")
    return re.compile("".join(parts), re.DOTALL)


def _complement_all(ranges: tuple[tuple[int, int], ...]) -> list[tuple[int, int]]:
    """Every code point outside ``ranges`` ('/' included)."""
    outside: list[tuple[int, int]] = []
    next_low = 0
    for low, high in ranges:
        if low > next_low:
            outside.append((next_low, low - 1))
        next_low = high + 1
    if next_low <= MAX_UNICODE:
        outside.append((next_low, MAX_UNICODE))
    return outside


def _class_range(low: int, high: int) -> str:
    def one(code: int) -> str:
        return f"\\U{code:08x}"

    return one(low) if low == high else f"{one(low)}-{one(high)}"
