"""The cost of encryption at rest and the audit trail: post/get rates and catch-up, on vs off.

1. rates — three `bzzz serve` processes in one run, each with its embedded nats-server and
   SQLite in a fresh data directory: **sealed** (the defaults: content sealed on the log and in
   the store, the JetStream store encrypted by nats-server, the audit trail on),
   **sealed-noaudit** (the same without the audit trail, to tell the two costs apart) and
   **clear** (``BZZZ_ENCRYPTION__ENABLED=false``, ``BZZZ_ENCRYPTION__JETSTREAM_CIPHER=none``,
   ``BZZZ_AUDIT__ENABLED=false``). One official MCP client (streamable HTTP, legacy handshake)
   per server announces an agent, then each round times ``--calls`` ``bzzz_post`` calls (a
   message to itself) and ``--calls`` ``bzzz_get`` calls (its inbox, 10 entries) on one
   server, then the next, each round starting from another, so the machine's drift hits them
   alike. The ratio is this / clear over all rounds; its spread over rounds is printed, and so
   is the CPU the server and its nats-server spent per call (steadier on a busy machine).
2. catch-up — ``--catchup`` signed ``message.posted`` envelopes are published to a fresh
   embedded nats-server, once sealed under a network key (with the server's own store cipher)
   and once in clear (without it); a brand-new node with the key (or with encryption off)
   starts and applies the whole log. Envelopes per second of start + catch-up, both ways.

    .venv/bin/python bench/encryption.py [--calls 1000] [--rounds 5] [--catchup 100000]

Prints the figures and writes bench/results/encryption.json (``--json PATH`` elsewhere).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import nats

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchutil import code_version, cpu_seconds, machine, percentile, wait_for_quiet
from bzzz.config import load_settings
from bzzz.network.embedded import EmbeddedNats
from bzzz.network.envelope import seal
from bzzz.network.identity import NodeIdentity
from bzzz.network.jetstream import JetStreamBus, stream_name
from bzzz.network.sealing import Keyring, NetworkKey, encode_secret, new_secret
from bzzz.node.core import Node
from mcp_throughput import ServerProcess, announce_own, bzzz_command, call, mcp_session

RESULTS = Path(__file__).resolve().parent / "results"
CONFIGS: dict[str, dict[str, str]] = {
    "sealed": {},
    # Sealing alone, to tell its cost from the audit trail's.
    "sealed-noaudit": {"BZZZ_AUDIT__ENABLED": "false"},
    "clear": {
        "BZZZ_ENCRYPTION__ENABLED": "false",
        "BZZZ_ENCRYPTION__JETSTREAM_CIPHER": "none",
        "BZZZ_AUDIT__ENABLED": "false",
    },
}
TEXT = "Review the checkout handler: the refund path skips the idempotency key. " * 3


# --- 1. post and get rates -------------------------------------------------------------------


def _env(data_dir: Path, extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BZZZ_")}
    env["BZZZ_DATA_DIR"] = str(data_dir)
    env["BZZZ_LOG_LEVEL"] = "WARNING"
    return env | extra


async def _timed(
    session: Any,
    tool: str,
    arguments: dict[str, Any],
    calls: int,
    server: ServerProcess | None = None,
) -> dict[str, Any]:
    latencies = []
    errors = 0
    pids = [server.proc.pid, *server.extra_pids()] if server is not None else []
    cpu0 = cpu_seconds(pids)
    started = time.perf_counter()
    for _ in range(calls):
        t0 = time.perf_counter()
        if await call(session, tool, arguments):
            errors += 1
        latencies.append((time.perf_counter() - t0) * 1000)
    elapsed = time.perf_counter() - started
    # CPU of the server and its nats-server per call: steadier than the rate on a busy machine.
    cpu = cpu_seconds(pids) - cpu0
    latencies.sort()
    return {
        "calls": calls,
        "errors": errors,
        "per_s": calls / elapsed,
        "server_cpu_ms_per_call": 1000 * cpu / calls,
        "p50_ms": percentile(latencies, 50),
        "p99_ms": percentile(latencies, 99),
    }


async def rates(work: Path, calls: int, rounds: int) -> dict[str, Any]:
    """Interleaved rounds of bzzz_post and bzzz_get on both servers."""
    servers = {
        name: ServerProcess(name, bzzz_command(), _env(work / name, extra), work / f"{name}.log")
        for name, extra in CONFIGS.items()
    }
    try:
        for server in servers.values():
            server.wait_healthy()
        return await _rounds(servers, calls, rounds)
    finally:
        for server in servers.values():
            server.stop()


async def _rounds(servers: dict[str, ServerProcess], calls: int, rounds: int) -> dict[str, Any]:
    post = {
        "target_address": "bzzz://bench-agent",
        "message_type": "text",
        "content": {"text": TEXT},
    }
    get = {"address": "bzzz://bench-agent/inbox", "max_history": 10}
    per_round: dict[str, list[dict[str, Any]]] = {
        f"{name}:{tool}": [] for name in servers for tool in ("bzzz_post", "bzzz_get")
    }
    async with contextlib.AsyncExitStack() as stack:
        sessions = {
            name: await stack.enter_async_context(mcp_session(server.url))
            for name, server in servers.items()
        }
        for session in sessions.values():
            await announce_own(session, "bench-agent")
            await _timed(session, "bzzz_post", post, min(200, calls))  # warm-up
            await _timed(session, "bzzz_get", get, min(200, calls))
        for n in range(rounds):
            busy = wait_for_quiet(20.0)
            # Each round starts from another server, so none always runs first.
            names = list(sessions)
            order = names[n % len(names) :] + names[: n % len(names)]
            for name in order:
                for tool, arguments in (("bzzz_post", post), ("bzzz_get", get)):
                    figure = await _timed(sessions[name], tool, arguments, calls, servers[name])
                    figure["machine_busy_pct_before"] = busy
                    per_round[f"{name}:{tool}"].append(figure)
                    print(f"round {n + 1} {name:6} {tool:9} {figure['per_s']:8.1f}/s", flush=True)
    return _summary(per_round)


def _summary(per_round: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    summary: dict[str, Any] = {"rounds": per_round}
    for tool in ("bzzz_post", "bzzz_get"):
        clear = per_round[f"clear:{tool}"]
        for name in CONFIGS:
            if name != "clear":
                summary[f"{name}:{tool}"] = _against(per_round[f"{name}:{tool}"], clear)
    return summary


def _against(runs: list[dict[str, Any]], clear: list[dict[str, Any]]) -> dict[str, Any]:
    """One configuration against the clear one: rates, their ratio per round, CPU per call."""
    rates, baseline = [r["per_s"] for r in runs], [r["per_s"] for r in clear]
    ratios = [a / b for a, b in zip(rates, baseline, strict=True)]
    cpu = statistics.median(r["server_cpu_ms_per_call"] for r in runs)
    clear_cpu = statistics.median(r["server_cpu_ms_per_call"] for r in clear)
    return {
        "per_s": statistics.mean(rates),
        "clear_per_s": statistics.mean(baseline),
        "ratio": statistics.mean(rates) / statistics.mean(baseline),
        "ratio_median": statistics.median(ratios),
        "ratio_min": min(ratios),
        "ratio_max": max(ratios),
        "p50_ms": statistics.median(r["p50_ms"] for r in runs),
        "clear_p50_ms": statistics.median(r["p50_ms"] for r in clear),
        "cpu_ms": cpu,
        "clear_cpu_ms": clear_cpu,
        "cpu_ratio": clear_cpu / cpu,
    }


# --- 2. catch-up ---------------------------------------------------------------------------------


def _payload(n: int) -> dict[str, Any]:
    return {
        "message_id": f"msg-bench-{n:08d}",
        "sender": "source",
        "target_address": "bzzz://sink",
        "message_type": "data",
        "content": {"n": n, "text": TEXT},
        "priority": "medium",
        "thread_id": None,
        "reply_to": None,
        "recipients": ["sink"],
        "task_id": None,
    }


async def _fill(url: str, count: int, keyring: Keyring | None) -> tuple[int, float]:
    """Publish ``count`` posts (sealed with ``keyring`` when given); stored, seconds to seal."""
    bus = JetStreamBus([url], "main")
    await bus.start()  # the network's stream, as a node creates it
    await bus.close()
    identity = NodeIdentity.generate()
    nc = await nats.connect(url)
    js = nc.jetstream(timeout=30)
    sealing = 0.0
    for n in range(count):
        t0 = time.perf_counter()
        env = seal(
            identity, "main", "message.posted", "bzzz.main.msg.source", _payload(n), keyring=keyring
        )
        sealing += time.perf_counter() - t0
        await js.publish_async(env.subject, env.to_bytes(), headers={"Nats-Msg-Id": env.id})
        if n % 5000 == 4999:
            await js.publish_async_completed()
    await js.publish_async_completed()
    stored = int((await js.stream_info(stream_name("main"))).state.messages)
    await nc.close()
    return stored, sealing


async def catch_up(work: Path, count: int, sealed: bool) -> dict[str, Any]:
    """A brand-new node starts on a log of ``count`` posts and applies all of it."""
    name = "sealed" if sealed else "clear"
    secret = new_secret()
    keyring = Keyring([NetworkKey.of(secret)]) if sealed else None
    cipher = "chachapoly" if sealed else "none"
    async with EmbeddedNats(work / f"catchup-{name}-nats", cipher=cipher) as server:
        stored, sealing = await _fill(server.client_url, count, keyring)
        settings = load_settings(
            environ={},
            overrides={
                "node": {"data_dir": str(work / f"catchup-{name}-node")},
                "bzzz": {"nats_url": [server.client_url]},
                "encryption": {"enabled": sealed, "key": encode_secret(secret)},
            },
        )
        wait_for_quiet(20.0)
        nats_pids = [server.server_pid] if server.server_pid is not None else []
        nats0, node0 = cpu_seconds(nats_pids), time.process_time()
        started = time.perf_counter()
        async with Node(settings, catch_up_timeout=3600) as node:
            elapsed = time.perf_counter() - started
            node_cpu, nats_cpu = time.process_time() - node0, cpu_seconds(nats_pids) - nats0
            applied = node.projector.applied_sequence
            rejected = dict(node.projector.rejected)
    result = {
        "envelopes_in_log": stored,
        "applied": applied,
        "rejected": rejected,
        "node_start_and_catch_up_s": elapsed,
        "node_per_s": applied / elapsed,
        # CPU per envelope: the node (all its threads) and the nats-server delivering the log.
        "node_cpu_us_per_envelope": 1e6 * node_cpu / applied,
        "nats_cpu_us_per_envelope": 1e6 * nats_cpu / applied,
        "sealing_us_per_envelope": 1e6 * sealing / count,
    }
    print(
        f"catch-up {name:6} {result['node_per_s']:8.0f} env/s ({elapsed:.1f} s); CPU per envelope"
        f" node {result['node_cpu_us_per_envelope']:.0f} us, nats-server"
        f" {result['nats_cpu_us_per_envelope']:.0f} us",
        flush=True,
    )
    return result


# --- the run ---------------------------------------------------------------------------------


async def main(args: argparse.Namespace) -> dict[str, Any]:
    results: dict[str, Any] = {
        "benchmark": "encryption",
        "command": " ".join(sys.argv),
        "machine": machine(),
        "code": code_version(),
    }
    with tempfile.TemporaryDirectory(prefix="bzzz-bench-enc-") as tmp:
        work = Path(tmp)
        if args.rounds:
            results["rates"] = await rates(work, args.calls, args.rounds)
        if args.catchup:
            # Clear first, then sealed, then clear again when asked: drift shows up.
            runs = [False, True] + ([False, True] if args.catchup_rounds > 1 else [])
            figures: dict[str, list[dict[str, Any]]] = {"clear": [], "sealed": []}
            for n, sealed in enumerate(runs):
                figure = await catch_up(work / f"r{n}", args.catchup, sealed)
                figures["sealed" if sealed else "clear"].append(figure)
            results["catch_up"] = figures | {
                "ratio": statistics.mean(f["node_per_s"] for f in figures["sealed"])
                / statistics.mean(f["node_per_s"] for f in figures["clear"])
            }
    return results


def _print(results: dict[str, Any]) -> None:
    rates_ = results.get("rates")
    if rates_:
        for key, r in rates_.items():
            if key == "rounds":
                continue
            print(
                f"{key:24} {r['per_s']:7.1f}/s vs clear {r['clear_per_s']:7.1f}/s"
                f"  ratio {r['ratio']:.3f} (median {r['ratio_median']:.3f},"
                f" {r['ratio_min']:.3f}-{r['ratio_max']:.3f})"
                f"  p50 {r['p50_ms']:.2f} / {r['clear_p50_ms']:.2f} ms"
                f"  server CPU {r['cpu_ms']:.2f} / {r['clear_cpu_ms']:.2f} ms/call"
                f" (clear/this {r['cpu_ratio']:.3f})"
            )
    catch = results.get("catch_up")
    if catch:
        print(f"catch-up ratio sealed / clear {catch['ratio']:.3f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=1000, help="calls per tool per round")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds (0: skip)")
    parser.add_argument("--catchup", type=int, default=100_000, help="envelopes (0: skip)")
    parser.add_argument("--catchup-rounds", type=int, default=1, help="1 or 2 runs each way")
    parser.add_argument("--json", type=Path, default=RESULTS / "encryption.json")
    arguments = parser.parse_args()
    outcome = asyncio.run(main(arguments))
    _print(outcome)
    arguments.json.parent.mkdir(parents=True, exist_ok=True)
    arguments.json.write_text(json.dumps(outcome, indent=2) + "\n")
    print(f"wrote {arguments.json}")
