"""`bzzz metrics` in a spawned CLI; JSON logs with request ids; the log file rotates."""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from e2e.support import bzzz_executable
from mcp import Client

from bzzz.api.app import build_app
from bzzz.config import LoggingSettings, load_settings
from bzzz.errors import ConfigError
from bzzz.mcp.server import build_server
from bzzz.metrics.logs import RequestIds, configure, request_id
from bzzz.node.core import Node

from .conftest import Scenario

_WAIT = 60


async def bzzz_cli(data_dir: Path, *args: str) -> tuple[int, str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BZZZ_")}
    env["BZZZ_DATA_DIR"] = str(data_dir)
    proc = await asyncio.create_subprocess_exec(
        bzzz_executable(),
        *args,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    async with asyncio.timeout(_WAIT):
        out, err = await proc.communicate()
    return proc.returncode or 0, out.decode(), err.decode()


async def test_bzzz_metrics_json_reads_the_store_beside_a_running_node(
    scenario_node: tuple[Node, Scenario],
) -> None:
    node, _ = scenario_node
    code, out, err = await bzzz_cli(node.settings.node.data_dir, "metrics", "--json")

    assert code == 0, err
    shown = json.loads(out)
    assert shown["agent_availability"]["ratio"] == 0.6667
    assert shown["task_completion_rate"]["ratio"] == 0.5
    assert shown["average_response_time"]["seconds"] == 30.0
    assert shown["thread_escalation_rate"]["ratio"] == 0.3333
    assert shown["consensus_success_rate"]["ratio"] == 0.5
    assert shown["cost_per_interaction"]["interactions"] == 2
    assert shown["network_latency"]["live"] is False
    assert "running node" in shown["network_latency"]["note"]


async def test_bzzz_metrics_prints_a_table(scenario_node: tuple[Node, Scenario]) -> None:
    node, _ = scenario_node
    code, out, err = await bzzz_cli(node.settings.node.data_dir, "metrics")

    assert code == 0, err
    assert "task completion rate" in out and "50.0%" in out
    assert "network latency" in out and "live only" in out


@pytest.fixture
def restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    bzzz_level = logging.getLogger("bzzz").level
    yield
    for handler in root.handlers:
        handler.close()
    root.handlers[:] = handlers
    root.setLevel(level)
    logging.getLogger("bzzz").setLevel(bzzz_level)


def json_lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


async def test_json_logs_carry_the_request_id_of_each_http_request(
    node: Node, tmp_path: Path, restore_logging: None
) -> None:
    log = tmp_path / "logs" / "bzzz.json"
    configure(LoggingSettings(file=str(log), format="json", level="INFO"))
    seen: list[str | None] = []

    async def route(scope, receive, send):  # type: ignore[no-untyped-def]
        seen.append(request_id.get())
        # Distinct texts: the log summary folds repeats of one message template into a count.
        logging.getLogger("bzzz.test").info(f"handling {scope['path']} #{len(seen)}")
        await build_app(node, build_server(node)[0], "127.0.0.1")(scope, receive, send)

    transport = httpx.ASGITransport(app=RequestIds(route))
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8000") as http:
        given = await http.get("/healthz", headers={"X-Request-Id": "req-42"})
        fresh = await http.get("/healthz")
    logging.getLogger("bzzz.test").info("outside any request")

    entries = json_lines(log)
    assert given.headers["x-request-id"] == "req-42"
    assert fresh.headers["x-request-id"] == seen[1] and seen[1] not in (None, "req-42")
    handled = [e for e in entries if str(e["message"]).startswith("handling")]
    assert [e["request_id"] for e in handled] == ["req-42", seen[1]]
    assert entries[-1]["request_id"] == "-"
    assert {"ts", "level", "logger", "message"} <= set(entries[0])


async def test_each_mcp_call_logs_under_its_own_request_id(
    node: Node, tmp_path: Path, restore_logging: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "mcp.json"
    configure(LoggingSettings(file=str(log), format="json", level="INFO"))
    seen: list[str | None] = []
    real = node.agents.announce

    async def announce(*args, **kwargs):  # type: ignore[no-untyped-def]
        seen.append(request_id.get())
        logging.getLogger("bzzz.test").info(f"announcing #{len(seen)}")
        return await real(*args, **kwargs)

    monkeypatch.setattr(node.agents, "announce", announce)
    server, _ = build_server(node)
    async with Client(server, mode="legacy") as client:
        await client.call_tool("bzzz_announce", {"agent_id": "a-1", "role": "architect"})
        await client.call_tool("bzzz_announce", {"agent_id": "a-2", "role": "architect"})

    assert len(seen) == 2 and None not in seen and seen[0] != seen[1]
    logged = [
        e["request_id"] for e in json_lines(log) if str(e["message"]).startswith("announcing")
    ]
    assert logged == seen


def test_the_log_file_rotates_at_its_size(tmp_path: Path, restore_logging: None) -> None:
    log = tmp_path / "bzzz.log"
    configure(LoggingSettings(file=str(log), max_bytes=2_000, backups=2))
    for n in range(200):
        logging.getLogger("bzzz.test").warning(f"line {n} {'x' * 40}")

    assert sorted(p.name for p in tmp_path.iterdir()) == ["bzzz.log", "bzzz.log.1", "bzzz.log.2"]
    assert all(p.stat().st_size <= 2_000 for p in tmp_path.iterdir())
    assert "line 199" in log.read_text()


@pytest.mark.parametrize(
    ("variable", "bad"),
    [
        ("BZZZ_LOGGING__FORMAT", "xml"),
        ("BZZZ_LOGGING__MAX_BYTES", "-1"),
        ("BZZZ_LOGGING__BACKUPS", "many"),
    ],
)
def test_a_bad_logging_setting_is_refused_naming_it(variable: str, bad: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings(environ={variable: bad})

    assert variable in caught.value.message
    assert caught.value.code == "CONFIG_ERROR"


def test_the_logging_format_is_read_in_any_case() -> None:
    assert load_settings(environ={"BZZZ_LOGGING__FORMAT": "JSON"}).logging.format == "json"
