"""``bzzz_post`` of a fact: ``message_type: "fact"`` to ``bzzz://*@PROJECT/knowledge``.

The fact itself is the knowledge service's (``bzzz.knowledge``); the node hands it to the
conversation service as a :class:`FactPoster`, so this package imports no other service.
"""

from __future__ import annotations

from typing import Any, Protocol

from bzzz.address import Address
from bzzz.errors import InvalidParameters
from bzzz.eventlog import Caller
from bzzz.schemas import PostInput

FACT = "fact"


class FactPoster(Protocol):
    """States a posted fact (bzzz.knowledge.KnowledgeService.post_fact)."""

    async def __call__(
        self, caller: Caller, project: str, sender: str, content: dict[str, Any], message_id: str
    ) -> dict[str, Any]:
        """The post's answer, with the stored fact."""
        ...


def is_knowledge_post(address: Address | None) -> bool:
    """A post to ``bzzz://*@PROJECT/knowledge``."""
    return (
        address is not None
        and address.agent is None
        and address.project is not None
        and (address.path or "").rstrip("/") == "/knowledge"
    )


async def post_fact(
    poster: FactPoster,
    caller: Caller,
    params: PostInput,
    address: Address,
    sender: str,
    message_id: str,
) -> dict[str, Any]:
    """Check the post's form and state its fact."""
    assert address.project is not None
    if params.message_type != FACT:
        raise InvalidParameters(
            f"bzzz://*@{address.project}/knowledge takes message_type 'fact' (content: "
            "subject, relation, object[, statement, confidence])",
            details={"field": "message_type"},
        )
    for name in ("thread_id", "reply_to", "stance"):
        if getattr(params, name) is not None:
            raise InvalidParameters(
                f"a fact is posted to the project's knowledge, without {name}",
                details={"field": name},
            )
    return await poster(caller, address.project, sender, params.content, message_id)
