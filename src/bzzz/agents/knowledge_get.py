"""``bzzz_get`` of a project's knowledge: ``bzzz://*@PROJECT/knowledge[/<fact_id>]``.

The reading itself is the knowledge service's (``bzzz.knowledge``); the node hands it to the
agent service as a :class:`KnowledgeReader`, so this package imports no other service.
"""

from __future__ import annotations

from typing import Any, Protocol

from bzzz import domain
from bzzz.address import Address
from bzzz.errors import InvalidParameters
from bzzz.eventlog import Caller
from bzzz.schemas import GetInput


class KnowledgeReader(Protocol):
    """Reads a project's facts for a caller (bzzz.knowledge.KnowledgeService.read_address)."""

    async def __call__(
        self, caller: Caller, project: str, path: str, params: GetInput
    ) -> dict[str, Any]:
        """The content of a knowledge address."""
        ...


def is_knowledge(address: Address) -> bool:
    """``bzzz://*@PROJECT/knowledge[/<fact_id>]``: a project's facts, no agent named."""
    path = address.path or ""
    return (
        address.agent is None
        and address.project is not None
        and address.network is None
        and (path.rstrip("/") == "/knowledge" or path.startswith("/knowledge/"))
    )


def no_search(params: GetInput) -> None:
    """INVALID_PARAMETERS: ``about``, ``q`` and ``limit`` read a project's knowledge only."""
    for name in ("about", "q", "limit"):
        if getattr(params, name) is not None:
            raise InvalidParameters(
                f"{name} reads a project's knowledge: bzzz://*@PROJECT/knowledge",
                details={"field": name, "address": params.address},
            )


async def knowledge_get(
    reader: KnowledgeReader, caller: Caller, address: Address, params: GetInput
) -> dict[str, Any]:
    """The answer of ``bzzz_get`` at a knowledge address (a search, or one fact's history)."""
    assert address.project is not None
    content = await reader(caller, address.project, address.path or "", params)
    result: dict[str, Any] = {
        "success": True,
        "address": params.address,
        "content": content,
        "retrieved_at": domain.iso(domain.utcnow()),
    }
    if params.include_metadata:
        result["metadata"] = {
            "last_updated": content.get("last_updated"),
            "content_type": "fact" if "fact" in content else "knowledge",
            "version": "1.0",
        }
    return result
