"""A spawned `bzzz serve`: /metrics over HTTP, JSON log lines in its rotating file."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import httpx
import pytest
from e2e.support import HttpNode, node_env
from prometheus_client.parser import text_string_to_metric_families


@pytest.mark.integration
async def test_a_served_node_answers_metrics_and_logs_json_lines(
    data_dir: Path, clean_env: dict[str, str], tmp_path: Path
) -> None:
    log = tmp_path / "node-log" / "bzzz.jsonl"
    env = node_env(clean_env, data_dir, BZZZ_LOG_FILE=str(log), BZZZ_LOGGING__FORMAT="json")
    node = HttpNode(data_dir, env, tmp_path / "logs")
    await node.start()
    try:
        async with httpx.AsyncClient(timeout=10.0) as http:
            answer = await http.get(
                f"{node.base_url}/metrics", headers={"X-Request-Id": "scrape-1"}
            )
        node.send(signal.SIGTERM)
        assert await node.wait_exit() == 0
    finally:
        await node.kill()

    assert answer.status_code == 200
    assert answer.headers["x-request-id"] == "scrape-1"
    families = {f.name: f for f in text_string_to_metric_families(answer.text)}
    [count] = [
        s.value
        for s in families["bzzz_log_round_trip_seconds"].samples
        if s.name.endswith("_count")
    ]
    assert count == 1  # one real round trip to the embedded nats-server
    entries = [json.loads(line) for line in log.read_text().splitlines()]
    assert entries, node.stderr_tail()
    assert all({"ts", "level", "logger", "message", "request_id"} <= set(e) for e in entries)
