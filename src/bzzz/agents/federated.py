"""Agents of a federated network as this node shows them: what that network announced."""

from __future__ import annotations

from typing import Any

from bzzz import domain
from bzzz.address import Address
from bzzz.agents.views import agent_info
from bzzz.domain import iso
from bzzz.errors import AgentNotFound, InvalidParameters
from bzzz.federation.service import FederationService
from bzzz.schemas import GetInput


def federated_info(agent: domain.Agent, network: str) -> dict[str, Any]:
    """Another network's agent: its address says where it lives, for bzzz_post."""
    remote = agent_info(agent)
    remote["address"] = f"{remote['address']}?network={network}"
    return remote


def federated_get(
    federation: FederationService, params: GetInput, address: Address
) -> dict[str, Any]:
    """bzzz_get of an agent of a federated network: what that network announced, no more."""
    assert address.network is not None
    directory = federation.directory(address.network)
    if address.path is not None or address.agent is None:
        raise InvalidParameters(
            "on another network only an agent itself can be read (no path, no wildcard); "
            "its inbox, tasks and threads stay with that network",
            details={"address": params.address},
        )
    agent = directory.get(address.agent)
    if agent is None:
        raise AgentNotFound(
            f"no agent '{address.agent}' on network '{address.network}'",
            details={"agent_id": address.agent, "network": address.network},
        )
    info = federated_info(agent, address.network) | {"network": address.network}
    content = {"agent_info": info, "last_updated": info["last_activity"]}
    result: dict[str, Any] = {
        "success": True,
        "address": params.address,
        "content": content | {"network": address.network},
        "retrieved_at": iso(domain.utcnow()),
    }
    if params.include_metadata:
        result["metadata"] = {
            "last_updated": content["last_updated"],
            "content_type": "agent_data",
            "version": "1.0",
        }
    return result
