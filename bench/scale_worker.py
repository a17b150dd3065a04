"""One worker process of ``bench/scale.py``: several BZZZ nodes on one asyncio loop, driven by
the harness over this process's stdin and stdout.

Each node is a full ``bzzz.node.core.Node`` of its own: its own data directory (so its own Ed25519
identity, SQLite store and slot lock), its own NATS connection, its own durable JetStream
consumer (filtered by its ``bzzz.projects``), its own directory writer and forwarding queue
groups. They share only the interpreter, so a packed process's RSS is divided by its nodes;
the nodes whose RSS is compared (the ``*`` node, a one-project node, the bootstrapped node) run
alone in a worker of their own.

The protocol is one JSON object a line: the harness sends ``{"id", "op", ...}``, the worker
answers ``{"id", "ok", "result"}`` or ``{"id", "ok": false, "error"}``; commands run
concurrently (a watch waits while an announcement is made). Logs go to stderr.

    .venv/bin/python bench/scale_worker.py SPEC.json     (started by bench/scale.py)
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from sqlalchemy import func, select

from bzzz.config import load_settings
from bzzz.eventlog import LOCAL_CALLER, Caller
from bzzz.network import subjects
from bzzz.network.envelope import seal
from bzzz.network.identity import KEY_FILE
from bzzz.network.jetstream import JetStreamBus
from bzzz.node.core import Node
from bzzz.principal import LOCAL, Principal, Scope
from bzzz.schemas import AnnounceInput, FilterCriteria, LookupInput, PostInput
from bzzz.store.models import AgentRow, MessageRow

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchutil import percentile

logger = logging.getLogger("bench.scale.worker")

ROLES = ("developer", "architect", "reviewer", "tester", "writer", "devops", "sre", "data")
CAPS = ("python", "go", "rust", "sql", "kubernetes", "typescript")
PUBLISH_WINDOW = 500  # async publishes in flight, a node, before waiting for their acks
# A publish the servers refused (a full ingest queue answers 429 on a saturated machine) is
# made again, its message id the same (the stream's duplicate window keeps one), this often.
PUBLISH_TRIES = 20
ACK_WAIT = 30.0  # seconds a window's acks are waited for before the missing are published again
# Nodes of one worker start one at a time: Alembic's migration context is process-global, and
# two stores migrated at once in one process collide ("table activity already exists").
START_AT_ONCE = 1


async def _publish_window(js: Any, window: list[tuple[str, bytes, str]]) -> int:
    """Publish ``window`` (subject, data, message id) with async acks; what was refused or not
    answered within ACK_WAIT is published again after a pause, until every one is
    acknowledged; how many there were."""
    count = len(window)
    for attempt in range(PUBLISH_TRIES):
        if attempt:
            logger.warning(
                "%d publishes refused or unanswered; again (try %d)", len(window), attempt + 1
            )
            await asyncio.sleep(0.5 * attempt)
        acks = [
            await js.publish_async(subject, data, headers={"Nats-Msg-Id": msg_id})
            for subject, data, msg_id in window
        ]
        if acks:
            # An ack may never come (a server that dropped the message, a lost connection):
            # nats-py's futures have no timeout of their own.
            await asyncio.wait(acks, timeout=ACK_WAIT)
        for ack in acks:
            ack.cancel()  # no-op on a done one
        window = [w for w, a in zip(window, acks, strict=True) if a.cancelled() or a.exception()]
        if not window:
            return count
    raise RuntimeError(f"{len(window)} publishes still refused after {PUBLISH_TRIES} tries")


def agent_id(n: int) -> str:
    """The id of bulk agent ``n``."""
    return f"a{n:07d}"


def bulk_agent(n: int, projects: int, project: str) -> AnnounceInput:
    """Bulk agent ``n`` as its announcement; role, capabilities and load vary with its place
    in its project (``n // projects``), so every project has the same mix."""
    j = n // projects
    return AnnounceInput(
        agent_id=agent_id(n),
        role=ROLES[j % len(ROLES)],
        capabilities=[CAPS[j % len(CAPS)], CAPS[(j * 7 + 1) % len(CAPS)]],
        specialization="rust services" if j % 11 == 0 else None,
        max_tasks=1 + j % 5,
        project=project,
    )


def owner(projects: list[str]) -> Caller:
    """The token holder that posts (the senders are its agents): every project granted."""
    who = Principal(
        "token:bench", "token", frozenset(projects), frozenset({"*"}), Scope.WRITE, "bench"
    )
    return Caller("principal-bench", who)


def _figures(ms: list[float]) -> dict[str, float]:
    ordered = sorted(ms)
    if not ordered:
        return {"count": 0}
    return {
        "count": len(ordered),
        "p50_ms": round(percentile(ordered, 50), 3),
        "p99_ms": round(percentile(ordered, 99), 3),
        "max_ms": round(ordered[-1], 3),
    }


def _rss_kb() -> dict[str, int]:
    found = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(("VmRSS:", "VmHWM:")):
            found[line.split(":")[0]] = int(line.split()[1])
    return {"rss_kb": found.get("VmRSS", 0), "peak_rss_kb": found.get("VmHWM", 0)}


def _empty_but_identity(root: Path) -> None:
    for path in sorted(root.rglob("*"), reverse=True):
        if path.is_dir():
            with contextlib.suppress(OSError):  # one that holds the key stays
                path.rmdir()
        elif path.name != KEY_FILE:
            path.unlink()


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


class Worker:
    """The nodes of this process and the commands the harness sends them."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec = spec
        self.nodes: dict[str, Node] = {}
        self.projects: list[str] = spec["projects"]
        self.caller = owner(self.projects)
        self._ops: dict[str, Callable[[dict[str, Any]], Awaitable[Any]]] = {
            "start": self.op_start,
            "populate": self.op_populate,
            "settle": self.op_settle,
            "announce": self.op_announce,
            "watch": self.op_watch,
            "lookups": self.op_lookups,
            "compare": self.op_compare,
            "sender": self.op_sender,
            "post": self.op_post,
            "soak": self.op_soak,
            "count": self.op_count,
            "stats": self.op_stats,
            "snapshot": self.op_snapshot,
            "drop": self.op_drop,
        }

    def _settings(self, node: dict[str, Any], load_snapshot: bool = True) -> Any:
        spec = self.spec
        return load_settings(
            environ={},
            overrides={
                "node": {"data_dir": node["dir"]},
                "bzzz": {
                    "nats_url": spec["urls"],
                    "projects": node["projects"],
                    "stream_replicas": 3,
                    "publish_timeout": 30.0,
                    "heartbeat_interval": spec["heartbeat"],
                    "heartbeat_misses": spec["heartbeat_misses"],
                    # The fleet's keys, known in advance: every node is admitted from the start.
                    "trusted_nodes": spec["trusted"],
                },
                "agents": {"lease_seconds": spec["lease"], "max_agents": spec["max_agents"]},
                # One network key for the fleet: content is sealed on the log, as by default.
                "encryption": {"key": spec["network_key"]},
                "snapshots": {"load": load_snapshot},
            },
        )

    async def op_start(self, cmd: dict[str, Any]) -> dict[str, Any]:
        """Start the named nodes (all of the spec's by default); their start-up seconds."""
        wanted = [n for n in self.spec["nodes"] if n["name"] in set(cmd.get("names") or [])]
        wanted = wanted or [n for n in self.spec["nodes"] if not n.get("deferred")]
        gate = asyncio.Semaphore(START_AT_ONCE)
        took: dict[str, float] = {}

        async def start(node: dict[str, Any]) -> None:
            async with gate:
                started = time.monotonic()
                settings = self._settings(node, cmd.get("load_snapshot", True))
                built = Node(settings, catch_up_timeout=3600)
                await built.start()
                took[node["name"]] = round(time.monotonic() - started, 3)
                self.nodes[node["name"]] = built

        await asyncio.gather(*(start(node) for node in wanted))
        applied = {name: self.nodes[name].projector.applied_count for name in took}
        # Where each started from (/healthz "snapshots"): a snapshot at sequence N, or replay.
        began = {name: self.nodes[name].snapshots.started() for name in took}
        loaded = {name: self.nodes[name].snapshots.loaded for name in took}
        return {"start_s": took, "applied": applied, "began": began, "loaded": loaded, **_rss_kb()}

    async def op_snapshot(self, cmd: dict[str, Any]) -> dict[str, Any]:
        """``bzzz snapshot`` on the named node: what it wrote."""
        return await self.nodes[cmd["node"]].snapshots.write(LOCAL)

    async def op_drop(self, cmd: dict[str, Any]) -> dict[str, Any]:
        """Stop the named nodes and empty their data directories but for their identity (the
        fleet's trusted key): the next start is a new node's on an empty store."""
        for name in cmd["names"]:
            node = self.nodes.pop(name)
            await node.stop()
            root = Path(next(n["dir"] for n in self.spec["nodes"] if n["name"] == name))
            await asyncio.to_thread(_empty_but_identity, root)
        return {"dropped": cmd["names"]}

    async def op_populate(self, cmd: dict[str, Any]) -> dict[str, Any]:
        """Publish this worker's share of the bulk announcements, signed by their nodes."""
        started = time.monotonic()
        counts = await asyncio.gather(*(self._populate(share, cmd) for share in cmd["shares"]))
        return {"published": sum(counts), "seconds": round(time.monotonic() - started, 3)}

    async def _populate(self, share: dict[str, Any], cmd: dict[str, Any]) -> int:
        """Agents n of project index i (n % projects == i) whose turn ((n // projects) % of)
        is this node's (k): sealed as this node's ``agent.announced`` envelopes."""
        node = self.nodes[share["node"]]
        assert isinstance(node.bus, JetStreamBus)
        js = node.bus.client.jetstream(timeout=60)
        total, project_count = cmd["agents"], len(self.projects)
        index, of, k = share["index"], share["of"], share["k"]
        project = self.projects[index]
        session = f"mcp-bench-{share['node']}"
        window: list[tuple[str, bytes, str]] = []
        sent = 0
        # --ingest-rate: this share's part of the asked agents/s (0: as fast as acknowledged).
        rate = cmd.get("rate", 0.0) * share.get("part", 0.0)
        started = time.monotonic()
        for n in range(index, total, project_count):
            if (n // project_count) % of != k:
                continue
            params = bulk_agent(n, project_count, project)
            payload = params.model_dump() | {"session_id": session, "metadata": {"bulk": True}}
            subject = subjects.subject(node.network, "agent", params.agent_id, project=project)
            env = seal(
                node.identity,
                node.network,
                "agent.announced",
                subject,
                payload,
                keyring=node.keyring,
            )
            window.append((subject, env.to_bytes(), env.id))
            if len(window) == PUBLISH_WINDOW:
                sent += await _publish_window(js, window)
                window = []
                if rate > 0:
                    await asyncio.sleep(max(0.0, started + sent / rate - time.monotonic()))
        return sent + await _publish_window(js, window)

    async def op_settle(self, cmd: dict[str, Any]) -> dict[str, Any]:
        """Wait until every node has applied the log up to its newest envelope, and its
        directory writer has listed what changed."""
        started = time.monotonic()
        for node in self.nodes.values():
            await node.projector.wait_for_sequence(await node.projector.log_end(), cmd["within"])
            await node.listing.writer.flush()
        return {"seconds": round(time.monotonic() - started, 3)}

    async def op_announce(self, cmd: dict[str, Any]) -> dict[str, Any]:
        """One announcement through the service (what ``bzzz_announce`` calls); when it was
        acknowledged (CLOCK_MONOTONIC, one clock for every process of the machine)."""
        node = self.nodes[cmd["node"]]
        params = AnnounceInput(agent_id=cmd["agent"], role="probe", project=cmd["project"])
        started = time.monotonic()
        await node.agents.announce(Caller("mcp-probe"), params)
        acked = time.monotonic()
        return {"acked": acked, "ms": round((acked - started) * 1000, 3)}

    async def op_watch(self, cmd: dict[str, Any]) -> dict[str, Any]:
        """Poll a lookup of one agent every ``poll`` seconds until it is found; when (None: not
        within ``within`` seconds)."""
        node = self.nodes[cmd["node"]]
        query = LookupInput(semantic_address=f"bzzz://{cmd['agent']}@{cmd['project']}")
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(cmd["within"]):
                while True:
                    found = await node.agents.lookup(LOCAL_CALLER, query)
                    if found["total_matches"]:
                        return {"seen": time.monotonic()}
                    await asyncio.sleep(cmd["poll"])
        return {"seen": None}

    @staticmethod
    def lookup_inputs(project: str, agent: str) -> dict[str, LookupInput]:
        """The lookups timed, by kind: the project's agents, one role, an expertise, one id."""
        return {
            "project": LookupInput(semantic_address=f"bzzz://*:*@{project}"),
            "role": LookupInput(semantic_address=f"bzzz://*:developer@{project}"),
            "expertise": LookupInput(
                semantic_address=f"bzzz://*:*@{project}",
                filter_criteria=FilterCriteria(expertise=["rust"]),
            ),
            "agent": LookupInput(semantic_address=f"bzzz://{agent}@{project}"),
        }

    async def op_lookups(self, cmd: dict[str, Any]) -> dict[str, Any]:
        """p50/p99 of each kind of lookup of ``project`` on a node, ``rounds`` each."""
        node = self.nodes[cmd["node"]]
        figures = {}
        for kind, query in self.lookup_inputs(cmd["project"], cmd["agent"]).items():
            times, matches = [], 0
            for _ in range(cmd["rounds"]):
                started = time.perf_counter()
                found = await node.agents.lookup(LOCAL_CALLER, query)
                times.append((time.perf_counter() - started) * 1000)
                matches = found["total_matches"]
            figures[kind] = {"matches": matches, **_figures(times)}
        return figures

    async def op_compare(self, cmd: dict[str, Any]) -> dict[str, Any]:
        """The ranked (id, score) answers of each kind of lookup (to compare two nodes)."""
        node = self.nodes[cmd["node"]]
        answers = {}
        for kind, query in self.lookup_inputs(cmd["project"], cmd["agent"]).items():
            found = await node.agents.lookup(LOCAL_CALLER, query)
            ranked = [[m["id"], m["score"]] for m in found["matches"]]
            answers[kind] = {"total": found["total_matches"], "ranked": ranked}
        return answers

    async def op_sender(self, cmd: dict[str, Any]) -> dict[str, Any]:
        """Announce the owner's sending agent on a node (in one of its projects)."""
        node = self.nodes[cmd["node"]]
        params = AnnounceInput(agent_id=cmd["agent"], role="sender", project=cmd["project"])
        await node.agents.announce(self.caller, params)
        return {"agent": cmd["agent"]}

    def _post_input(self, sender: str, target: str, project: str, n: int) -> PostInput:
        return PostInput(
            target_address=f"bzzz://{target}@{project}",
            message_type="text",
            content={"text": f"message {n} to {target}"},
            agent_id=sender,
        )

    async def op_post(self, cmd: dict[str, Any]) -> dict[str, Any]:
        """One ``bzzz_post`` through the node's front door (local or forwarded); its time."""
        node = self.nodes[cmd["node"]]
        params = self._post_input(cmd["sender"], cmd["target"], cmd["project"], cmd["n"])
        started = time.perf_counter()
        result = await node.front.post(self.caller, params)
        return {"ms": (time.perf_counter() - started) * 1000, "message_id": result["message_id"]}

    async def op_soak(self, cmd: dict[str, Any]) -> dict[str, Any]:
        """Post for ``seconds`` at ``rate``/s from this worker's senders to bulk agents of
        every project; which posts were acknowledged (message id, project) and which failed."""
        senders: list[dict[str, str]] = cmd["senders"]
        rng = random.Random(cmd["seed"])
        acked: list[list[str]] = []
        failed: dict[str, int] = {}
        gate = asyncio.Semaphore(cmd["in_flight"])

        async def one(n: int) -> None:
            sender = senders[n % len(senders)]
            index = rng.randrange(len(self.projects))
            target = agent_id(index + len(self.projects) * rng.randrange(cmd["per_project"]))
            project = self.projects[index]
            try:
                params = self._post_input(sender["agent"], target, project, n)
                result = await self.nodes[sender["node"]].front.post(self.caller, params)
                acked.append([result["message_id"], project])
            except Exception as exc:  # counted by kind and reported: the soak's finding
                failed[type(exc).__name__] = failed.get(type(exc).__name__, 0) + 1
            finally:
                gate.release()

        loop = asyncio.get_running_loop()
        started = loop.time()
        tasks = []
        n = 0
        while loop.time() - started < cmd["seconds"]:
            await gate.acquire()
            tasks.append(asyncio.create_task(one(n)))
            n += 1
            await asyncio.sleep(max(0.0, started + n / cmd["rate"] - loop.time()))
        await asyncio.gather(*tasks)
        return {"attempted": n, "acked": acked, "failed": failed}

    async def op_count(self, cmd: dict[str, Any]) -> dict[str, Any]:
        """How many of ``ids`` each named node stores (message rows)."""
        counts = {}
        ids = cmd["ids"]
        for name in cmd["nodes"]:
            node, held = self.nodes[name], 0
            for first in range(0, len(ids), 500):
                chunk = ids[first : first + 500]
                async with node.db.session() as session:
                    query = select(func.count()).where(MessageRow.id.in_(chunk))
                    held += int((await session.execute(query)).scalar_one())
            counts[name] = held
        return counts

    async def op_stats(self, _cmd: dict[str, Any]) -> dict[str, Any]:
        """The process's RSS and, per node, its projects, store size and what it holds."""
        nodes = {}
        for name, node in self.nodes.items():
            async with node.db.session() as session:
                agents = (await session.execute(select(func.count(AgentRow.id)))).scalar_one()
                online = await session.execute(
                    select(func.count(AgentRow.id)).where(AgentRow.status != "offline")
                )
                messages = (await session.execute(select(func.count(MessageRow.id)))).scalar_one()
            nodes[name] = {
                "projects": str(node.projects),
                "store_bytes": _size(node.node_dir),
                "agents_stored": int(agents),
                "agents_online": int(online.scalar_one()),
                "messages_stored": int(messages),
                "envelopes_applied": node.projector.applied_count,
                "forwarding": node.front.status(),
            }
        return {"nodes": nodes, "node_count": len(self.nodes), **_rss_kb()}

    async def stop(self) -> None:
        """Stop every node."""
        for node in self.nodes.values():
            with contextlib.suppress(Exception):  # stopping: one node's failure stops no other
                await node.stop()

    async def handle(self, line: bytes) -> None:
        """Run one command and write its answer line."""
        cmd = json.loads(line)
        try:
            result = await self._ops[cmd["op"]](cmd)
            answer = {"id": cmd["id"], "ok": True, "result": result}
        except Exception as exc:  # the harness reports it; the worker serves on
            logger.exception("command %s failed", cmd["op"])
            answer = {"id": cmd["id"], "ok": False, "error": repr(exc)}
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()


async def serve(spec: dict[str, Any]) -> None:
    """Read commands until stdin closes (the harness is done), then stop the nodes."""
    worker = Worker(spec)
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=256 << 20)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    running: set[asyncio.Task[None]] = set()
    try:
        while line := await reader.readline():
            task = asyncio.create_task(worker.handle(line))
            running.add(task)
            task.add_done_callback(running.discard)
        await asyncio.gather(*running)
    finally:
        await worker.stop()


def main() -> None:
    """Run the worker of the spec file named on the command line."""
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    spec = json.loads(Path(sys.argv[1]).read_text())
    asyncio.run(serve(spec))


if __name__ == "__main__":
    main()
