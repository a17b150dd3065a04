"""A holder of the NATS login cannot change who may do what: forged changes are dropped.

The forger connects with raw nats-py and the very login the node uses, holds the network's
data key too, and signs with a key it just made. Whatever ``bzzz.admission`` says, its
``token.*``, ``node.*``, ``keys.*``, retention and erasure envelopes are dropped, counted
(``bzzz_envelopes_rejected_total{reason="not_admitted"}``), audited (``log:dropped``), and
change nothing: the token it minted is refused (401) and missing from `bzzz token list`.
Admission is on by default, so even its ordinary envelopes (an agent announced) are dropped
unless ``bzzz.admission`` is turned off.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import nats
import pytest
from sqlalchemy import select

from bzzz import domain
from bzzz.access.tokens import mint_secret, secret_hash
from bzzz.api.app import build_app
from bzzz.audit import reading
from bzzz.config import load_settings
from bzzz.eventlog import Caller
from bzzz.mcp.server import build_server
from bzzz.network import subjects
from bzzz.network.envelope import Envelope, seal
from bzzz.network.identity import NodeIdentity
from bzzz.network.sealing import NetworkKey, key_payload, new_secret
from bzzz.node.core import Node
from bzzz.principal import LOCAL, Scope
from bzzz.projects import NO_PROJECT
from bzzz.schemas import AnnounceInput, PostInput
from bzzz.store.models import AppliedEnvelope, Base

pytestmark = pytest.mark.integration

_WAIT = 10.0
# What drops write (the drop's audit record, the envelope's place in the log) or what runs on
# its own clock; every other table must be as it was.
_CHANGING = {"applied_envelopes", "audit_records", "audit_heads"}


@pytest.fixture(params=["default", "admission off"])
async def node(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Node]:
    """The first node of a network on its embedded server: by default, and with admission off."""
    environ = {} if request.param == "default" else {"BZZZ_BZZZ__ADMISSION": "false"}
    settings = load_settings(environ=environ, overrides={"node": {"data_dir": str(tmp_path / "a")}})
    async with Node(settings) as running:
        yield running


async def _network_state(node: Node) -> dict[str, list[Any]]:
    tables: dict[str, list[Any]] = {}
    async with node.db.session() as session:
        for table in Base.metadata.sorted_tables:
            if table.name not in _CHANGING:
                rows = await session.execute(select(table).order_by(*table.primary_key.columns))
                tables[table.name] = [tuple(row) for row in rows]
    return tables


def _forgeries(node: Node, forger: NodeIdentity, secret: str, real_token: str) -> list[Envelope]:
    """One forged change of each kind that decides who may do what."""
    net = node.network
    victim = node.identity

    def forged(type_: str, kind: str, key: str, payload: dict[str, Any]) -> Envelope:
        subject = f"bzzz.{net}.{kind}.{key}"
        return seal(forger, net, type_, subject, payload, keyring=node.keyring)

    cutoff = (domain.utcnow() + timedelta(days=1)).isoformat()
    new_key = NetworkKey.of(new_secret())
    return [
        forged(
            "token.created",
            "token",
            "tok-forged",
            {
                "token_id": "tok-forged",
                "name": "backdoor",
                "secret_hash": secret_hash(secret),
                "projects": ["*"],
                "roles": ["*"],
                "scope": "admin",
                "created_by": "nobody",
                "expires_at": None,
            },
        ),
        forged("token.revoked", "token", real_token, {"token_id": real_token, "revoked_by": "x"}),
        forged("keys.added", "keys", new_key.id, key_payload(new_key)),
        forged("node.admitted", "admission", forger.node_id, {"public_key": forger.public_key_b64}),
        forged("node.removed", "admission", victim.node_id, {"node": victim.node_id}),
        forged(
            "node.lost",
            "node",
            victim.node_id,
            {"node_id": victim.node_id, "detected_at": cutoff, "last_seen": None},
        ),
        forged(
            "retention.applied",
            "retention",
            "run-forged",
            {
                "run_id": "run-forged",
                "principal": "nobody",
                "cutoffs": {"messages": cutoff, "events": cutoff, "memory": cutoff, "audit": None},
                "restated": 0,
                "purges": [],
            },
        ),
        # Stand-ins for purged places, which a replaying node would apply in their stead.
        forged(
            "retention.restated",
            "tomb",
            "run-forged-0",
            {"run_id": "run-forged", "entries": [{"seq": 1, "envelope": {"id": "x"}}]},
        ),
        forged(
            "retention.forget",
            "retention",
            "run-forget",
            {"run_id": "run-forget", "principal": "nobody", "agent_id": "alice"},
        ),
    ]


async def _publish(node: Node, envelopes: list[Envelope]) -> None:
    """Publish as the forger: raw nats-py, with the login of the node's own server."""
    assert node.embedded is not None
    nc = await nats.connect(node.embedded.client_url)
    try:
        js = nc.jetstream()
        last = 0
        for env in envelopes:
            ack = await js.publish(env.subject, env.to_bytes(), headers={"Nats-Msg-Id": env.id})
            last = ack.seq
    finally:
        await nc.close()
    await node.projector.wait_for_sequence(last, _WAIT)


async def _get(node: Node, path: str, token: str) -> httpx.Response:
    server, _ = build_server(node)
    app = build_app(node, server, "127.0.0.1")
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
        return await http.get(path, headers={"Authorization": f"Bearer {token}"})


def _token_list(node: Node) -> list[dict[str, Any]]:
    env = {"BZZZ_DATA_DIR": str(node.settings.node.data_dir), "PATH": "/usr/bin:/bin"}
    if not node.settings.bzzz.admission:
        env["BZZZ_BZZZ__ADMISSION"] = "false"
    done = subprocess.run(
        [sys.executable, "-m", "bzzz.cli", "token", "list", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    tokens: list[dict[str, Any]] = json.loads(done.stdout)["tokens"]
    return tokens


async def test_forged_changes_from_an_unadmitted_key_are_dropped_counted_audited_and_change_nothing(
    node: Node,
) -> None:
    alice = Caller("s-alice")
    await node.agents.announce(alice, AnnounceInput(agent_id="alice", role="dev"))
    await node.conversations.post(
        alice,
        PostInput(target_address="bzzz://alice", message_type="text", content={"text": "kept"}),
    )
    real, real_secret = await node.access.create_token(
        LOCAL, "team", ["p1"], ["*"], Scope.WRITE, None
    )
    keys_before = [k.id for k in node.keyring.all_keys()] if node.keyring else []
    members_before = dict(node.projector.admission.members)
    before = await _network_state(node)

    forger, secret = NodeIdentity.generate(), mint_secret()
    forgeries = _forgeries(node, forger, secret, real.id)
    await _publish(node, forgeries)

    # Dropped and counted, one by one.
    assert node.projector.rejected["not_admitted"] == len(forgeries)
    async with node.db.session() as session:
        applied = await session.scalars(
            select(AppliedEnvelope.id).where(AppliedEnvelope.origin == forger.node_id)
        )
        assert list(applied) == []
    metrics = (await _get(node, "/metrics", real_secret)).text
    assert f'bzzz_envelopes_rejected_total{{reason="not_admitted"}} {len(forgeries)}' in metrics

    # Audited: one record per dropped envelope, naming it, its type and the key's node.
    await node.audit.flush()
    records = [r for r in await reading.records(node.db) if r.action.startswith("log:dropped")]
    assert sorted(r.action for r in records) == sorted(f"log:dropped {e.type}" for e in forgeries)
    assert {r.target for r in records} == {e.id for e in forgeries}
    assert {(r.principal, r.outcome) for r in records} == {
        (f"node:{forger.node_id}", "NOT_ADMITTED")
    }

    # Nothing moved: no key learnt, nobody admitted or removed, alice online, her post kept.
    assert ([k.id for k in node.keyring.all_keys()] if node.keyring else []) == keys_before
    assert node.projector.admission.members == members_before
    assert await _network_state(node) == before

    # The forged token is refused; the real one (its forged revocation dropped) still works.
    refused = await _get(node, "/api/v1/agents", secret)
    assert refused.status_code == 401
    assert (await _get(node, "/api/v1/agents", real_secret)).status_code == 200
    # The CLI replays the log on its own store (a process of the same data directory,
    # admitted by its key) and drops the forgeries as well.
    listed = await asyncio.to_thread(_token_list, node)
    assert [(t["id"], t["status"]) for t in listed] == [(real.id, "active")]


@pytest.mark.parametrize(
    ("environ", "applied"),
    [({}, False), ({"BZZZ_BZZZ__ADMISSION": "false"}, True)],
    ids=["default", "admission off"],
)
async def test_by_default_an_ordinary_envelope_from_an_unadmitted_key_is_dropped_too(
    environ: dict[str, str], applied: bool, tmp_path: Path
) -> None:
    # No admission setting at all in "default": what a node does out of the box.
    settings = load_settings(environ=environ, overrides={"node": {"data_dir": str(tmp_path)}})
    async with Node(settings) as node:
        forger = NodeIdentity.generate()
        payload = AnnounceInput(agent_id="mallory", role="dev").model_dump() | {
            "session_id": "s-mallory",
            "metadata": {},
        }
        subject = subjects.subject(node.network, "agent", "mallory", NO_PROJECT)
        announced = seal(
            forger, node.network, "agent.announced", subject, payload, keyring=node.keyring
        )
        await _publish(node, [announced])

        async with node.db.session() as session:
            stored = await session.scalars(
                select(AppliedEnvelope.id).where(AppliedEnvelope.origin == forger.node_id)
            )
            applied_ids = list(stored)
        mallory = node.projector.directory.get("mallory")
        rejected = node.projector.rejected["not_admitted"]

    if applied:
        assert (applied_ids, rejected) == ([announced.id], 0)
        assert mallory is not None and mallory.online
    else:
        assert (applied_ids, rejected) == ([], 1)
        assert mallory is None
