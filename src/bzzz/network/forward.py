"""Forwarded calls on the wire: a call for a project this node does not serve, to one that does.

A forwarding node signs a :class:`ForwardRequest` (the call, the caller's principal, a request id,
its own node id and key, a timestamp) and sends it by core NATS request/reply to
``_bzzz.<network>.fwd.<project token>`` — outside ``bzzz.<network>.>``, so the log never stores
one. Every node subscribes for the projects it serves (``*``: the whole ``fwd.*``) in ONE queue
group (:data:`QUEUE`): nats-server picks one member of a queue group across every matching
subscription, so a ``*`` node and a ``p2`` node share ``p2``'s calls and exactly one answers.

The landing node opens the request with :class:`ForwardGate`: the signature, the signer admitted
to the network, the timestamp within :data:`WINDOW` seconds of its own clock, the request id not
seen before (a bounded memory of the window's ids). Answers (:func:`answer_ok`,
:func:`answer_error`) carry a result or an error's code, message and details, signed by the
landing node for that request id; the forwarding node checks that an admitted node signed it
(a holder of the NATS login who joins the queue group answers nothing) and raises the error
again (:func:`raise_answer`) as the same BzzzError.
"""

from __future__ import annotations

import json
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from bzzz.errors import (
    AgentNotFound,
    BzzzError,
    ErrorCode,
    InvalidParameters,
    NetworkError,
    PermissionDenied,
    ThreadNotFound,
)
from bzzz.network.identity import NodeIdentity, origin_of, verify_signature
from bzzz.principal import Principal, Scope
from bzzz.projects import subject_token

QUEUE = "bzzz-fwd"
# How far a request's timestamp may be from the landing node's clock (seconds, either way).
WINDOW = 30.0
# At most this many request ids are remembered (those older than the window are let go first).
REMEMBERED = 100_000
MAX_REQUEST_BYTES = 1_048_576

Op = Literal["get", "post", "announce", "thread"]


def forward_subject(network: str, project: str | None) -> str:
    """Where calls for ``project`` are answered (``*``: the pattern every project matches)."""
    token = "*" if project == "*" else subject_token(project)
    return f"_bzzz.{network}.fwd.{token}"


class _Wire(BaseModel):
    model_config = ConfigDict(extra="forbid")


class WirePrincipal(_Wire):
    """A principal as the forwarding node authenticated it."""

    id: str = Field(max_length=512)
    kind: str = Field(max_length=32)
    projects: list[str] = Field(max_length=1000)
    roles: list[str] = Field(max_length=1000)
    scope: int = Field(ge=int(Scope.READ), le=int(Scope.ADMIN))
    name: str = Field("", max_length=512)
    # An agent token's agent: the receiving node keeps the binding (it announces that id only).
    agent: str | None = Field(None, max_length=128)

    @classmethod
    def of(cls, who: Principal) -> WirePrincipal:
        """The wire form of a principal."""
        return cls(
            id=who.id,
            kind=who.kind,
            projects=sorted(who.projects),
            roles=sorted(who.roles),
            scope=int(who.scope),
            name=who.name,
            agent=who.agent,
        )

    def principal(self) -> Principal:
        """The principal again, with the grants it was sent with."""
        return Principal(
            id=self.id,
            kind=self.kind,
            projects=frozenset(self.projects),
            roles=frozenset(self.roles),
            scope=Scope(self.scope),
            name=self.name,
            agent=self.agent,
        )


class WireCaller(_Wire):
    """Who called: the session key, the principal, the agent handle passed (if any)."""

    session_id: str = Field(max_length=256)
    principal: WirePrincipal
    handle: str | None = Field(None, max_length=512)


class ForwardRequest(_Wire):
    """One forwarded call: what the landing node runs, for whom, sent by which node and when."""

    v: Literal[1] = 1
    id: str = Field(min_length=1, max_length=64)
    network: str = Field(max_length=64)
    project: str = Field(max_length=256)
    op: Op
    params: dict[str, Any]
    caller: WireCaller
    # A post's sender as the forwarding node found it (the caller acts as that agent there),
    # or None to let the landing node decide (reads).
    sender: str | None = Field(None, max_length=256)
    # A post's message id (``msg-<ULID>``), the same on every attempt: its envelope's id.
    key: str | None = Field(None, max_length=64)
    origin: str = Field(max_length=64)
    origin_key: str = Field(max_length=64)
    at: float


class Signed(_Wire):
    """A request and the forwarding node's signature of its canonical JSON."""

    body: ForwardRequest
    sig: str = Field(max_length=128)


def canonical(body: ForwardRequest) -> bytes:
    """The bytes a signature covers: sorted, compact JSON of the request."""
    return json.dumps(
        body.model_dump(mode="json"), sort_keys=True, separators=(",", ":"), ensure_ascii=False
    ).encode()


def sign_request(identity: NodeIdentity, body: ForwardRequest) -> bytes:
    """The request as sent: its body and this node's signature of it."""
    return Signed(body=body, sig=identity.sign(canonical(body))).model_dump_json().encode()


class ForwardRefused(PermissionDenied):
    """A forwarded request the landing node does not run (forged, unadmitted, stale, replayed)."""

    def __init__(self, reason: str) -> None:
        super().__init__(
            f"forwarded request refused: {reason}", details={"reason": reason, "forwarded": True}
        )


class ForwardGate:
    """Opens forwarded requests: signature, admitted signer, fresh timestamp, unseen id."""

    def __init__(
        self,
        network: str,
        admits: Callable[[str, str], bool],
        *,
        window: float = WINDOW,
        remembered: int = REMEMBERED,
        now: Callable[[], float] = time.time,
    ) -> None:
        self._network = network
        self._admits = admits
        self._window = window
        self._remembered = remembered
        self._now = now
        self._seen: OrderedDict[str, float] = OrderedDict()

    def open(self, data: bytes) -> ForwardRequest:
        """The request, checked; ForwardRefused says why not."""
        if len(data) > MAX_REQUEST_BYTES:
            raise ForwardRefused("too large")
        try:
            signed = Signed.model_validate_json(data)
        except ValidationError:
            raise ForwardRefused("malformed") from None
        body = signed.body
        if body.network != self._network:
            raise ForwardRefused("another network's request")
        try:
            origin, _ = origin_of(body.origin_key)
        except ValueError:
            raise ForwardRefused("bad origin key") from None
        if origin != body.origin or not verify_signature(
            body.origin_key, signed.sig, canonical(body)
        ):
            raise ForwardRefused("bad signature")
        if not self._admits(body.origin_key, body.origin):
            raise ForwardRefused(f"node {body.origin} is not admitted")
        now = self._now()
        if abs(now - body.at) > self._window:
            raise ForwardRefused("stale timestamp")
        self._remember(body.id, now)
        return body

    def _remember(self, request_id: str, now: float) -> None:
        if request_id in self._seen:
            raise ForwardRefused("replayed request id")
        while self._seen:
            oldest_id, seen_at = next(iter(self._seen.items()))
            if now - seen_at <= self._window and len(self._seen) < self._remembered:
                break
            del self._seen[oldest_id]
        self._seen[request_id] = now


class BadAnswer(NetworkError):
    """An answer that no admitted node signed for this request: another member is asked."""


def _json(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def request_id_of(data: bytes) -> str:
    """The request id a (possibly refused) request names, for its answer; "" when none."""
    try:
        found = json.loads(data)["body"]["id"]
    except (ValueError, KeyError, TypeError):
        return ""
    return found[:64] if isinstance(found, str) else ""


def _signed_answer(identity: NodeIdentity, request_id: str, answer: dict[str, Any]) -> bytes:
    body = {
        "request": request_id,
        "node": identity.node_id,
        "key": identity.public_key_b64,
        **answer,
    }
    return _json({"body": body, "sig": identity.sign(_json(body))})


def answer_ok(identity: NodeIdentity, request_id: str, result: dict[str, Any]) -> bytes:
    """The landing node's answer, signed: the call's result."""
    return _signed_answer(identity, request_id, {"ok": True, "result": result})


def answer_error(identity: NodeIdentity, request_id: str, error: BzzzError) -> bytes:
    """The landing node's answer, signed: the error the call raised (code, message, details)."""
    shown = {"code": str(error.code), "message": error.message, "details": error.details}
    return _signed_answer(identity, request_id, {"ok": False, "error": shown})


def _opened_answer(
    data: bytes, request_id: str, admits: Callable[[str, str], bool]
) -> dict[str, Any]:
    """The answer's body once it is shown to come from an admitted node, for this request."""
    try:
        signed = json.loads(data)
        body, sig = signed["body"], str(signed["sig"])
        key, node = str(body["key"]), str(body["node"])
        origin, _ = origin_of(key)
    except (ValueError, KeyError, TypeError) as exc:
        raise BadAnswer("the serving node's answer was malformed") from exc
    if body.get("request") != request_id or origin != node:
        raise BadAnswer("the answer was not for this request")
    if not verify_signature(key, sig, _json(body)) or not admits(key, node):
        raise BadAnswer(f"the answer was not signed by an admitted node ({node[:64]})")
    return dict(body)


_CLASSES: dict[str, type[BzzzError]] = {
    ErrorCode.INVALID_PARAMETERS: InvalidParameters,
    ErrorCode.AGENT_NOT_FOUND: AgentNotFound,
    ErrorCode.THREAD_NOT_FOUND: ThreadNotFound,
    ErrorCode.PERMISSION_DENIED: PermissionDenied,
    ErrorCode.NETWORK_ERROR: NetworkError,
}


def raise_answer(
    data: bytes, request_id: str, admits: Callable[[str, str], bool]
) -> dict[str, Any]:
    """The result of an answer (signed by an admitted node, for ``request_id``), or the error
    it carries raised again as a BzzzError."""
    answer = _opened_answer(data, request_id, admits)
    try:
        if answer.get("ok") is True and isinstance(answer.get("result"), dict):
            return dict(answer["result"])
        error = answer["error"]
        code = ErrorCode(error["code"])
        message, details = str(error["message"]), dict(error.get("details") or {})
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise NetworkError("the serving node's answer was malformed") from exc
    cls = _CLASSES.get(code)
    if cls is not None:
        raise cls(message, details=details)
    raise BzzzError(message, code=code, details=details)
