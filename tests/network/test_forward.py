"""A forwarded request on the wire: signed, admitted, fresh, never replayed; its answers."""

from __future__ import annotations

import json
import time

import pytest

from bzzz.errors import AgentNotFound, BzzzError, ErrorCode, PermissionDenied
from bzzz.network.forward import (
    BadAnswer,
    ForwardGate,
    ForwardRefused,
    ForwardRequest,
    WireCaller,
    WirePrincipal,
    answer_error,
    answer_ok,
    forward_subject,
    raise_answer,
    sign_request,
)
from bzzz.network.identity import NodeIdentity
from bzzz.principal import Principal, Scope

NET = "net"
WHO = Principal("token:t", "token", frozenset({"p1"}), frozenset({"*"}), Scope.WRITE, "t")


def _request(signer: NodeIdentity, request_id: str = "r-1", at: float | None = None) -> bytes:
    body = ForwardRequest(
        id=request_id,
        network=NET,
        project="p2",
        op="get",
        params={"address": "bzzz://w@p2/inbox"},
        caller=WireCaller(session_id="principal-x", principal=WirePrincipal.of(WHO)),
        origin=signer.node_id,
        origin_key=signer.public_key_b64,
        at=time.time() if at is None else at,
    )
    return sign_request(signer, body)


def _gate(*admitted: NodeIdentity) -> ForwardGate:
    ids = {n.node_id for n in admitted}
    return ForwardGate(NET, lambda key, node_id: node_id in ids)


def test_a_signed_request_of_an_admitted_node_opens_with_the_principal_it_was_sent_with() -> None:
    a = NodeIdentity.generate()
    opened = _gate(a).open(_request(a))
    assert opened.caller.principal.principal() == WHO
    assert opened.origin == a.node_id


def test_a_request_whose_bytes_were_changed_is_refused() -> None:
    a = NodeIdentity.generate()
    signed = json.loads(_request(a))
    signed["body"]["caller"]["principal"]["projects"] = ["*"]
    with pytest.raises(ForwardRefused, match="bad signature"):
        _gate(a).open(json.dumps(signed).encode())


def test_a_request_signed_by_a_node_not_admitted_is_refused() -> None:
    a, stranger = NodeIdentity.generate(), NodeIdentity.generate()
    with pytest.raises(ForwardRefused, match="not admitted"):
        _gate(a).open(_request(stranger))


def test_a_request_claiming_another_nodes_id_is_refused() -> None:
    a, stranger = NodeIdentity.generate(), NodeIdentity.generate()
    signed = json.loads(_request(stranger))
    signed["body"]["origin"] = a.node_id
    with pytest.raises(ForwardRefused):
        _gate(a).open(json.dumps(signed).encode())


def test_a_replayed_or_stale_request_is_refused() -> None:
    a = NodeIdentity.generate()
    gate = _gate(a)
    data = _request(a, "r-7")
    gate.open(data)
    with pytest.raises(ForwardRefused, match="replayed"):
        gate.open(data)
    with pytest.raises(ForwardRefused, match="stale"):
        gate.open(_request(a, "r-8", at=time.time() - 3600))


def test_the_gate_remembers_a_bounded_number_of_ids() -> None:
    a = NodeIdentity.generate()
    ids = {a.node_id}
    gate = ForwardGate(NET, lambda key, node_id: node_id in ids, remembered=3)
    for n in range(10):
        gate.open(_request(a, f"r-{n}"))
    assert len(gate._seen) <= 3


def test_garbage_is_refused_as_malformed() -> None:
    with pytest.raises(ForwardRefused, match="malformed"):
        _gate().open(b"{not json")


def test_an_error_answer_is_raised_again_as_the_same_error() -> None:
    b = NodeIdentity.generate()
    admits = _gate(b)._admits
    sent = AgentNotFound("no agent 'w' at that address", details={"agent_id": "w"})
    with pytest.raises(AgentNotFound) as raised:
        raise_answer(answer_error(b, "r-1", sent), "r-1", admits)
    assert raised.value.to_response()["details"] == {"agent_id": "w"}
    assert raised.value.message == sent.message
    with pytest.raises(PermissionDenied):
        raise_answer(answer_error(b, "r-1", ForwardRefused("bad signature")), "r-1", admits)
    with pytest.raises(BzzzError) as other:
        slow = BzzzError("slow down", code=ErrorCode.RATE_LIMITED)
        raise_answer(answer_error(b, "r-1", slow), "r-1", admits)
    assert other.value.code is ErrorCode.RATE_LIMITED
    assert raise_answer(answer_ok(b, "r-1", {"success": True}), "r-1", admits) == {"success": True}


def test_an_answer_not_signed_by_an_admitted_node_for_this_request_is_refused() -> None:
    b, intruder = NodeIdentity.generate(), NodeIdentity.generate()
    admits = _gate(b)._admits
    with pytest.raises(BadAnswer, match="admitted"):
        raise_answer(answer_ok(intruder, "r-1", {"success": True}), "r-1", admits)
    with pytest.raises(BadAnswer, match="this request"):
        raise_answer(answer_ok(b, "r-2", {"success": True}), "r-1", admits)
    changed = json.loads(answer_ok(b, "r-1", {"success": False}))
    changed["body"]["result"] = {"success": True}
    with pytest.raises(BadAnswer, match="admitted"):
        raise_answer(json.dumps(changed).encode(), "r-1", admits)
    with pytest.raises(BadAnswer, match="malformed"):
        raise_answer(b"nope", "r-1", admits)


def test_subjects_escape_a_project_and_stay_outside_the_log() -> None:
    assert forward_subject(NET, "a.b") == "_bzzz.net.fwd.a%2Eb"
    assert forward_subject(NET, "*") == "_bzzz.net.fwd.*"
    assert not forward_subject(NET, "p").startswith(f"bzzz.{NET}.")
