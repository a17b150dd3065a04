"""Changes the CLI makes on a new data directory before its first node ever ran.

`bzzz token create` and `bzzz node admit` work without a node: they store one envelope with the
data directory's key. On a new directory the network has no admitted node yet; the command
admits the directory's key first (as the node would at its start), so its change is applied
once the node runs. A change another key stored before then is still dropped.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from bzzz.access.tokens import mint_secret, secret_hash
from bzzz.api.app import build_app
from bzzz.config import Settings, load_settings
from bzzz.mcp.server import build_server
from bzzz.network.envelope import seal
from bzzz.network.identity import NodeIdentity
from bzzz.network.join import joined_bus
from bzzz.node.core import Node

pytestmark = pytest.mark.integration


def _settings(data_dir: Path) -> Settings:
    return load_settings(environ={}, overrides={"node": {"data_dir": str(data_dir)}})


def _bzzz(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`bzzz …` on the data directory, as its user runs it (no node running there)."""
    return subprocess.run(
        [sys.executable, "-m", "bzzz.cli", *args],
        env={"BZZZ_DATA_DIR": str(data_dir), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


async def _store_foreign_token(settings: Settings, forger: NodeIdentity, secret: str) -> None:
    """As a holder of the NATS login, before any node ran: a token signed with its own key."""
    network = settings.bzzz.network_id
    payload = {
        "token_id": "tok-foreign",
        "name": "backdoor",
        "secret_hash": secret_hash(secret),
        "projects": ["*"],
        "roles": ["*"],
        "scope": "admin",
        "created_by": "nobody",
        "expires_at": None,
    }
    env = seal(forger, network, "token.created", f"bzzz.{network}.token.tok-foreign", payload)
    async with joined_bus(settings) as bus:  # the data directory's embedded server, started
        ack = await bus.client.jetstream().publish(
            env.subject, env.to_bytes(), headers={"Nats-Msg-Id": env.id}
        )
    assert ack.seq == 1  # the first envelope of the network's log


async def _get(node: Node, path: str, token: str) -> httpx.Response:
    server, _ = build_server(node)
    transport = httpx.ASGITransport(app=build_app(node, server, "127.0.0.1"))
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
        return await http.get(path, headers={"Authorization": f"Bearer {token}"})


async def test_a_token_made_before_the_first_node_ran_is_accepted_and_a_foreign_one_is_not(
    data_dir: Path,
) -> None:
    settings = _settings(data_dir)
    settings.auth.required = True
    foreign_secret = mint_secret()
    await _store_foreign_token(settings, NodeIdentity.generate(), foreign_secret)

    created = _bzzz(data_dir, "token", "create", "early", "--project", "*", "--json")
    assert created.returncode == 0, created.stderr
    early: dict[str, Any] = json.loads(created.stdout.strip().splitlines()[-1])

    async with Node(settings) as node:
        # The directory's key admitted itself before its token, as the node would have.
        assert node.projector.admission.is_member(node.identity.public_key_b64, node.node_id)
        accepted = await _get(node, "/api/v1/agents", early["token"])
        refused = await _get(node, "/api/v1/agents", foreign_secret)
        assert node.projector.rejected["not_admitted"] >= 1  # the foreign token, dropped
    assert accepted.status_code == 200, accepted.text
    assert refused.status_code == 401


async def test_a_node_admitted_before_the_first_node_ran_is_admitted_once_it_runs(
    data_dir: Path,
) -> None:
    newcomer = NodeIdentity.generate()
    done = _bzzz(data_dir, "node", "admit", newcomer.public_key_b64)
    assert done.returncode == 0, done.stderr

    async with Node(_settings(data_dir)) as node:
        admitted = node.projector.admission
        assert admitted.is_member(newcomer.public_key_b64, newcomer.node_id)
        assert admitted.is_member(node.identity.public_key_b64, node.node_id)
        assert set(admitted.members.values()) == {node.node_id, newcomer.node_id}
