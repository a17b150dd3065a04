"""What an A2A agent sends is read bounded: a huge answer fails its task, a huge card its add.

The answers come from a loopback server that makes a 300 MiB body as it sends it; the
process reading it must not grow by more than 64 MiB at its peak (VmHWM, reset before), and
the server must not have sent the body whole (the reader stopped at its limit).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Any

import pytest
from e2e.support import START_TIMEOUT, eventually, node_env
from launch import bzzz_executable

from bzzz.a2a import registry
from bzzz.a2a.cards import fetch_card
from bzzz.a2a.guard import check_endpoint, guarded_client, normal_url
from bzzz.a2a.registry import RemoteAgent
from bzzz.config import Settings
from bzzz.errors import InvalidParameters
from bzzz.eventlog import Caller
from bzzz.events.targets import TargetPolicy
from bzzz.network.memory import InMemoryBus
from bzzz.node.core import Node
from bzzz.principal import LOCAL
from bzzz.schemas import PostInput
from bzzz.store.repository import Repository

from .big import MIB, big_server, peak_growth
from .remote import remote_agent

pytestmark = pytest.mark.integration

HUGE = 300 * MIB
FLAT = 64 * MIB
LOOPBACK = TargetPolicy(allow_private=False, loopback_only=True)


@pytest.mark.parametrize("declared", [True, False], ids=["content-length", "read-to-close"])
async def test_a_card_past_its_limit_is_refused_before_it_is_read_whole(declared: bool) -> None:
    async with (
        big_server(HUGE, declared=declared) as big,
        guarded_client(LOOPBACK, 30, max_bytes=256 * 1024) as http,
    ):
        with peak_growth() as peak, pytest.raises(InvalidParameters) as refused:
            await fetch_card(http, big.url)
    assert "larger than 262144 bytes (a2a.max_card_bytes)" in refused.value.message
    assert refused.value.details["field"] == "url"
    assert peak.growth < FLAT, f"the read grew the peak by {peak.growth / MIB:.0f} MiB"
    assert big.sent < HUGE // 2


async def test_any_spelling_of_a_host_is_read_as_the_address_it_names() -> None:
    async with remote_agent() as remote, guarded_client(LOOPBACK, 5) as http:
        port = remote.url.rsplit(":", 1)[1]
        for spelled in ("0177.0.0.1", "017700000001", "0x7f.1", "2130706433", "127.1"):
            card = await fetch_card(http, f"http://{spelled}:{port}")
            assert card.card_url == f"http://127.0.0.1:{port}/.well-known/agent-card.json"
    assert normal_url("http://[::ffff:7f00:1]:8080/a?b=1", "url") == (
        "http://[::ffff:7f00:1]:8080/a?b=1"
    )


@pytest.mark.parametrize(
    "url",
    [
        "http://169.254.169.254/",
        "http://0251.0376.0251.0376/",  # octal
        "http://0xa9fea9fe/",  # hex
        "http://2852039166/",  # one decimal number
        "http://[::ffff:169.254.169.254]/",
        "http://[fe80::1%25eth0]/",
        "http://user:secret@127.0.0.1/",
        "http://127.0.0.1:99999/",
        "http://127.0.0.1:0/",
        "http://[zz]/",
        "ftp://127.0.0.1/",
        "file:///etc/passwd",
        "http://1.2.3.4.5/",
    ],
)
async def test_an_endpoint_deliveries_would_never_reach_is_refused_naming_its_field(
    url: str,
) -> None:
    with pytest.raises(InvalidParameters) as refused:
        await check_endpoint(LOOPBACK, url, "endpoint")
    assert refused.value.details["field"] == "endpoint"
    assert "\n" not in refused.value.message


def _remote(endpoint: str) -> RemoteAgent:
    return RemoteAgent(
        agent_id="big-agent",
        role="a2a",
        project="shop",
        card_url=f"{endpoint}.well-known/agent-card.json",
        endpoint=endpoint,
        protocol_version="1.0",
        name="Big Agent",
    )


async def _failed_task(settings: Settings, bus: InMemoryBus, endpoint: str) -> Any:
    """A task given to a remote agent at ``endpoint``, once it has failed."""
    data_dir = settings.node.data_dir.expanduser()
    data_dir.mkdir(parents=True, exist_ok=True)
    registry.save(data_dir, {"big-agent": _remote(endpoint)})
    settings.webhooks.initial_backoff = 0.05
    settings.webhooks.max_backoff = 0.1
    async with Node(settings, bus=bus) as node:
        sent = await node.conversations.post(
            Caller("proc-test", LOCAL),
            PostInput(
                target_address="bzzz://big-agent",
                message_type="task_assignment",
                content={"task_type": "documentation", "description": "Document refunds"},
            ),
            as_principal=True,
        )
        task_id = sent["tasks"]["big-agent"]

        async def task() -> Any:
            async with node.db.session() as session:
                return await Repository(session).task(task_id)

        return await eventually(task, lambda t: t.status != "pending", within=30)


@pytest.mark.parametrize("declared", [True, False], ids=["content-length", "read-to-close"])
async def test_a_task_whose_answer_is_past_the_limit_fails_with_the_reason(
    settings: Settings, memory_bus: InMemoryBus, declared: bool
) -> None:
    async with big_server(HUGE, declared=declared) as big:
        with peak_growth() as peak:
            done = await _failed_task(settings, memory_bus, f"{big.url}/")
    assert done.status == "failed"
    assert "larger than 4194304 bytes (a2a.max_answer_bytes)" in done.error
    assert peak.growth < FLAT, f"the answer grew the peak by {peak.growth / MIB:.0f} MiB"
    assert big.requests == 1 and big.sent < HUGE // 2  # not read whole, and not retried


async def test_a_task_whose_answer_is_not_a2a_fails_at_once(
    settings: Settings, memory_bus: InMemoryBus
) -> None:
    async with big_server(0, declared=True, body=b'{"jsonrpc": "2.0", "id"') as garbage:
        done = await _failed_task(settings, memory_bus, f"{garbage.url}/")
    assert done.status == "failed" and "not A2A" in done.error
    assert garbage.requests == 1


async def test_a_task_for_an_endpoint_never_allowed_fails_at_once(
    settings: Settings, memory_bus: InMemoryBus
) -> None:
    # A registry written before `a2a add` checked endpoints (or by hand).
    done = await _failed_task(settings, memory_bus, "http://169.254.169.254/")
    assert done.status == "failed" and "SSRF" in done.error and "never allowed" in done.error


def card_body(endpoint: str) -> bytes:
    """A well-formed, unsigned card naming ``endpoint``."""
    return json.dumps(
        {
            "name": "Meta Agent",
            "version": "1.0.0",
            "supportedInterfaces": [
                {"url": endpoint, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
            ],
            "capabilities": {},
            "defaultInputModes": ["text/plain"],
            "defaultOutputModes": ["text/plain"],
            "skills": [],
        }
    ).encode()


def _cli(env: dict[str, str], *args: str) -> tuple[int, str, int]:
    """Run the real `bzzz` (its memory its own, not the suite's forked one's): its exit code,
    its standard error, and its peak resident memory in bytes."""
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(
            [bzzz_executable(real=True), *args], env=env, stdout=subprocess.DEVNULL, stderr=err
        )
        killer = threading.Timer(START_TIMEOUT * 3, proc.kill)
        killer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            killer.cancel()
        proc.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        return proc.returncode, err.read().decode(), usage.ru_maxrss * 1024


def _one_line(code: int, err: str) -> str:
    assert code == 1, err
    assert err.startswith("bzzz: ") and err.count("\n") == 1, err
    return err


async def test_a2a_add_of_a_huge_card_fails_in_one_line_with_its_memory_flat(
    data_dir: Path, clean_env: dict[str, str]
) -> None:
    env = node_env(clean_env, data_dir)
    async with big_server(0, declared=True, body=b'{"not": "a card"}') as small:
        code, err, baseline = await asyncio.to_thread(_cli, env, "a2a", "add", small.url)
    assert "not an A2A agent card" in _one_line(code, err)
    async with big_server(HUGE, declared=False) as big:
        code, err, peak = await asyncio.to_thread(_cli, env, "a2a", "add", big.url)
    assert "larger than 262144 bytes (a2a.max_card_bytes)" in _one_line(code, err)
    assert peak - baseline < FLAT, f"{baseline / MIB:.0f} MiB, then {peak / MIB:.0f} MiB"
    assert big.sent < HUGE // 2


async def test_a2a_add_refuses_a_card_whose_endpoint_is_never_allowed(
    data_dir: Path, clean_env: dict[str, str]
) -> None:
    env = node_env(clean_env, data_dir)
    for endpoint in ("http://169.254.169.254/", "http://0251.0376.0251.0376/", "ftp://x/"):
        async with big_server(0, declared=True, body=card_body(endpoint)) as card:
            done = await _launched(env, "a2a", "add", card.url)
        assert "endpoint" in _one_line(done.returncode, done.stderr) and "refused" in done.stderr
    assert not registry.path_of(data_dir).exists()


async def _launched(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """One `bzzz` command run to its end by the suite's launcher."""
    return await asyncio.to_thread(
        subprocess.run,
        [bzzz_executable(), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=START_TIMEOUT * 3,
        check=False,
    )


@pytest.mark.parametrize(
    "url",
    [
        "http://169.254.169.254/",
        "http://0251.0376.0251.0376/",
        "http://0xa9fea9fe/",
        "http://0xa9.0xfe.0xa9.0xfe/",
        "http://2852039166/",
        "http://[::ffff:a9fe:a9fe]/",
        "http://[0:0:0:0:0:ffff:169.254.169.254]/",
        "http://user:secret@127.0.0.1/",
        "http://127.0.0.1:99999/",
        "http://[zz]/",
        "ftp://127.0.0.1/",
    ],
)
async def test_a2a_add_of_any_spelling_of_a_bad_url_is_one_clear_line(
    url: str, data_dir: Path, clean_env: dict[str, str]
) -> None:
    done = await _launched(node_env(clean_env, data_dir), "a2a", "add", url)
    err = _one_line(done.returncode, done.stderr)
    assert "refused" in err and "Traceback" not in err
    assert "secret" not in err
