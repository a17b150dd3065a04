"""Whether two path globs can match one common path: a real intersection, not string equality."""

from __future__ import annotations

import fnmatch
import itertools
import random

import pytest

from bzzz.reservations.globs import PatternError, matches, normalize, overlap

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
