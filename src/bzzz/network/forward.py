"""Forwarded calls on the wire: a call for a project this node does not serve, to one that does.

A forwarding node signs a :class:`ForwardRequest` (the call, the caller's principal and session
key, a request id, the reply subject its answer must go to, its own node id and key, a
timestamp), seals the signed request under the network key (an AEAD box, ``network/sealing.py``,
bound to the network) and sends the box by core NATS request/reply to
``_bzzz.<network>.fwd.<project token>`` — outside ``bzzz.<network>.>``, so the log never stores
one. Nothing of the call travels in clear: a holder of the NATS login who listens on
``_bzzz.<network>.fwd.>`` and ``_INBOX.>`` sees boxes, their sizes and the subjects. Every node
subscribes for the projects it serves (``*``: the whole ``fwd.*``) in ONE queue group
(:data:`QUEUE`): nats-server picks one member of a queue group across every matching
subscription, so a ``*`` node and a ``p2`` node share ``p2``'s calls and exactly one answers.

The landing node opens the request with :class:`ForwardGate`: the box opens under a key of the
network's keyring, the signature verifies, the signer is admitted to the network, the request
came with the reply subject it names (a captured request published again with another inbox
runs nowhere), its timestamp is within :data:`WINDOW` seconds of the landing node's clock, and
its id is claimed network-wide for the first time (``network/once.py``: every member of the
queue group refuses a copy, not only the one that saw it). Answers (:meth:`ForwardWire.answer_ok`,
:meth:`ForwardWire.answer_error`) carry a result or an error's code, message and details, signed
by the landing node for that request id and sealed likewise (bound to the request id); the
forwarding node checks that an admitted node signed it for this request (a holder of the NATS
login who joins the queue group answers nothing) and raises the error again
(:meth:`ForwardWire.result_of`) as the same BzzzError. A request that cannot be opened or is
signed by no admitted node gets a clear refusal naming only the reason (:func:`refusal`), which
the forwarding node takes as no answer and asks another member.

With encryption off (no keyring) the signed request and answer travel as JSON, as the log's
envelopes then do.
"""

from __future__ import annotations

import json
import logging
import time
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
from bzzz.network.once import UsedOnce
from bzzz.network.sealing import Keyring, SealError, is_sealed
from bzzz.principal import Principal, Scope
from bzzz.projects import subject_token

logger = logging.getLogger(__name__)

QUEUE = "bzzz-fwd"
# How far a request's timestamp may be from the landing node's clock (seconds, either way).
WINDOW = 30.0
# How long a used request id is kept network-wide: past both ends of its window.
ONCE_TTL = 2 * WINDOW + 5.0
MAX_REQUEST_BYTES = 1_048_576
# An answer past this is not read (the servers' max_payload is smaller by default).
MAX_ANSWER_BYTES = 8 * 1_048_576

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

    v: Literal[2] = 2
    # Also the key of the network-wide record of used ids: one legal KV key token.
    id: str = Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")
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
    # The only subject the answer may go to (the forwarding bus's ``new_inbox``).
    reply: str = Field(min_length=1, max_length=256)
    origin: str = Field(max_length=64)
    origin_key: str = Field(max_length=64)
    at: float


class Signed(_Wire):
    """A request and the forwarding node's signature of its canonical JSON."""

    body: ForwardRequest
    sig: str = Field(max_length=128)


def _json(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def canonical(body: ForwardRequest) -> bytes:
    """The bytes a signature covers: sorted, compact JSON of the request."""
    return _json(body.model_dump(mode="json"))


class ForwardRefused(PermissionDenied):
    """A forwarded request the landing node does not run (forged, unadmitted, stale, replayed).

    ``request`` is the request when it was opened and shown to come from an admitted node (its
    refusal is answered to it, sealed); None when not (a clear refusal naming the reason).
    """

    def __init__(self, reason: str, request: ForwardRequest | None = None) -> None:
        super().__init__(
            f"forwarded request refused: {reason}", details={"reason": reason, "forwarded": True}
        )
        self.reason = reason
        self.request = request


class BadAnswer(NetworkError):
    """An answer that no admitted node signed for this request: another member is asked."""


def refusal(reason: str) -> bytes:
    """The clear answer to a request that did not open or came from no admitted node: the
    reason alone, unsigned (the forwarding node takes it as no answer)."""
    return _json({"refused": reason[:64]})


class ForwardWire:
    """A node's forwarded calls on NATS: signed by the node, sealed under the network key."""

    def __init__(
        self,
        identity: NodeIdentity,
        network: str,
        admits: Callable[[str, str], bool],
        keyring: Keyring | None = None,
    ) -> None:
        self.identity = identity
        self.network = network
        self.admits = admits
        self._keyring = keyring

    # --- boxes ------------------------------------------------------------------------------

    def _request_aad(self) -> bytes:
        return f"bzzz.fwd.request|{self.network}".encode()

    def _answer_aad(self, request_id: str) -> bytes:
        return f"bzzz.fwd.answer|{self.network}|{request_id}".encode()

    def _seal(self, plain: bytes, aad: bytes) -> bytes:
        if self._keyring is None:
            return plain
        return self._keyring.seal(plain, aad).encode()

    def _open(self, data: bytes, aad: bytes) -> bytes:
        """The plain bytes of a box; SealError when it does not open (or is clear while this
        node seals: a forwarded call never travels in clear between sealing nodes)."""
        if self._keyring is None:
            return data
        try:
            box = data.decode("ascii")
        except UnicodeDecodeError:
            raise SealError("not_sealed") from None
        if not is_sealed(box):
            raise SealError("not_sealed")
        return self._keyring.open(box, aad)

    # --- requests ---------------------------------------------------------------------------

    def request(self, body: ForwardRequest) -> bytes:
        """The request as sent: its body and this node's signature of it, sealed."""
        signed = Signed(body=body, sig=self.identity.sign(canonical(body)))
        return self._seal(signed.model_dump_json().encode(), self._request_aad())

    def open_request(self, data: bytes) -> ForwardRequest:
        """The request, shown to be signed by an admitted node of this network (or refused)."""
        if len(data) > MAX_REQUEST_BYTES:
            raise ForwardRefused("too large")
        try:
            signed = Signed.model_validate_json(self._open(data, self._request_aad()))
        except SealError as exc:
            raise ForwardRefused(exc.reason) from None
        except ValidationError:
            raise ForwardRefused("malformed") from None
        body = signed.body
        if body.network != self.network:
            raise ForwardRefused("another network's request")
        try:
            origin, _ = origin_of(body.origin_key)
        except ValueError:
            raise ForwardRefused("bad origin key") from None
        if origin != body.origin or not verify_signature(
            body.origin_key, signed.sig, canonical(body)
        ):
            raise ForwardRefused("bad signature")
        if not self.admits(body.origin_key, body.origin):
            raise ForwardRefused(f"node {body.origin} is not admitted")
        return body

    # --- answers ----------------------------------------------------------------------------

    def _signed_answer(self, request_id: str, answer: dict[str, Any]) -> bytes:
        body = {
            "request": request_id,
            "node": self.identity.node_id,
            "key": self.identity.public_key_b64,
            **answer,
        }
        signed = _json({"body": body, "sig": self.identity.sign(_json(body))})
        return self._seal(signed, self._answer_aad(request_id))

    def answer_ok(self, request_id: str, result: dict[str, Any]) -> bytes:
        """The landing node's answer, signed and sealed: the call's result."""
        return self._signed_answer(request_id, {"ok": True, "result": result})

    def answer_error(self, request_id: str, error: BzzzError) -> bytes:
        """The landing node's answer, signed and sealed: the error the call raised."""
        shown = {"code": str(error.code), "message": error.message, "details": error.details}
        return self._signed_answer(request_id, {"ok": False, "error": shown})

    def _opened_answer(self, data: bytes, request_id: str) -> dict[str, Any]:
        """The answer's body once it is shown to come from an admitted node, for this request."""
        if len(data) > MAX_ANSWER_BYTES:
            raise BadAnswer("the serving node's answer was too large")
        try:
            signed = json.loads(self._open(data, self._answer_aad(request_id)))
            body, sig = signed["body"], str(signed["sig"])
            key, node = str(body["key"]), str(body["node"])
            origin, _ = origin_of(key)
        except SealError as exc:
            raise BadAnswer(f"the answer did not open ({_refused(data) or exc.reason})") from exc
        except (ValueError, KeyError, TypeError) as exc:
            raise BadAnswer("the serving node's answer was malformed") from exc
        if body.get("request") != request_id or origin != node:
            raise BadAnswer("the answer was not for this request")
        if not verify_signature(key, sig, _json(body)) or not self.admits(key, node):
            raise BadAnswer(f"the answer was not signed by an admitted node ({node[:64]})")
        return dict(body)

    def result_of(self, data: bytes, request_id: str) -> dict[str, Any]:
        """The result of an answer (signed by an admitted node, for ``request_id``), or the
        error it carries raised again as a BzzzError; BadAnswer when it is neither."""
        answer = self._opened_answer(data, request_id)
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


def _refused(data: bytes) -> str:
    """The reason a clear refusal names ("" when ``data`` is none)."""
    try:
        found = json.loads(data).get("refused")
    except (ValueError, AttributeError):
        return ""
    return f"refused: {found[:64]}" if isinstance(found, str) else ""


class ForwardGate:
    """Lets a forwarded request run once: opened by :class:`ForwardWire`, come with the reply
    subject it names, fresh, and its id claimed network-wide for the first time."""

    def __init__(
        self,
        wire: ForwardWire,
        used: UsedOnce,
        *,
        window: float = WINDOW,
        now: Callable[[], float] = time.time,
    ) -> None:
        self._wire = wire
        self._used = used
        self._window = window
        self._now = now

    async def open(self, data: bytes, reply: str) -> ForwardRequest:
        """The request, checked; ForwardRefused says why not."""
        body = self._wire.open_request(data)
        if reply != body.reply:
            raise ForwardRefused("answer asked on another subject", body)
        if abs(self._now() - body.at) > self._window:
            raise ForwardRefused("stale timestamp", body)
        try:
            first = await self._used.claim(body.id)
        except NetworkError as exc:
            logger.warning("forwarded request %s refused: %s", body.id, exc.message)
            raise ForwardRefused("the request id could not be recorded", body) from None
        if not first:
            raise ForwardRefused("replayed request id", body)
        return body


_CLASSES: dict[str, type[BzzzError]] = {
    ErrorCode.INVALID_PARAMETERS: InvalidParameters,
    ErrorCode.AGENT_NOT_FOUND: AgentNotFound,
    ErrorCode.THREAD_NOT_FOUND: ThreadNotFound,
    ErrorCode.PERMISSION_DENIED: PermissionDenied,
    ErrorCode.NETWORK_ERROR: NetworkError,
}
