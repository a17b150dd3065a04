"""A forwarded request on the wire: sealed, signed, admitted, fresh, bound to its inbox, used
once across the network; its answers sealed and signed likewise."""

from __future__ import annotations

import json
import time

import pytest

from bzzz.errors import AgentNotFound, BzzzError, ErrorCode, NetworkError, PermissionDenied
from bzzz.network.forward import (
    ONCE_TTL,
    BadAnswer,
    ForwardGate,
    ForwardRefused,
    ForwardRequest,
    ForwardWire,
    WireCaller,
    WirePrincipal,
    forward_subject,
    refusal,
)
from bzzz.network.identity import NodeIdentity
from bzzz.network.once import InMemoryOnce
from bzzz.network.sealing import Keyring, NetworkKey
from bzzz.principal import Principal, Scope

NET = "net"
INBOX = "_INBOX.test.1"
WHO = Principal("token:t", "token", frozenset({"p1"}), frozenset({"*"}), Scope.WRITE, "t")
SECRET_TEXT = "canary-forward-7f3a"
KEY = NetworkKey.of(bytes(range(32)))


def _keyring() -> Keyring:
    return Keyring([KEY])


def _wire(
    node: NodeIdentity, *admitted: NodeIdentity, keyring: Keyring | None = None
) -> ForwardWire:
    ids = {n.node_id for n in admitted}
    ring = keyring if keyring is not None else _keyring()
    return ForwardWire(node, NET, lambda key, node_id: node_id in ids, ring)


def _body(signer: NodeIdentity, request_id: str = "r-1", at: float | None = None) -> ForwardRequest:
    return ForwardRequest(
        id=request_id,
        network=NET,
        project="p2",
        op="post",
        params={"target_address": "bzzz://w@p2", "content": {"text": SECRET_TEXT}},
        caller=WireCaller(session_id="mcp-secret-session", principal=WirePrincipal.of(WHO)),
        reply=INBOX,
        origin=signer.node_id,
        origin_key=signer.public_key_b64,
        at=time.time() if at is None else at,
    )


def _request(signer: NodeIdentity, request_id: str = "r-1", at: float | None = None) -> bytes:
    return _wire(signer).request(_body(signer, request_id, at))


def _gate(*admitted: NodeIdentity, used: InMemoryOnce | None = None) -> ForwardGate:
    return ForwardGate(
        _wire(NodeIdentity.generate(), *admitted),
        used if used is not None else InMemoryOnce(ONCE_TTL),
    )


async def test_a_sealed_request_of_an_admitted_node_opens_with_the_principal_it_was_sent_with() -> (
    None
):
    a = NodeIdentity.generate()
    opened = await _gate(a).open(_request(a), INBOX)
    assert opened.caller.principal.principal() == WHO
    assert opened.origin == a.node_id
    assert opened.params["content"]["text"] == SECRET_TEXT


def test_nothing_of_a_request_or_its_answer_is_in_clear_on_the_wire() -> None:
    a, b = NodeIdentity.generate(), NodeIdentity.generate()
    sent = _request(a)
    answer = _wire(b, a).answer_ok("r-1", {"echo": SECRET_TEXT, "principal": WHO.id})
    for data in (sent, answer):
        assert data.startswith(b"bz1.")
        # The project as JSON spells it: a bare "p2" turns up in one box in ~10 by chance.
        for clear in (SECRET_TEXT, "token:t", "mcp-secret-session", a.node_id, '"p2"', INBOX):
            assert clear.encode() not in data


async def test_a_request_whose_box_was_changed_or_sealed_under_another_key_is_refused() -> None:
    a = NodeIdentity.generate()
    sent = _request(a)
    flipped = sent[:-3] + (b"A" if sent[-3:-2] != b"A" else b"B") + sent[-2:]
    with pytest.raises(ForwardRefused, match="bad_seal"):
        await _gate(a).open(flipped, INBOX)
    other = Keyring([NetworkKey.of(b"\x07" * 32)])
    with pytest.raises(ForwardRefused, match="unknown_key"):
        await _gate(a).open(_wire(a, keyring=other).request(_body(a)), INBOX)


async def test_a_clear_request_is_refused_by_a_node_that_seals() -> None:
    a = NodeIdentity.generate()
    clear = ForwardWire(a, NET, lambda k, n: True, None).request(_body(a))
    assert SECRET_TEXT.encode() in clear  # encryption off: signed, not sealed
    with pytest.raises(ForwardRefused, match="not_sealed"):
        await _gate(a).open(clear, INBOX)


async def test_a_request_whose_signed_body_was_changed_is_refused() -> None:
    a = NodeIdentity.generate()
    ring = _keyring()
    clear = json.loads(ForwardWire(a, NET, lambda k, n: True, None).request(_body(a)))
    clear["body"]["caller"]["principal"]["projects"] = ["*"]
    resealed = ring.seal(json.dumps(clear).encode(), f"bzzz.fwd.request|{NET}".encode())
    with pytest.raises(ForwardRefused, match="bad signature"):
        await _gate(a).open(resealed.encode(), INBOX)


async def test_a_request_signed_by_a_node_not_admitted_is_refused_without_its_id() -> None:
    a, stranger = NodeIdentity.generate(), NodeIdentity.generate()
    with pytest.raises(ForwardRefused, match="not admitted") as refused:
        await _gate(a).open(_request(stranger), INBOX)
    assert refused.value.request is None  # answered with the reason alone


async def test_a_request_that_came_with_another_reply_subject_is_refused() -> None:
    a = NodeIdentity.generate()
    gate = _gate(a)
    with pytest.raises(ForwardRefused, match="another subject") as refused:
        await gate.open(_request(a, "r-5"), "_INBOX.attacker.1")
    assert refused.value.request is not None and refused.value.request.id == "r-5"


async def test_a_replayed_or_stale_request_is_refused() -> None:
    a = NodeIdentity.generate()
    gate = _gate(a)
    data = _request(a, "r-7")
    await gate.open(data, INBOX)
    with pytest.raises(ForwardRefused, match="replayed"):
        await gate.open(data, INBOX)
    with pytest.raises(ForwardRefused, match="stale"):
        await gate.open(_request(a, "r-8", at=time.time() - 3600), INBOX)


async def test_a_request_id_used_on_one_member_is_refused_by_every_other() -> None:
    a = NodeIdentity.generate()
    network = InMemoryOnce(ONCE_TTL)  # the network's record, as every member reads it
    first, second = _gate(a, used=network), _gate(a, used=network)
    data = _request(a, "r-9")
    await first.open(data, INBOX)
    with pytest.raises(ForwardRefused, match="replayed"):
        await second.open(data, INBOX)


async def test_a_request_whose_id_cannot_be_recorded_is_refused() -> None:
    a = NodeIdentity.generate()

    class Unreachable:
        async def claim(self, key: str) -> bool:
            raise NetworkError("the servers are away")

    gate = ForwardGate(_wire(NodeIdentity.generate(), a), Unreachable())
    with pytest.raises(ForwardRefused, match="could not be recorded"):
        await gate.open(_request(a), INBOX)


async def test_used_ids_are_kept_for_their_ttl_and_bounded_in_number() -> None:
    clock = [0.0]
    used = InMemoryOnce(10.0, remembered=3, now=lambda: clock[0])
    assert await used.claim("x") is True
    assert await used.claim("x") is False
    clock[0] = 11.0
    assert await used.claim("x") is True  # past its ttl: the timestamp window refuses it
    for n in range(10):
        await used.claim(f"k-{n}")
    assert len(used) <= 3


async def test_garbage_is_refused_as_not_sealed() -> None:
    with pytest.raises(ForwardRefused, match="not_sealed"):
        await _gate().open(b"{not json", INBOX)
    with pytest.raises(ForwardRefused, match="too large"):
        await _gate().open(b"x" * 2_000_000, INBOX)


def test_an_error_answer_is_raised_again_as_the_same_error() -> None:
    b = NodeIdentity.generate()
    wire = _wire(b, b)
    sent = AgentNotFound("no agent 'w' at that address", details={"agent_id": "w"})
    with pytest.raises(AgentNotFound) as raised:
        wire.result_of(wire.answer_error("r-1", sent), "r-1")
    assert raised.value.to_response()["details"] == {"agent_id": "w"}
    assert raised.value.message == sent.message
    with pytest.raises(PermissionDenied):
        wire.result_of(wire.answer_error("r-1", ForwardRefused("bad signature")), "r-1")
    with pytest.raises(BzzzError) as other:
        slow = BzzzError("slow down", code=ErrorCode.RATE_LIMITED)
        wire.result_of(wire.answer_error("r-1", slow), "r-1")
    assert other.value.code is ErrorCode.RATE_LIMITED
    assert wire.result_of(wire.answer_ok("r-1", {"success": True}), "r-1") == {"success": True}


def test_an_answer_not_signed_by_an_admitted_node_for_this_request_is_refused() -> None:
    b, intruder = NodeIdentity.generate(), NodeIdentity.generate()
    mine = _wire(NodeIdentity.generate(), b)
    with pytest.raises(BadAnswer, match="admitted"):
        mine.result_of(_wire(intruder).answer_ok("r-1", {"success": True}), "r-1")
    # An answer sealed for another request does not open for this one.
    with pytest.raises(BadAnswer, match="did not open"):
        mine.result_of(_wire(b).answer_ok("r-2", {"success": True}), "r-1")
    with pytest.raises(BadAnswer, match="did not open"):
        mine.result_of(b"nope", "r-1")
    with pytest.raises(BadAnswer, match="refused: not admitted"):
        mine.result_of(refusal("not admitted"), "r-1")


def test_a_clear_answer_is_not_taken_by_a_node_that_seals() -> None:
    b = NodeIdentity.generate()
    clear = ForwardWire(b, NET, lambda k, n: True, None).answer_ok("r-1", {"success": True})
    with pytest.raises(BadAnswer, match="did not open"):
        _wire(NodeIdentity.generate(), b).result_of(clear, "r-1")


def test_subjects_escape_a_project_and_stay_outside_the_log() -> None:
    assert forward_subject(NET, "a.b") == "_bzzz.net.fwd.a%2Eb"
    assert forward_subject(NET, "*") == "_bzzz.net.fwd.*"
    assert not forward_subject(NET, "p").startswith(f"bzzz.{NET}.")
