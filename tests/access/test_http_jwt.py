"""A spawned node as an OAuth 2.1 resource server: JWTs of a test issuer started on loopback."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from e2e.support import HttpNode, node_env

from access.issuer import AUDIENCE, JwtIssuer

from .support import MODES, mcp_client, ok, refused

pytestmark = pytest.mark.integration

PING = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}


async def jwt_node(data_dir: Path, logs: Path, env: dict[str, str], issuer: JwtIssuer) -> HttpNode:
    node = HttpNode(
        data_dir,
        node_env(env, data_dir, BZZZ_AUTH_ISSUER=issuer.url, BZZZ_AUTH_AUDIENCE=AUDIENCE),
        logs,
    )
    await node.start()
    return node


@pytest.mark.parametrize("mode", MODES)
async def test_a_jwt_of_the_issuer_calls_with_the_grants_of_its_scopes(
    mode: str, data_dir: Path, tmp_path: Path, clean_env: dict[str, str], jwt_issuer: JwtIssuer
) -> None:
    node = await jwt_node(data_dir, tmp_path / "logs", clean_env, jwt_issuer)
    writer = jwt_issuer.mint("alice", scopes=["bzzz:write", "bzzz:project:p1"])
    reader = jwt_issuer.mint("bob", scopes=["bzzz:read", "bzzz:project:p1"])
    try:
        async with (
            mcp_client(node.mcp_url, mode, writer) as alice,
            mcp_client(node.mcp_url, mode, reader) as bob,
        ):
            made = await ok(alice, "bzzz_announce", {"agent_id": "alice-1", "role": "dev"})
            assert made["agent"]["project"] == "p1"
            await refused(
                alice,
                "bzzz_announce",
                {"agent_id": "x", "role": "dev", "project": "p2"},
                "PERMISSION_DENIED",
            )
            seen = await ok(bob, "bzzz_lookup", {"semantic_address": "bzzz://*"})
            assert [m["id"] for m in seen["matches"]] == ["alice-1"]
            await refused(
                bob, "bzzz_announce", {"agent_id": "b", "role": "dev"}, "PERMISSION_DENIED"
            )
    finally:
        await node.kill()


async def test_wrong_audience_expired_and_unknown_key_tokens_are_401(
    data_dir: Path, tmp_path: Path, clean_env: dict[str, str], jwt_issuer: JwtIssuer
) -> None:
    node = await jwt_node(data_dir, tmp_path / "logs", clean_env, jwt_issuer)
    scopes = ["bzzz:write", "bzzz:project:p1"]
    bad = {
        "wrong audience": jwt_issuer.mint("eve", scopes=scopes, aud="https://elsewhere/mcp"),
        "expired": jwt_issuer.mint("eve", scopes=scopes, exp=-600),
        "unknown key": jwt_issuer.mint("eve", scopes=scopes, kid="ghost"),
        "forged": jwt_issuer.unsigned("eve", scopes=scopes),
    }
    try:
        async with httpx.AsyncClient(timeout=10) as http:
            answers = {
                why: await http.post(
                    node.mcp_url, json=PING, headers={"Authorization": f"Bearer {token}"}
                )
                for why, token in bad.items()
            }
            metadata = await http.get(f"{node.base_url}/.well-known/oauth-protected-resource")
    finally:
        await node.kill()
    # At /mcp the ErrorResponse is the data of a JSON-RPC error (what MCP clients show).
    bodies = {why: answer.json()["error"]["data"] for why, answer in answers.items()}
    for why, answer in answers.items():
        assert answer.status_code == 401, why
        body = bodies[why]
        assert body["code"] == "PERMISSION_DENIED" and body["success"] is False, (why, body)
        assert "eve" not in answer.text and bad[why] not in answer.text
        assert 'error="invalid_token"' in answer.headers["www-authenticate"], why
    assert bodies["expired"]["details"]["reason"] == "expired"
    assert bodies["wrong audience"]["details"]["reason"] == "wrong audience"
    assert metadata.json()["authorization_servers"] == [jwt_issuer.url]
