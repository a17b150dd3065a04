"""Semantic addresses: parsing, canonical formatting, matching and subscription filters."""

from __future__ import annotations

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from bzzz.address import (
    MAX_ADDRESS_LENGTH,
    Address,
    agent_address,
    format_address,
    parse_address,
)
from bzzz.errors import ErrorCode, InvalidParameters

# --- strategies -------------------------------------------------------------------------------

identifiers = st.from_regex(r"[A-Za-z0-9._-]{1,128}", fullmatch=True)
small_identifiers = st.from_regex(r"[A-Za-z0-9._-]{1,12}", fullmatch=True)
parts = st.none() | identifiers
segments = st.from_regex(r"[A-Za-z0-9._~-]{1,40}", fullmatch=True).filter(
    lambda s: s not in (".", "..")
)
paths = st.none() | st.lists(segments, min_size=1, max_size=12).map(
    lambda segs: "/" + "/".join(segs)
).filter(lambda p: len(p) <= 512)


def _fits(
    agent: str | None, role: str | None, project: str | None, task: str | None, path: str | None
) -> bool:
    canonical_length = 7 + 3 + sum(len(p or "*") for p in (agent, role, project, task))
    return canonical_length + len(path or "") <= MAX_ADDRESS_LENGTH


@st.composite
def addresses(draw: st.DrawFn) -> Address:
    """Any valid Address: concrete parts, wildcards and paths."""
    values = (draw(parts), draw(parts), draw(parts), draw(parts), draw(paths))
    assume(_fits(*values))
    return Address(*values)


@st.composite
def address_texts(draw: st.DrawFn) -> str:
    """Valid address text in its many spellings: '*', empty or omitted parts, odd case."""
    any_spelling = st.sampled_from(["*", ""])
    part = any_spelling | small_identifiers
    scheme = draw(st.sampled_from(["bzzz://", "BZZZ://", "Bzzz://"]))
    left = draw(part)
    if draw(st.booleans()):
        left += ":" + draw(part)
    right = ""
    if draw(st.booleans()):
        right = "@" + draw(part)
        if draw(st.booleans()):
            right += ":" + draw(part)
    path = ""
    if draw(st.booleans()):
        path = "/" + "/".join(draw(st.lists(segments, min_size=1, max_size=4)))
        if draw(st.booleans()):
            path += "/"
    padding = draw(st.sampled_from(["", " ", "\t", "\n "]))
    return padding + scheme + left + right + path + padding


junk_alphabet = st.sampled_from(list("bzBZ:/@*._-~aA0 \t\n?#%é\x00"))
junk_after_scheme = st.lists(junk_alphabet, max_size=60).map(lambda cs: "bzzz://" + "".join(cs))
non_strings = (
    st.integers()
    | st.none()
    | st.floats()
    | st.binary()
    | st.lists(st.integers(), max_size=3)
    | st.dictionaries(st.text(max_size=3), st.integers(), max_size=3)
    | st.tuples(st.text(max_size=3))
)


def _parses_or_rejects(value: object) -> None:
    try:
        parsed = parse_address(value)
    except InvalidParameters as exc:
        assert exc.code is ErrorCode.INVALID_PARAMETERS
        assert exc.message
        return
    canonical = format_address(parsed)
    assert parse_address(canonical) == parsed
    assert format_address(parse_address(canonical)) == canonical


# --- properties -------------------------------------------------------------------------------


@given(addresses())
def test_format_then_parse_gives_back_the_same_address(address: Address) -> None:
    assert parse_address(format_address(address)) == address


@given(address_texts())
def test_formatting_a_parsed_address_is_stable(text: str) -> None:
    once = format_address(parse_address(text))
    assert format_address(parse_address(once)) == once
    assert parse_address(once) == parse_address(text)


@given(st.text())
def test_arbitrary_text_parses_or_raises_invalid_parameters(text: str) -> None:
    _parses_or_rejects(text)


@given(st.binary())
def test_decoded_bytes_parse_or_raise_invalid_parameters(data: bytes) -> None:
    _parses_or_rejects(data.decode("utf-8", errors="replace"))
    _parses_or_rejects(data.decode("latin-1"))


@given(junk_after_scheme)
def test_junk_after_the_scheme_parses_or_raises_invalid_parameters(text: str) -> None:
    _parses_or_rejects(text)


@given(non_strings)
def test_non_string_input_raises_invalid_parameters(value: object) -> None:
    with pytest.raises(InvalidParameters, match="must be a string"):
        parse_address(value)


@given(addresses())
def test_an_address_covers_itself(address: Address) -> None:
    assert address.covers(address)


@given(addresses())
def test_the_any_address_covers_everything(address: Address) -> None:
    assert Address().covers(address)


# --- examples that must parse -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "bzzz://*:architect@myproject:api_design",
            Address(None, "architect", "myproject", "api_design"),
        ),
        (
            "bzzz://architect-001:architect@myproject:api_design",
            Address("architect-001", "architect", "myproject", "api_design"),
        ),
        ("bzzz://*:architect@*", Address(role="architect")),
        ("bzzz://architect-001", Address(agent="architect-001")),
        ("bzzz://architect-001/inbox", Address(agent="architect-001", path="/inbox")),
        (
            "bzzz://architect-001:architect@p:t/threads/thread-01ABC",
            Address("architect-001", "architect", "p", "t", "/threads/thread-01ABC"),
        ),
        ("bzzz://*:*@*:*", Address()),
        ("bzzz://:reviewer", Address(role="reviewer")),
        ("bzzz://", Address()),
        ("bzzz://@proj", Address(project="proj")),
        ("bzzz://a/inbox/", Address(agent="a", path="/inbox")),
        ("bzzz://a/", Address(agent="a")),
        ("  BZZZ://a:b@c:d/x~y  ", Address("a", "b", "c", "d", "/x~y")),
    ],
)
def test_examples_parse_to_their_parts(text: str, expected: Address) -> None:
    assert parse_address(text) == expected


def test_parsed_address_matches_the_api_reference_shape() -> None:
    raw = "bzzz://*:architect@myproject:api_design"
    assert parse_address(raw).to_dict(raw) == {
        "agent": None,
        "role": "architect",
        "project": "myproject",
        "task": "api_design",
        "path": None,
        "raw": raw,
    }


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("bzzz://architect-001", "bzzz://architect-001:*@*:*"),
        ("bzzz://:reviewer", "bzzz://*:reviewer@*:*"),
        ("bzzz://*:architect@*", "bzzz://*:architect@*:*"),
        ("BZZZ://a/inbox/", "bzzz://a:*@*:*/inbox"),
        ("bzzz://a:b@c:d/t/1", "bzzz://a:b@c:d/t/1"),
    ],
)
def test_format_spells_out_every_part(text: str, canonical: str) -> None:
    assert format_address(parse_address(text)) == canonical


# --- errors -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "semantic address is empty"),
        ("   ", "semantic address is empty"),
        ("http://a:b@c:d", "semantic address must start with 'bzzz://'"),
        ("bzzz:/a", "semantic address must start with 'bzzz://'"),
        ("architect-001", "semantic address must start with 'bzzz://'"),
        ("bzzz://a b", "agent part 'a b' contains invalid characters; allowed: letters, digits"),
        ("bzzz://a:r le", "role part 'r le' contains invalid characters"),
        ("bzzz://a@pro ject", "project part 'pro ject' contains invalid characters"),
        ("bzzz://a@p:t!", "task part 't!' contains invalid characters"),
        ("bzzz://**", "agent part '**' contains invalid characters"),
        ("bzzz://a@b@c", "semantic address part 'a@b@c' contains more than one '@'"),
        ("bzzz://a:b:c", "agent:role part 'a:b:c' contains more than one ':'"),
        ("bzzz://a@p:t:x", "project:task part 'p:t:x' contains more than one ':'"),
        ("bzzz://a//inbox", "path '//inbox' contains an empty segment"),
        ("bzzz://a/x//y", "path '/x//y' contains an empty segment"),
        ("bzzz://a/x?y", "semantic address query 'y' is not understood"),
        ("bzzz://a?network=a.b", "network 'a.b' is not a network id"),
        ("bzzz://a?network=", "semantic address query 'network=' is not understood"),
        ("bzzz://a/x:y", "path '/x:y' contains invalid characters"),
        ("bzzz://a/in box", "path '/in box' contains invalid characters"),
        ("bzzz://a/x/../y", "path '/x/../y' contains the segment '..'"),
        ("bzzz://" + "a" * 129, "agent part is 129 characters long; the maximum is 128"),
        ("bzzz://a:" + "r" * 129, "role part is 129 characters long"),
        (
            "bzzz://a/" + "x" * 512,
            "path '/" + "x" * 199 + "...' is 513 characters long; the maximum is 512",
        ),
        ("bzzz://" + "a" * 1018, "semantic address is 1025 characters long; the maximum is 1024"),
    ],
)
def test_malformed_addresses_are_rejected_with_what_is_wrong(text: str, message: str) -> None:
    with pytest.raises(InvalidParameters) as caught:
        parse_address(text)
    assert message in caught.value.message
    assert caught.value.code is ErrorCode.INVALID_PARAMETERS


def test_whitespace_inside_is_rejected_but_around_is_stripped() -> None:
    assert parse_address("\t bzzz://a:b \n") == Address("a", "b")
    with pytest.raises(InvalidParameters, match="role part 'b\\\\nc'"):
        parse_address("bzzz://a:b\nc")


def test_other_schemes_are_rejected_whatever_their_case() -> None:
    with pytest.raises(InvalidParameters, match="must start with 'bzzz://'"):
        parse_address("BZZ://a")
    with pytest.raises(InvalidParameters, match="must start with 'bzzz://'"):
        parse_address("bzzzz://a")


def test_error_details_name_the_offending_part() -> None:
    with pytest.raises(InvalidParameters) as caught:
        parse_address("bzzz://ok:bad role")
    assert caught.value.details == {"part": "role", "value": "bad role"}


def test_oversized_input_is_not_echoed_in_full() -> None:
    with pytest.raises(InvalidParameters) as caught:
        parse_address("bzzz://" + "a" * 5000)
    assert len(caught.value.message) < 300
    assert len(caught.value.details["address"]) < 300


def test_constructing_an_invalid_address_is_rejected() -> None:
    with pytest.raises(InvalidParameters, match="agent part 'a b'"):
        Address(agent="a b")
    with pytest.raises(InvalidParameters, match="path 'inbox' must start with '/'"):
        Address(path="inbox")
    with pytest.raises(InvalidParameters, match="task part must be a string or None, got int"):
        Address(task=5)  # type: ignore[arg-type]  # checking the runtime guard on purpose


def test_an_address_too_long_in_canonical_form_cannot_be_built() -> None:
    longest_part = "a" * 128
    with pytest.raises(InvalidParameters, match="canonical form; the maximum is 1024"):
        Address(longest_part, longest_part, longest_part, longest_part, "/" + "p" * 511)


def test_wildcard_spellings_in_the_constructor_mean_any() -> None:
    assert Address("*", "", "*", "", "/") == Address()


# --- helpers on Address -----------------------------------------------------------------------


def test_is_wildcard_when_no_agent_is_named() -> None:
    assert parse_address("bzzz://*:architect@p:t").is_wildcard
    assert not parse_address("bzzz://architect-001").is_wildcard


def test_with_path_replaces_only_the_path() -> None:
    base = parse_address("bzzz://a:b@c:d/old")
    assert base.with_path("/new/one/") == Address("a", "b", "c", "d", "/new/one")
    assert base.with_path(None) == Address("a", "b", "c", "d")
    with pytest.raises(InvalidParameters, match="path '/a b'"):
        base.with_path("/a b")


def test_agent_address_is_canonical() -> None:
    assert (
        agent_address("architect-001", "architect", "p", None)
        == "bzzz://architect-001:architect@p:*"
    )
    assert agent_address("a", "b", None, None) == "bzzz://a:b@*:*"


def test_agent_address_refuses_a_wildcard_agent() -> None:
    with pytest.raises(InvalidParameters, match="agent_id '\\*' must name one agent"):
        agent_address("*", "architect", None, None)
    with pytest.raises(InvalidParameters, match="agent part 'bad id'"):
        agent_address("bad id", "architect", None, None)


# --- matching ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "agent", "expected"),
    [
        (
            "bzzz://*:architect@myproject:api_design",
            ("a1", "architect", "myproject", "api_design"),
            True,
        ),
        (
            "bzzz://*:architect@myproject:api_design",
            ("a1", "reviewer", "myproject", "api_design"),
            False,
        ),
        (
            "bzzz://*:architect@myproject:api_design",
            ("a1", "architect", "other", "api_design"),
            False,
        ),
        (
            "bzzz://*:architect@myproject:api_design",
            ("a1", "architect", "myproject", "other"),
            False,
        ),
        ("bzzz://*:architect@myproject:api_design", ("a1", "architect", None, None), True),
        ("bzzz://*:architect@myproject:api_design", ("a1", "architect", "myproject", None), True),
        ("bzzz://*:architect@myproject:api_design", ("a1", "architect", None, "other"), False),
        ("bzzz://a1", ("a1", "anything", "p", "t"), True),
        ("bzzz://a1", ("a2", "anything", "p", "t"), False),
        ("bzzz://*:*@*:*", ("a9", "r", None, None), True),
        ("bzzz://a1:architect@p:t/inbox", ("a1", "architect", "p", "t"), True),
        ("bzzz://Architect", ("architect", "r", None, None), False),
    ],
)
def test_matches_agents_by_their_declared_parts(
    text: str, agent: tuple[str, str, str | None, str | None], expected: bool
) -> None:
    assert parse_address(text).matches(*agent) is expected


@given(addresses(), small_identifiers, small_identifiers)
def test_an_agent_without_project_or_task_matches_any_project_and_task(
    address: Address, agent_id: str, role: str
) -> None:
    concrete = Address(agent_id, role, address.project, address.task)
    assert concrete.matches(agent_id, role, None, None)


@given(
    small_identifiers,
    small_identifiers,
    st.none() | small_identifiers,
    st.none() | small_identifiers,
)
def test_an_agent_matches_its_own_address(
    agent_id: str, role: str, project: str | None, task: str | None
) -> None:
    assert parse_address(agent_address(agent_id, role, project, task)).matches(
        agent_id, role, project, task
    )


# --- covers (subscription filters) ------------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "target", "expected"),
    [
        ("bzzz://*:architect@*", "bzzz://a1:architect@p:t", True),
        ("bzzz://*:architect@*", "bzzz://a1:reviewer@p:t", False),
        ("bzzz://*:architect@*", "bzzz://a1", False),
        ("bzzz://*:architect@p", "bzzz://*:architect@p:t", True),
        ("bzzz://*:architect@p", "bzzz://*:architect@q:t", False),
        ("bzzz://*:architect@p", "bzzz://*:architect", False),
        ("bzzz://a1", "bzzz://a1:r@p:t/inbox", True),
        ("bzzz://a1/inbox", "bzzz://a1/inbox", True),
        ("bzzz://a1/inbox", "bzzz://a1/inbox/msg-1", True),
        ("bzzz://a1/inbox", "bzzz://a1/inboxes", False),
        ("bzzz://a1/inbox", "bzzz://a1", False),
        ("bzzz://a1/inbox", "bzzz://a1/outbox", False),
        ("bzzz://*:*@*:*", "bzzz://*:*@*:*", True),
    ],
)
def test_covers_requires_every_named_part_of_the_filter(
    pattern: str, target: str, expected: bool
) -> None:
    assert parse_address(pattern).covers(parse_address(target)) is expected


@given(addresses(), addresses())
def test_covers_never_lets_a_named_part_match_an_unknown_one(
    pattern: Address, other: Address
) -> None:
    if pattern.covers(other):
        for mine, theirs in (
            (pattern.agent, other.agent),
            (pattern.role, other.role),
            (pattern.project, other.project),
            (pattern.task, other.task),
        ):
            assert mine is None or mine == theirs


def test_an_address_on_another_network_keeps_its_network_through_format_and_parse() -> None:
    address = parse_address("bzzz://rev-1:reviewer@shop:api/inbox?network=research")
    assert address.network == "research"
    assert address.path == "/inbox"
    assert format_address(address) == "bzzz://rev-1:reviewer@shop:api/inbox?network=research"
    assert parse_address(format_address(address)) == address
    assert address.to_dict("x")["network"] == "research"
    assert "network" not in parse_address("bzzz://rev-1").to_dict("x")
