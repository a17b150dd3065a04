"""The seed's six and the design's success metrics: /metrics, bzzz://metrics and metrics_json."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from mcp import Client
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from bzzz.api.app import build_app
from bzzz.config import load_settings
from bzzz.mcp.server import build_server
from bzzz.metrics import metrics_json, metrics_of
from bzzz.node.core import Node

from .conftest import Scenario

SIX_AND_DESIGN = {
    "bzzz_agent_availability_ratio": "gauge",
    "bzzz_task_completion_ratio": "gauge",
    "bzzz_task_response_seconds": "histogram",
    "bzzz_thread_escalation_ratio": "gauge",
    "bzzz_cost_per_interaction_usd": "gauge",
    "bzzz_log_round_trip_seconds": "histogram",
    "bzzz_network_latency_seconds": "histogram",
    "bzzz_consensus_success_ratio": "gauge",
    "bzzz_human_escalation_ratio": "gauge",
    "bzzz_cost_per_task_usd": "gauge",
    "bzzz_context_compression_ratio": "gauge",
}
KEPT = {
    "bzzz_up": "gauge",
    "bzzz_envelopes_applied": "counter",
    "bzzz_log_applied_sequence": "gauge",
    "bzzz_envelopes_rejected": "counter",
    "bzzz_webhook_deliveries": "counter",
    "bzzz_thread_escalations": "counter",
    "bzzz_escalation_actions": "counter",
}


async def scrape(node: Node) -> tuple[str, str]:
    server, _ = build_server(node)
    app = build_app(node, server, "127.0.0.1")
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8000") as http:
        answer = await http.get("/metrics")
    assert answer.status_code == 200
    return answer.text, answer.headers["content-type"]


def samples(text: str) -> dict[str, list[Sample]]:
    found: dict[str, list[Sample]] = {}
    for family in text_string_to_metric_families(text):
        found[family.name] = list(family.samples)
    return found


def value(
    found: dict[str, list[Sample]], family: str, name: str | None = None, **labels: str
) -> float:
    [hit] = [s for s in found[family] if s.name == (name or family) and s.labels == labels]
    return hit.value


async def test_metrics_parse_with_help_and_type_for_every_family(
    scenario_node: tuple[Node, Scenario],
) -> None:
    node, _ = scenario_node
    text, content_type = await scrape(node)

    families = {f.name: f for f in text_string_to_metric_families(text)}
    assert content_type.startswith("text/plain; version=0.0.4")
    for name, kind in (SIX_AND_DESIGN | KEPT).items():
        assert families[name].type == kind, name
    helped = {line.split()[2] for line in text.splitlines() if line.startswith("# HELP")}
    typed = {line.split()[2] for line in text.splitlines() if line.startswith("# TYPE")}
    assert helped == typed
    assert len(typed) == len(families)
    assert all(families[n].documentation for n in families)


async def test_the_scenario_shows_the_six_and_the_design_metrics(
    scenario_node: tuple[Node, Scenario],
) -> None:
    node, played = scenario_node
    found = samples((await scrape(node))[0])

    # dev holds its one task slot: 2 of 3 agents available.
    assert value(found, "bzzz_agent_availability_ratio") == 2 / 3
    assert value(found, "bzzz_agents", status="busy") == 1
    assert value(found, "bzzz_task_completion_ratio") == 0.5
    assert value(found, "bzzz_tasks", status="pending") == 1
    response = "bzzz_task_response_seconds"
    assert value(found, response, f"{response}_count") == 1
    assert value(found, response, f"{response}_sum") == 30
    assert value(found, response, f"{response}_bucket", le="15.0") == 0
    assert value(found, response, f"{response}_bucket", le="30.0") == 1
    assert value(found, "bzzz_threads") == 3
    assert value(found, "bzzz_thread_escalation_ratio") == 1 / 3
    assert value(found, "bzzz_human_escalation_ratio") == 1 / 3
    assert value(found, "bzzz_consensus_success_ratio") == 0.5
    both = played.task_cost_nanos + played.reply_cost_nanos
    assert played.task_cost_nanos > 0 and played.reply_cost_nanos > 0
    assert value(found, "bzzz_cost_per_interaction_usd") == round(both / 2 / 1e9, 9)
    assert value(found, "bzzz_cost_per_task_usd") == round(played.task_cost_nanos / 1e9, 9)
    ratio = round(1 - played.sent_tokens / played.raw_tokens, 4)
    assert value(found, "bzzz_context_compression_ratio") == ratio
    rtt = "bzzz_log_round_trip_seconds"
    assert value(found, rtt, f"{rtt}_count") == 1
    assert value(found, "bzzz_thread_escalations", "bzzz_thread_escalations_total") == 1
    assert value(found, "bzzz_up") == 1


async def test_metrics_json_holds_the_same_figures(scenario_node: tuple[Node, Scenario]) -> None:
    node, played = scenario_node
    shown = await metrics_json(node)

    assert shown["node_id"] == node.node_id
    assert shown["agent_availability"] == {
        "ratio": 0.6667,
        "available": 2,
        "total": 3,
        "by_status": {"busy": 1, "idle": 2},
    }
    assert shown["task_completion_rate"]["ratio"] == 0.5
    assert shown["average_response_time"] == {"seconds": 30.0, "tasks": 1}
    assert shown["thread_escalation_rate"]["ratio"] == 0.3333
    assert shown["escalation_rate"] == {"ratio": 0.3333, "to_humans": 1, "threads": 3}
    assert shown["consensus_success_rate"] == {"ratio": 0.5, "reached": 1, "discussions": 2}
    assert shown["cost_per_task"]["tasks"] == 1
    assert shown["context_compression_ratio"]["raw_tokens"] == played.raw_tokens
    assert shown["network_latency"]["peers"] == []  # a node alone has no peer to time
    assert "ping/pong" in shown["network_latency"]["measured"]
    assert shown["network_latency"]["log_round_trip"]["samples"] == 1
    assert "JetStream" in shown["network_latency"]["log_round_trip"]["measured"]


async def test_the_mcp_resource_bzzz_metrics_reads_the_figures(
    scenario_node: tuple[Node, Scenario],
) -> None:
    node, _ = scenario_node
    server, _ = build_server(node)
    async with Client(server, mode="legacy") as client:
        listed = await client.list_resources()
        read = await client.read_resource("bzzz://metrics")

    assert "bzzz://metrics" in [str(r.uri) for r in listed.resources]
    shown = json.loads(read.contents[0].text)  # type: ignore[union-attr]
    assert shown["consensus_success_rate"]["reached"] == 1
    assert shown["task_completion_rate"]["by_status"] == {
        "completed": 1,
        "failed": 1,
        "pending": 1,
    }


async def test_an_empty_network_has_no_rates_yet(node: Node) -> None:
    found = samples((await scrape(node))[0])

    assert found["bzzz_task_completion_ratio"] == []
    assert found["bzzz_consensus_success_ratio"] == []
    assert value(found, "bzzz_threads") == 0


@pytest.mark.integration
async def test_latency_is_a_measured_round_trip_to_the_jetstream_server(
    tmp_path: Path, nats_url: str
) -> None:
    settings = load_settings(
        environ={"BZZZ_NATS_URL": nats_url},
        overrides={"node": {"data_dir": str(tmp_path / "node")}},
    )
    async with Node(settings) as node:
        metrics_of(node).ttl = 0  # every scrape measures again
        first = await metrics_json(node)
        found = samples((await scrape(node))[0])

    assert first["network_latency"]["live"] is True
    latency = first["network_latency"]["log_round_trip"]
    assert latency["samples"] == 1
    assert latency["last_seconds"] is not None and latency["last_seconds"] > 0
    rtt = "bzzz_log_round_trip_seconds"
    assert value(found, rtt, f"{rtt}_count") == 2
    assert value(found, rtt, f"{rtt}_sum") > 0
