"""The `bzzz` process as a user runs it: signals, stdio hygiene, settings."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from .support import (
    START_TIMEOUT,
    STOP_TIMEOUT,
    HttpNode,
    alive,
    bzzz_executable,
    call,
    http_session,
    nats_servers_of,
    node_env,
    wait_until,
)

pytestmark = pytest.mark.integration

# A clean stop takes a few seconds (an open MCP stream is given up to 3 s to finish); a hung one
# is a failure, not something to wait out.
SIGNAL_STOP_TIMEOUT = STOP_TIMEOUT


def _rpc(request_id: int, method: str, params: dict[str, Any]) -> bytes:
    message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
    return json.dumps(message).encode() + b"\n"


INITIALIZE = _rpc(
    1,
    "initialize",
    {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "e2e", "version": "1"},
    },
)


def _is_json_rpc(line: bytes) -> bool:
    try:
        message = json.loads(line)
    except ValueError:
        return False
    return isinstance(message, dict) and message.get("jsonrpc") == "2.0"


async def _spawn_stdio(env: dict[str, str], stderr: Path) -> asyncio.subprocess.Process:
    stderr.parent.mkdir(parents=True, exist_ok=True)
    with stderr.open("wb") as err:
        return await asyncio.create_subprocess_exec(
            bzzz_executable(real=True),
            "serve",
            "--stdio",
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=err,
            env=env,
        )


async def _reap(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is None:
        proc.kill()
        await proc.wait()


def _assert_stopped_in_order(data_dir: Path) -> None:
    """The embedded server was stopped with SIGTERM (JetStream shut down), not killed."""
    assert nats_servers_of(data_dir) == []
    log = (data_dir / "nats" / "nats.log").read_text(errors="replace")
    assert "Server Exiting" in log, log[-2000:]


async def _http_stops(data_dir: Path, logs: Path, env: dict[str, str], sig: int) -> None:
    node = HttpNode(data_dir, env, logs, real=True)
    try:
        await node.start(new_session=True)
        async with http_session(node.mcp_url) as session:
            await call(session, "bzzz_announce", {"agent_id": "worker-1", "role": "worker"})
            servers = nats_servers_of(data_dir)
            assert len(servers) == 1, servers
            # Ctrl-C in a terminal signals the whole foreground process group.
            node.send(signal.Signals(sig), group=sig == signal.SIGINT)
            code = await node.wait_exit(SIGNAL_STOP_TIMEOUT)
            async with asyncio.timeout(STOP_TIMEOUT):
                await wait_until(lambda: not alive(servers[0]))
        assert code == 0, f"exit status {code}:\n{node.stderr_tail()}"
        _assert_stopped_in_order(data_dir)
    finally:
        await node.kill()


async def _stdio_stops(data_dir: Path, logs: Path, env: dict[str, str], sig: int) -> None:
    proc = await _spawn_stdio(env, logs / "stdio.err")
    assert proc.stdin is not None and proc.stdout is not None
    try:
        async with asyncio.timeout(START_TIMEOUT):
            proc.stdin.write(INITIALIZE)
            await proc.stdin.drain()
            assert json.loads(await proc.stdout.readline())["id"] == 1
        servers = nats_servers_of(data_dir)
        assert len(servers) == 1, servers
        # The client still holds stdin open: only the signal may stop the node.
        proc.send_signal(sig)
        async with asyncio.timeout(SIGNAL_STOP_TIMEOUT):
            code = await proc.wait()
        async with asyncio.timeout(STOP_TIMEOUT):
            await wait_until(lambda: not alive(servers[0]))
        assert code == 0, (logs / "stdio.err").read_text(errors="replace")[-3000:]
        _assert_stopped_in_order(data_dir)
    finally:
        await _reap(proc)


@pytest.mark.parametrize(
    ("transport", "sig"),
    [
        pytest.param("http", signal.SIGTERM, id="http-SIGTERM"),
        pytest.param("http", signal.SIGINT, id="http-SIGINT"),
        pytest.param("stdio", signal.SIGTERM, id="stdio-SIGTERM"),
    ],
)
async def test_serve_stops_cleanly_on_a_signal(
    transport: str,
    sig: signal.Signals,
    data_dir: Path,
    tmp_path: Path,
    clean_env: dict[str, str],
) -> None:
    """SIGTERM or Ctrl-C: exit status 0, the embedded nats-server stopped in order, no orphan."""
    env = node_env(clean_env, data_dir)
    stops = _http_stops if transport == "http" else _stdio_stops
    await stops(data_dir, tmp_path / "logs", env, sig)


async def test_stdio_writes_only_json_rpc_and_exits_when_stdin_closes(
    data_dir: Path, tmp_path: Path, clean_env: dict[str, str]
) -> None:
    """Every stdout line is JSON-RPC, even with debug logging; EOF on stdin ends the node."""
    env = node_env(clean_env, data_dir, BZZZ_LOG_LEVEL="DEBUG")
    requests = [
        INITIALIZE,
        json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode() + b"\n",
        _rpc(2, "tools/list", {}),
        _rpc(
            3,
            "tools/call",
            {"name": "bzzz_announce", "arguments": {"agent_id": "w-1", "role": "worker"}},
        ),
        # An error result and a resource read go through the same channel.
        _rpc(4, "tools/call", {"name": "bzzz_lookup", "arguments": {"semantic_address": "x"}}),
        _rpc(5, "resources/read", {"uri": "bzzz://w-1"}),
    ]
    proc = await _spawn_stdio(env, tmp_path / "stdio.err")
    assert proc.stdin is not None and proc.stdout is not None
    lines: list[bytes] = []
    try:
        async with asyncio.timeout(START_TIMEOUT):
            for request in requests:
                proc.stdin.write(request)
            await proc.stdin.drain()
            answered: set[int] = set()
            while answered != {1, 2, 3, 4, 5}:
                line = await proc.stdout.readline()
                assert line, "stdout closed before every request was answered"
                lines.append(line)
                if _is_json_rpc(line) and "id" in json.loads(line):
                    answered.add(json.loads(line)["id"])
        servers = nats_servers_of(data_dir)
        assert len(servers) == 1, servers
        proc.stdin.close()
        async with asyncio.timeout(STOP_TIMEOUT):
            lines += (await proc.stdout.read()).splitlines(keepends=True)
            code = await proc.wait()
    finally:
        await _reap(proc)
    stderr = (tmp_path / "stdio.err").read_text(errors="replace")
    assert code == 0, stderr[-3000:]
    assert all(_is_json_rpc(line) for line in lines if line.strip()), lines
    # The debug logging went somewhere: stderr, not stdout.
    assert "bzzz.node" in stderr
    async with asyncio.timeout(STOP_TIMEOUT):
        await wait_until(lambda: not nats_servers_of(data_dir))
    _assert_stopped_in_order(data_dir)


def _run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [bzzz_executable(real=True), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=START_TIMEOUT,
        check=False,
    )


def _show(env: dict[str, str]) -> str:
    done = _run(["config", "show"], env)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_config_show_masks_secrets(tmp_path: Path, clean_env: dict[str, str]) -> None:
    """Environment settings appear; the API key and the bearer tokens never do."""
    env = clean_env | {
        "BZZZ_DATA_DIR": str(tmp_path / "d"),
        "BZZZ_OPENAI_API_KEY": "sk-secret",
        "BZZZ_AUTH_TOKENS": "token-one,token-two",
        "BZZZ_NETWORK_ID": "e2e_net",
        "BZZZ_HTTP_PORT": "7444",
    }
    out = _show(env)
    for secret in ("sk-secret", "token-one", "token-two"):
        assert secret not in out
    assert '"api_key": "***"' in out and '"auth_tokens": "***"' in out
    assert '"network_id": "e2e_net"' in out and '"http_port": 7444' in out


def test_config_show_prints_every_value_whole_when_piped(
    tmp_path: Path, clean_env: dict[str, str]
) -> None:
    """Piped (as in `bzzz config show | jq`), the output is JSON holding each value in full."""
    data_dir = tmp_path / "a-data-directory-whose-name-is-long-like-real-paths-are" / "node"
    env = clean_env | {
        "BZZZ_DATA_DIR": str(data_dir),
        "BZZZ_OPENAI_API_KEY": "sk-secret",
        "COLUMNS": "80",
    }
    settings = json.loads(_show(env))
    assert settings["node"]["data_dir"] == str(data_dir)
    assert settings["openai"]["api_key"] == "***"


def test_invalid_setting_stops_serve_with_one_line_naming_it(
    tmp_path: Path, clean_env: dict[str, str]
) -> None:
    """BZZZ_HTTP_PORT=abc: a non-zero exit and exactly one stderr line that names it."""
    env = clean_env | {"BZZZ_DATA_DIR": str(tmp_path / "data"), "BZZZ_HTTP_PORT": "abc"}
    done = _run(["serve"], env)
    assert done.returncode != 0
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert "BZZZ_HTTP_PORT" in lines[0]
    assert done.stdout == ""
    assert not (tmp_path / "data").exists(), "nothing may start before the settings are valid"
