"""One node's metrics: a registry of its own, refreshed from the store and the node at scrape time.

The store's figures are read once per ``ttl`` seconds (a scrape every few seconds costs a few
aggregate queries, not one per scrape); the node's live counters are read on every scrape.

Network latency is measured, never inferred from heartbeat timestamps (the sender's clock is not
the receiver's). Between nodes: the peer service pings each peer every heartbeat interval
(``bzzz.peers.latency``) and ``bzzz_network_latency_seconds{peer}`` is its histogram. To the
log: each refresh times one JetStream request/reply to the server holding the network's log (a
stream-info request, the same path as a publish's ack), observed in
``bzzz_log_round_trip_seconds``. Both are timed on this node's own monotonic clock.
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from collections.abc import Iterator
from typing import Any, Protocol

from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from bzzz.errors import BzzzError
from bzzz.metrics.figures import RESPONSE_BUCKETS, Figures, read_figures
from bzzz.network.base import Bus
from bzzz.peers.latency import LATENCY_BUCKETS, RoundTrips
from bzzz.peers.latency import MEASURED as PEER_MEASURED
from bzzz.store.database import Database

logger = logging.getLogger(__name__)

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
LATENCY_MEASURED = (
    "round trip of a JetStream stream-info request from this node to the server holding "
    "the log, on this node's monotonic clock"
)


class Measured(Protocol):
    """What the metrics read of a node: the node passes itself (``bzzz.node.core.Node``).

    Also read when the node has them: ``hosted.status()`` (the hosted agents' prompt
    compression) and ``peers.pinger.round_trips`` (the latency to each peer).
    """

    @property
    def node_id(self) -> str:
        """The node measured."""
        ...

    @property
    def db(self) -> Database:
        """Its store (the network-wide figures)."""
        ...

    @property
    def bus(self) -> Bus:
        """Its log (the round trip timed on each refresh)."""
        ...

    @property
    def healthy(self) -> bool:
        """Whether it is healthy (``bzzz_up``)."""
        ...

    def status(self) -> dict[str, Any]:
        """Its live counters (projector, webhooks, threads)."""
        ...


_nodes: weakref.WeakKeyDictionary[Measured, NodeMetrics] = weakref.WeakKeyDictionary()


def metrics_of(node: Measured) -> NodeMetrics:
    """The node's metrics (made on first use: the node itself knows nothing of them)."""
    found = _nodes.get(node)
    if found is None:
        found = _nodes[node] = NodeMetrics(node)
    return found


class NodeMetrics:
    """The registry, the latency histogram and the cached store figures of one node."""

    def __init__(self, node: Measured, ttl: float = 2.0) -> None:
        self._node = node
        self.ttl = ttl
        self.registry = CollectorRegistry(auto_describe=False)
        self.log_rtt = Histogram(
            "bzzz_log_round_trip_seconds",
            f"Latency to the log: {LATENCY_MEASURED}",
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.last_rtt: float | None = None
        self.figures = Figures()
        self._read_at: float | None = None
        self._lock = asyncio.Lock()
        self.registry.register(_Snapshot(self))

    @property
    def node(self) -> Measured:
        """The node measured."""
        return self._node

    async def refresh(self) -> None:
        """Read the store (at most once per ttl) and time one round trip to the log."""
        async with self._lock:
            now = time.monotonic()
            if self._read_at is not None and now - self._read_at < self.ttl:
                return
            async with self._node.db.session() as session:
                self.figures = await read_figures(session)
            await self._measure()
            self._read_at = time.monotonic()

    async def _measure(self) -> None:
        started = time.perf_counter()
        try:
            await self._node.bus.last_sequence()
        except (BzzzError, TimeoutError, OSError) as exc:
            logger.warning("could not measure the round trip to the log: %s", exc)
            return
        self.last_rtt = time.perf_counter() - started
        self.log_rtt.observe(self.last_rtt)

    def text(self) -> bytes:
        """The Prometheus text exposition of the registry."""
        return generate_latest(self.registry)

    def compression(self) -> dict[str, Any] | None:
        """The hosted agents' prompt tokens before and after compression (live, this node)."""
        hosted = self._node.hosted.status() if hasattr(self._node, "hosted") else None
        context = ((hosted or {}).get("collaboration") or {}).get("context")
        return dict(context) if context else None

    def latency(self) -> dict[str, Any]:
        """What was measured of the network latency (node to node, and to the log), and how."""
        rtt = [s for family in self.log_rtt.collect() for s in family.samples]
        count = next((s.value for s in rtt if s.name.endswith("_count")), 0.0)
        total = next((s.value for s in rtt if s.name.endswith("_sum")), 0.0)
        return {
            "live": True,
            "measured": PEER_MEASURED,
            "peers": [
                {"peer": peer, **trips.to_json()}
                for peer, trips in sorted(self.round_trips().items())
            ],
            "log_round_trip": {
                "measured": LATENCY_MEASURED,
                "last_seconds": round(self.last_rtt, 6) if self.last_rtt is not None else None,
                "mean_seconds": round(total / count, 6) if count else None,
                "samples": int(count),
            },
        }

    def round_trips(self) -> dict[str, RoundTrips]:
        peers = getattr(self._node, "peers", None)
        return dict(peers.pinger.round_trips) if peers is not None else {}


class _Snapshot:
    """A custom collector: the node's counters and the store's figures, as of the last refresh."""

    def __init__(self, owner: NodeMetrics) -> None:
        self._owner = owner

    def collect(self) -> Iterator[Metric]:
        """Every family but the live histogram (registered on its own)."""
        node = self._owner.node
        yield from node_families(node.status(), node.healthy)
        yield from figure_families(self._owner.figures)
        yield from compression_families(self._owner.compression())
        yield from latency_families(self._owner.round_trips())


def node_families(status: dict[str, Any], healthy: bool) -> Iterator[Metric]:
    """The series /metrics always had, under the same names."""
    projector = status.get("projector") or {}
    webhooks = status.get("webhooks") or {}
    threads = status.get("threads") or {}
    yield _gauge("bzzz_up", "1 while the node is healthy", 1 if healthy else 0)
    yield _counter(
        "bzzz_envelopes_applied", "Envelopes applied to the store", projector.get("applied", 0)
    )
    yield _gauge(
        "bzzz_log_applied_sequence",
        "Last log sequence applied to the store",
        projector.get("applied_sequence", 0),
    )
    rejected = CounterMetricFamily(
        "bzzz_envelopes_rejected", "Envelopes dropped, by reason", labels=["reason"]
    )
    for reason, count in sorted((projector.get("rejected") or {}).items()):
        rejected.add_metric([reason], count)
    yield rejected
    yield _labelled(
        "bzzz_webhook_deliveries",
        "Webhook delivery attempts, by outcome",
        {
            "delivered": webhooks.get("delivered", 0),
            "failed_attempt": webhooks.get("failed_attempts", 0),
            "dead": webhooks.get("dead", 0),
        },
    )
    yield _counter(
        "bzzz_thread_escalations",
        "Escalation rules this node fired",
        threads.get("escalations_fired", 0),
    )
    yield _labelled(
        "bzzz_escalation_actions",
        "Escalation actions this node ran, by outcome",
        {
            "done": threads.get("escalation_actions_done", 0),
            "failed_attempt": threads.get("escalation_action_failures", 0),
        },
    )
    yield forwarding_family(status.get("forwarding") or {})
    directory = CounterMetricFamily(
        "bzzz_directory_entries_rejected",
        "Agent directory values this node left out (unsigned, forged, not admitted…), by reason",
        labels=["reason"],
    )
    for reason, count in sorted(((status.get("directory") or {}).get("rejected") or {}).items()):
        directory.add_metric([reason], count)
    yield directory


def forwarding_family(forwarding: dict[str, Any]) -> CounterMetricFamily:
    """Calls forwarded to a node serving their project ("out") and run here for one ("in")."""
    family = CounterMetricFamily(
        "bzzz_forwarded_calls",
        "Calls about a project forwarded out of this node or run here for another, by outcome",
        labels=["direction", "outcome"],
    )
    for direction in ("out", "in"):
        for outcome, count in sorted((forwarding.get(direction) or {}).items()):
            family.add_metric([direction, outcome], count)
    return family


def figure_families(f: Figures) -> Iterator[Metric]:
    """The seed's six and the design's success metrics (network-wide, from the store)."""
    agents = GaugeMetricFamily(
        "bzzz_agents", "Agents known to the network, by status", labels=["status"]
    )
    for status, n in sorted(f.agents.items()):
        agents.add_metric([status], n)
    yield agents
    yield _ratio(
        "bzzz_agent_availability_ratio",
        "Agents online with a free task slot, over all agents",
        _div(f.agents_available, f.agents_total),
    )
    tasks = GaugeMetricFamily("bzzz_tasks", "Tasks, by status", labels=["status"])
    for status, n in sorted(f.tasks.items()):
        tasks.add_metric([status], n)
    yield tasks
    yield _ratio(
        "bzzz_task_completion_ratio",
        "Completed tasks over finished (completed + failed) tasks",
        _div(f.tasks.get("completed", 0), f.finished_tasks),
    )
    yield _response_histogram(f.response_times)
    yield _gauge("bzzz_threads", "Threads on the network", f.threads)
    yield _ratio(
        "bzzz_thread_escalation_ratio",
        "Threads with at least one escalation, over all threads",
        _div(f.threads_escalated, f.threads),
    )
    yield _ratio(
        "bzzz_human_escalation_ratio",
        "Threads escalated to a human (notify_human), over all threads",
        _div(f.threads_to_humans, f.threads),
    )
    yield _ratio(
        "bzzz_consensus_success_ratio",
        "Threads that reached consensus, over threads where a decision was proposed",
        _div(f.consensus_reached, f.discussions),
    )
    yield _gauge(
        "bzzz_model_calls", "Model calls in the cost ledger (interactions)", f.interactions
    )
    yield _gauge(
        "bzzz_model_cost_usd", "Model spending in the cost ledger, USD", f.cost_nanos / 1e9
    )
    yield _ratio("bzzz_cost_per_interaction_usd", "Mean USD per model call", f.cost_per_interaction)
    yield _ratio(
        "bzzz_cost_per_task_usd",
        "USD of task work over the tasks hosted agents finished",
        f.cost_per_task,
    )


def compression_families(context: dict[str, Any] | None) -> Iterator[Metric]:
    """The design's context compression ratio (this node's hosted agents, since it started)."""
    context = context or {}
    yield _counter(
        "bzzz_prompt_tokens_raw",
        "Prompt tokens before the optimizer compressed them",
        context.get("raw_tokens", 0),
    )
    yield _counter(
        "bzzz_prompt_tokens_sent",
        "Prompt tokens sent after compression",
        context.get("sent_tokens", 0),
    )
    yield _ratio(
        "bzzz_context_compression_ratio",
        "1 - sent/raw prompt tokens of this node's hosted agents",
        context.get("reduction") if context.get("raw_tokens") else None,
    )


def latency_families(round_trips: dict[str, RoundTrips]) -> Iterator[Metric]:
    """The seed's network latency between nodes: a histogram per peer, and its unanswered pings."""
    histogram = HistogramMetricFamily(
        "bzzz_network_latency_seconds",
        f"Network latency between nodes: {PEER_MEASURED}",
        labels=["peer"],
    )
    timeouts = CounterMetricFamily(
        "bzzz_network_latency_timeouts",
        "Pings to the peer left unanswered within the timeout",
        labels=["peer"],
    )
    for peer, trips in sorted(round_trips.items()):
        buckets = [(str(b), float(n)) for b, n in zip(LATENCY_BUCKETS, trips.buckets, strict=True)]
        buckets.append(("+Inf", float(trips.count)))
        histogram.add_metric([peer], buckets, sum_value=trips.total)
        timeouts.add_metric([peer], trips.timeouts)
    yield histogram
    yield timeouts


def _div(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def _gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, value=value)


def _ratio(name: str, doc: str, value: float | None) -> GaugeMetricFamily:
    # No sample while nothing is there to divide: a dashboard shows "no data", not 0%.
    family = GaugeMetricFamily(name, doc)
    if value is not None:
        family.add_metric([], value)
    return family


def _counter(name: str, doc: str, value: float) -> CounterMetricFamily:
    return CounterMetricFamily(name, doc, value=value)


def _labelled(name: str, doc: str, outcomes: dict[str, float]) -> CounterMetricFamily:
    family = CounterMetricFamily(name, doc, labels=["outcome"])
    for outcome, value in outcomes.items():
        family.add_metric([outcome], value)
    return family


def _response_histogram(seconds: list[float]) -> HistogramMetricFamily:
    buckets: list[tuple[str, float]] = []
    for bound in RESPONSE_BUCKETS:
        buckets.append((str(bound), sum(1 for s in seconds if s <= bound)))
    buckets.append(("+Inf", len(seconds)))
    return HistogramMetricFamily(
        "bzzz_task_response_seconds",
        "Average response time: a completed task's assignment to its completion",
        buckets=buckets,
        sum_value=sum(seconds),
    )
