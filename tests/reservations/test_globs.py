"""Whether two path globs can match one common path: a real intersection, not string equality."""

from __future__ import annotations

import fnmatch
import itertools
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bzzz.reservations.globs import (
    MAX_PATTERN_LENGTH,
    MAX_SEGMENTS,
    MAX_SET_SEGMENT,
    MAX_WILDCARDS,
    PatternError,
    matches,
    normalize,
    overlap,
)

OVERLAPPING = [
    ("src/**", "src/api/*.py"),
    ("a/*/c", "a/b/*"),
    ("[ab].txt", "?.txt"),
    ("a*b", "*c*"),
    ("**", "README.md"),
    ("src/**/test_*.py", "src/a/b/test_x.py"),
    ("a/**/b", "a/b"),
    ("**/*.py", "src/x.py"),
    ("src", "src/**"),
    ("src/", "src/api/routes.py"),
    ("[!a].txt", "[a-c].txt"),
    ("*.py", "x*"),
    ("**/x/**", "a/**/b"),
    ("README.md", "README.md"),
]
DISJOINT = [
    ("docs/*.md", "src/**"),
    ("[ab].txt", "c.txt"),
    ("*.py", "*.md"),
    ("src/**/test_*.py", "src/a/b/x.py"),
    ("[!a].txt", "a.txt"),
    ("*.py", "src/x.py"),  # '*' stays within one segment
    ("README.md", "readme.md"),
    ("a/?", "a/bc"),
    ("[a-c]*", "[d-f]*"),
    ("src/*/x", "src/x"),
]


@pytest.mark.parametrize(("a", "b"), OVERLAPPING)
def test_patterns_that_share_a_path_overlap_both_ways(a: str, b: str) -> None:
    assert overlap(normalize(a), normalize(b))
    assert overlap(normalize(b), normalize(a))


@pytest.mark.parametrize(("a", "b"), DISJOINT)
def test_patterns_without_a_common_path_do_not_overlap(a: str, b: str) -> None:
    assert not overlap(normalize(a), normalize(b))
    assert not overlap(normalize(b), normalize(a))


def test_a_pattern_matches_the_plain_paths_it_names() -> None:
    assert matches("src/**", "src/api/routes.py")
    assert matches("src/api/*.py", "src/api/routes.py")
    assert not matches("src/api/*.py", "src/api/v1/routes.py")
    assert matches("x[*]", "x*")
    assert not matches("x[*]", "xa")


def test_patterns_have_one_spelling() -> None:
    assert normalize("./src/") == "src/**"
    assert normalize("/src/**/**/x") == "src/**/x"
    assert normalize(" README.md ") == "README.md"


@pytest.mark.parametrize(
    "bad", ["", "   ", "src//x", "../etc/passwd", "a/./b", "[abc", "[z-a]", "a\\b", "x" * 600]
)
def test_a_bad_pattern_is_refused_with_the_reason(bad: str) -> None:
    with pytest.raises(PatternError):
        normalize(bad)


def _reference(pattern: list[str], path: list[str]) -> bool:
    """A plain recursive matcher: fnmatch within a segment, '**' over any number of them."""
    if not pattern:
        return not path
    if pattern[0] == "**":
        return any(_reference(pattern[1:], path[k:]) for k in range(len(path) + 1))
    head = bool(path) and fnmatch.fnmatchcase(path[0], pattern[0])
    return head and _reference(pattern[1:], path[1:])


def test_overlap_agrees_with_searching_every_short_path() -> None:
    segments = ["".join(t) for n in (1, 2, 3) for t in itertools.product("ab", repeat=n)]
    paths = [list(t) for n in (1, 2, 3) for t in itertools.product(segments, repeat=n)]
    tokens = ["a", "b", "*", "?", "[ab]", "[!a]"]
    rng = random.Random(23)

    def pattern() -> str:
        parts = [
            "**" if rng.random() < 0.2 else "".join(rng.choices(tokens, k=rng.randint(1, 2)))
            for _ in range(rng.randint(1, 3))
        ]
        return normalize("/".join(parts))

    for _ in range(200):
        a, b = pattern(), pattern()
        witness = any(_reference(a.split("/"), p) and _reference(b.split("/"), p) for p in paths)
        if witness or "**" not in a + b:
            # Without '**' a common path has as many segments as the patterns: it is listed.
            assert overlap(a, b) == witness, (a, b)


# --- the shape limits ----------------------------------------------------------------------


def test_a_pattern_at_the_shape_limits_is_taken_and_one_past_them_is_refused() -> None:
    longest = "a" * MAX_PATTERN_LENGTH
    deepest = "/".join(["a"] * MAX_SEGMENTS)
    wildest = "/".join(["*a"] * MAX_WILDCARDS)
    sets = "a" * 200 + "/" + "?" * 8 + "a" * (MAX_SET_SEGMENT - 8)
    assert normalize(sets) == sets
    assert normalize(longest) == longest
    assert normalize(deepest) == deepest
    assert normalize(wildest) == wildest

    for bad, says in [
        (longest + "a", f"at most {MAX_PATTERN_LENGTH} characters"),
        (deepest + "/a", f"at most {MAX_SEGMENTS} segments"),
        (wildest + "/?", f"at most {MAX_WILDCARDS} wildcards"),
        ("*a" * 256, f"at most {MAX_PATTERN_LENGTH} characters"),  # the attacker's shape
        ("*a" * 20, f"at most {MAX_WILDCARDS} wildcards"),
        ("a\ud800", "surrogates"),
        ("src/" + "?" * 33, f"at most {MAX_SET_SEGMENT} characters"),
        ("[ab]" + "a" * 29, f"at most {MAX_SET_SEGMENT} characters"),
    ]:
        with pytest.raises(PatternError) as refused:
            normalize(bad)
        assert says in str(refused.value), bad


def test_a_class_of_one_character_is_that_character_and_no_wildcard() -> None:
    assert overlap(normalize("[x]" * 10), normalize("x" * 10))
    assert matches("a[*]b", "a*b")


# --- the algorithm against a reference: the product of the two patterns as automata ------

SIGMA = "abcd"  # 'd' stands for every character the patterns do not name


def _ref_tokens(segment: str) -> list[object]:
    """A segment glob as '*' and sets of SIGMA (classes read by fnmatch)."""
    out: list[object] = []
    i = 0
    while i < len(segment):
        c = segment[i]
        if c == "*":
            out.append("*")
            i += 1
        elif c == "?":
            out.append(frozenset(SIGMA))
            i += 1
        elif c == "[":
            end = segment.index("]", i + 2)
            klass = segment[i : end + 1]
            out.append(frozenset(x for x in SIGMA if fnmatch.fnmatchcase(x, klass)))
            i = end + 1
        else:
            out.append(frozenset(c))
            i += 1
    return out


def _product(a: list[object], b: list[object], loop: object, steps: object) -> bool:
    """Whether the product of two loop/position sequences reaches both ends; ``steps(x, y)``
    lists the moves of one common element from positions x and y (None: a loop)."""
    seen: set[tuple[int, int, bool]] = set()
    todo = [(0, 0, False)]
    while todo:
        i, j, moved = todo.pop()
        if (i, j, moved) in seen:
            continue
        seen.add((i, j, moved))
        if i == len(a) and j == len(b) and moved:
            return True
        if i < len(a) and a[i] == loop:
            todo.append((i + 1, j, moved))
        if j < len(b) and b[j] == loop:
            todo.append((i, j + 1, moved))
        x = a[i] if i < len(a) else None
        y = b[j] if j < len(b) else None
        for di, dj in steps(x, y):  # type: ignore[operator]
            todo.append((i + di, j + dj, True))
    return False


def _ref_segments(x: str, y: str) -> bool:
    """A common non-empty segment of two segment globs, by the product over SIGMA."""

    def steps(p: object, q: object) -> list[tuple[int, int]]:
        if p is None or q is None:
            return []
        chars = [c for c in SIGMA if (p == "*" or c in p) and (q == "*" or c in q)]  # type: ignore[operator]
        return [(0 if p == "*" else 1, 0 if q == "*" else 1)] if chars else []

    return _product(_ref_tokens(x), _ref_tokens(y), "*", steps)


def _ref_overlap(a: str, b: str) -> bool:
    """A common path of two patterns: the product over segments ('**' loops)."""
    sa: list[object] = list(a.split("/"))
    sb: list[object] = list(b.split("/"))

    def steps(p: object, q: object) -> list[tuple[int, int]]:
        if p is None or q is None:
            return []
        if p == "**" or q == "**":
            return [(0 if p == "**" else 1, 0 if q == "**" else 1)]
        return [(1, 1)] if _ref_segments(str(p), str(q)) else []

    # An empty path matches two patterns of '**' only: the product starts having "moved".
    return _product(sa, sb, "**", steps) or (set(sa) == {"**"} and set(sb) == {"**"})


_SEGMENT = st.one_of(
    st.just("**"),
    st.lists(
        st.sampled_from(["a", "b", "c", "*", "?", "[ab]", "[!a]", "[a-c]", "[b]"]),
        min_size=1,
        max_size=4,
    ).map("".join),
)
_PATTERN = st.lists(_SEGMENT, min_size=1, max_size=4).map("/".join).map(normalize)


@settings(max_examples=400, deadline=None)
@given(_PATTERN, _PATTERN)
def test_overlap_agrees_with_the_product_of_the_two_patterns(a: str, b: str) -> None:
    assert overlap(a, b) == _ref_overlap(a, b), (a, b)
    assert overlap(b, a) == overlap(a, b)
