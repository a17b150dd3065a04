"""When a spawned loopback node asks for credentials: as soon as any exists, on every route.

A loopback node with no credential is open (its callers are the machine's users); the first
network token, made by `bzzz token create` while the node runs, reaches it over the log and
from then on a caller without a credential is refused with 401 and the RFC 9728 challenge. An
OAuth issuer is a credential too: a node configured with one alone is never open. stdio and
the CLI are not HTTP callers: they stay the machine's user, credentials or not.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import pytest
from e2e.support import TEST_NETWORK_KEY_B64, HttpNode, call, eventually, node_env, stdio_session

from access.issuer import AUDIENCE, JwtIssuer

from .support import bzzz_cli, cli_env, create_token

pytestmark = pytest.mark.integration

# Every face of the HTTP API: MCP, REST, WHOOSH, the event stream, the console's routes, the
# dashboard's data, the webhook list.
GUARDED = [
    ("POST", "/mcp"),
    ("GET", "/api/v1/agents"),
    ("GET", "/api/v1/content?address=bzzz://p1-dev/tasks"),
    ("GET", "/agents/p1-dev/status"),
    ("GET", "/api/v1/events"),
    ("GET", "/api/v1/whoami"),
    ("GET", "/api/v1/overview/threads"),
    ("GET", "/webhooks"),
]
# The legacy handshake's opening request: served without a credential on an open node.
OPENING = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "probe", "version": "0"},
    },
}


async def spawn(data_dir: Path, logs: Path, env: dict[str, str], **extra: str) -> HttpNode:
    node = HttpNode(data_dir, node_env(env, data_dir, **extra), logs)
    await node.start(within=60)
    return node


async def ask(http: httpx.AsyncClient, method: str, path: str, **kwargs: object) -> httpx.Response:
    """One request; the event stream is only opened (its head is the answer)."""
    headers = {"Accept": "application/json, text/event-stream"} | dict(
        kwargs.pop("headers", {})  # type: ignore[call-overload]
    )
    body = OPENING if method == "POST" else None
    request = http.build_request(method, path, json=body, headers=headers)
    response = await http.send(request, stream=True)
    await response.aclose()
    return response


async def test_a_token_made_while_the_node_runs_ends_the_anonymous_admin_on_every_route(
    data_dir: Path, tmp_path: Path, clean_env: dict[str, str]
) -> None:
    node = await spawn(data_dir, tmp_path / "logs", clean_env)
    # The CLI's tool node reads the network's sealed content: it holds the network key.
    env = cli_env(clean_env, data_dir) | {"BZZZ_NETWORK_KEY": TEST_NETWORK_KEY_B64}
    try:
        async with httpx.AsyncClient(base_url=node.base_url, timeout=10) as http:
            made = await http.post("/api/v1/agents", json={"agent_id": "p1-dev", "role": "dev"})
            assert made.status_code == 201, made.text
            # No credential anywhere yet: the loopback node is open.
            before = {path: (await ask(http, m, path)).status_code for m, path in GUARDED}
            token = create_token(env, "team", "--project", "p1")["token"]

            async def refused() -> int:
                return (await ask(http, "GET", "/api/v1/agents")).status_code

            await eventually(refused, lambda status: status == 401, within=10)
            after = {path: await ask(http, m, path) for m, path in GUARDED}
            bearer = {"Authorization": f"Bearer {token}"}
            with_token = await ask(http, "GET", "/api/v1/agents", headers=bearer)
            twice = await http.get(
                "/api/v1/agents",
                headers=[("Authorization", f"Bearer {token}"), ("Authorization", "Bearer x")],
            )
            health = await http.get("/healthz")
            metrics = await http.get("/metrics")
    finally:
        await node.kill()
    assert all(status < 400 for status in before.values()), before
    for path, answer in after.items():
        assert answer.status_code == 401, path
        challenge = answer.headers["www-authenticate"]
        assert challenge.startswith('Bearer resource_metadata="http://127.0.0.1:'), path
    assert with_token.status_code == 200
    assert twice.status_code == 400
    assert twice.json()["code"] == "INVALID_PARAMETERS"
    assert health.status_code == 200
    # auth.metrics_public's default: on loopback only, credentials or not.
    assert metrics.status_code == 200 and "bzzz_" in metrics.text


async def test_metrics_need_a_credential_when_metrics_public_is_off(
    data_dir: Path, tmp_path: Path, clean_env: dict[str, str]
) -> None:
    admin = "admin-secret-for-tests-only"
    node = await spawn(
        data_dir,
        tmp_path / "logs",
        clean_env,
        BZZZ_AUTH_TOKENS=admin,
        BZZZ_AUTH__METRICS_PUBLIC="false",
    )
    try:
        async with httpx.AsyncClient(base_url=node.base_url, timeout=10) as http:
            without = await http.get("/metrics")
            with_admin = await http.get("/metrics", headers={"Authorization": f"Bearer {admin}"})
    finally:
        await node.kill()
    assert without.status_code == 401
    assert with_admin.status_code == 200


def challenged(answer: httpx.Response) -> bool:
    """A 401 with the RFC 9728 challenge naming this node's resource metadata."""
    challenge = answer.headers.get("www-authenticate", "")
    return answer.status_code == 401 and challenge.startswith(
        'Bearer resource_metadata="http://127.0.0.1:'
    )


async def test_stdio_and_the_cli_stay_the_local_user_once_a_token_exists(
    data_dir: Path, tmp_path: Path, clean_env: dict[str, str]
) -> None:
    node = await spawn(data_dir, tmp_path / "logs", clean_env)
    env = cli_env(clean_env, data_dir) | {"BZZZ_NETWORK_KEY": TEST_NETWORK_KEY_B64}
    try:
        async with httpx.AsyncClient(base_url=node.base_url, timeout=10) as http:
            made = await asyncio.to_thread(create_token, env, "team", "--project", "p1")
            token = made["token"]
            await eventually(lambda: http.get("/api/v1/agents"), challenged, within=10)

            # A second process of the data directory, over stdio, with no credential at all.
            with (tmp_path / "stdio.err").open("w") as errlog:
                async with stdio_session(node.env, errlog) as stdio:
                    announced = await call(
                        stdio,
                        "bzzz_announce",
                        {"agent_id": "p1-dev", "role": "dev", "project": "p1"},
                    )
                    posted = await call(
                        stdio,
                        "bzzz_post",
                        {
                            "target_address": "bzzz://p1-dev",
                            "message_type": "text",
                            "content": {"text": "over stdio"},
                        },
                    )
            listed = await asyncio.to_thread(bzzz_cli, env, "token", "list", "--json")

            without = {
                m: await ask(http, m, path)
                for m, path in [("GET", "/api/v1/agents"), ("POST", "/mcp")]
            }
            # The same network: the token's holder sees the agent stdio announced.
            bearer = {"Authorization": f"Bearer {token}"}
            await eventually(
                lambda: http.get("/api/v1/agents/p1-dev", headers=bearer),
                lambda answer: answer.status_code == 200,
                within=10,
            )
    finally:
        await node.kill()
    assert announced["agent"]["id"] == "p1-dev"
    assert posted["delivery_results"]["recipients"] == ["p1-dev"]
    assert listed.returncode == 0, listed.stderr
    assert [t["name"] for t in json.loads(listed.stdout)["tokens"]] == ["team"]
    for method, answer in without.items():
        assert challenged(answer), (method, answer.status_code, answer.headers)


async def test_a_node_whose_only_credential_is_an_issuer_refuses_a_caller_without_one(
    data_dir: Path, tmp_path: Path, clean_env: dict[str, str], jwt_issuer: JwtIssuer
) -> None:
    # Loopback, no admin token, no network token: the issuer alone makes callers prove who they are.
    node = await spawn(
        data_dir,
        tmp_path / "logs",
        clean_env,
        BZZZ_AUTH_ISSUER=jwt_issuer.url,
        BZZZ_AUTH_AUDIENCE=AUDIENCE,
    )
    writer = jwt_issuer.mint("alice", scopes=["bzzz:write", "bzzz:project:p1"])
    try:
        async with httpx.AsyncClient(base_url=node.base_url, timeout=10) as http:
            without = {path: await ask(http, m, path) for m, path in GUARDED}
            with_jwt = await http.get(
                "/api/v1/agents", headers={"Authorization": f"Bearer {writer}"}
            )
    finally:
        await node.kill()
    for path, answer in without.items():
        assert challenged(answer), (path, answer.status_code, answer.headers)
    assert with_jwt.status_code == 200
