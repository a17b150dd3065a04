"""Answering pages over HTTP: acknowledge with a credential, or from a signed link.

``POST /api/v1/escalations/{id}/ack`` acknowledges as the caller (the console, the CLI);
``POST /api/v1/signed/escalations/{id}/{ack|resolve}?step=&by=&exp=&sig=`` is the link a paged
person received: it needs no credential (``/api/v1/signed/`` is open), the signature decides.
Both call ``EscalationAnswers``; the audit middleware records them as every change.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from starlette.requests import Request

from bzzz.api import answers as a
from bzzz.api.handlers import API, Operation, body_of, caller_of, query_of
from bzzz.conversations.pagelinks import SIGNED_PREFIX
from bzzz.node.core import Node


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class AckBody(_Model):
    """POST /api/v1/escalations/{id}/ack."""

    as_name: str | None = Field(
        None, alias="as", max_length=128, description="answer for this person (project admins)"
    )
    via: Literal["console", "cli", "api"] = "api"


class LinkQuery(_Model):
    """A signed link's query: who it was sent to, until when, and its signature."""

    step: int = Field(ge=0, lt=64)
    by: str = Field(min_length=1, max_length=128)
    exp: int = Field(ge=0)
    sig: str = Field(min_length=1, max_length=128)
    reason: str | None = Field(None, min_length=1, max_length=2000)


class LinkBody(_Model):
    """An optional body of a resolve link: what was decided."""

    reason: str | None = Field(None, min_length=1, max_length=2000)


class AckAnswer(a.Answer):
    """An acknowledgement (or a resolution) recorded."""

    escalation_id: str
    ack: dict[str, Any] | None = None
    resolved_by: str | None = None
    thread: dict[str, Any] | None = None


def operations(node: Node) -> list[Operation]:
    """The ack route and the signed links."""

    async def ack_escalation(request: Request) -> dict[str, Any]:
        body = await body_of(request, AckBody)
        escalation_id = request.path_params["escalation_id"]
        return await node.answers.ack(
            caller_of(request), escalation_id, as_name=body.as_name, via=body.via
        )

    async def signed_link(request: Request) -> dict[str, Any]:
        query = query_of(request, LinkQuery)
        body = await body_of(request, LinkBody)
        fields = query.model_dump(exclude={"reason"})
        return await node.answers.by_link(
            request.path_params["escalation_id"],
            request.path_params["action"],
            {k: str(v) for k, v in fields.items()},
            reason=body.reason or query.reason,
        )

    return [
        Operation("POST", f"{API}/escalations/{{escalation_id}}/ack",
                  "Acknowledge an escalation (its paging stops)", ack_escalation,
                  "escalations", answer=AckAnswer, body=AckBody, errors=(400, 403, 404, 503)),
        Operation("POST", f"{SIGNED_PREFIX}/{{escalation_id}}/{{action}}",
                  "Acknowledge or resolve from a signed link (no credential)", signed_link,
                  "escalations", answer=AckAnswer, query=LinkQuery, body=LinkBody,
                  errors=(400, 403, 404, 503)),
    ]  # fmt: skip
