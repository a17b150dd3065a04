"""Clients of spawned nodes: the stateless default MCP client and the legacy handshake,
each with or without a bearer token, and the `bzzz token` CLI."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx2
from e2e.support import CALL_TIMEOUT, bzzz_executable
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

MODES = ["stateless", "legacy"]


@contextlib.asynccontextmanager
async def mcp_client(url: str, mode: str, token: str | None = None) -> AsyncIterator[Client]:
    """An MCP client of ``url``: the SDK's default (2026-07-28, sessionless) or legacy."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    http = httpx2.AsyncClient(headers=headers, timeout=CALL_TIMEOUT)
    transport = streamable_http_client(url, http_client=http)
    async with http, Client(transport, mode="legacy" if mode == "legacy" else "auto") as client:
        yield client


async def tool(client: Client, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """A tool's structured answer, success or ErrorResponse."""
    async with asyncio.timeout(CALL_TIMEOUT):
        result = await client.call_tool(name, arguments)
    assert result.structured_content is not None, result
    body = dict(result.structured_content)
    assert body.get("success") is (not result.is_error), body
    return body


async def ok(client: Client, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """A tool call that must succeed."""
    body = await tool(client, name, arguments)
    assert body["success"] is True, body
    return body


async def refused(client: Client, name: str, arguments: dict[str, Any], code: str) -> str:
    """A tool call that must fail with ``code``; its message."""
    body = await tool(client, name, arguments)
    assert body["success"] is False and body["code"] == code, body
    return str(body["error"])


def bzzz_cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """Run `bzzz …` to completion (bounded)."""
    return subprocess.run(
        [bzzz_executable(), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def create_token(env: dict[str, str], name: str, *args: str) -> dict[str, Any]:
    """`bzzz token create NAME … --json`: the new token with its secret."""
    done = bzzz_cli(env, "token", "create", name, *args, "--json")
    assert done.returncode == 0, done.stderr
    created: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return created


def cli_env(base: dict[str, str], data_dir: Path) -> dict[str, str]:
    """The environment of a CLI command on a node's data directory."""
    env = {k: v for k, v in base.items() if not k.startswith("BZZZ_")}
    env["BZZZ_DATA_DIR"] = str(data_dir)
    env.setdefault("PATH", os.environ.get("PATH", ""))
    return env
