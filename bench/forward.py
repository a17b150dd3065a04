"""Forwarded post vs local post: p50/p99 of ``bzzz_post`` through the front door.

One nats-server (the embedded one, ``sync_interval: always``), two nodes in this process, each
with its own data directory, store, consumer and identity: A serves ``p1``, B serves ``p2``.
The same post to B's agent ``w-2@p2`` is made on B itself (local) and on A (forwarded over
NATS request/reply to B, which runs it); the two alternate, one at a time, so both see the same
machine. Reads of the agent's inbox are timed the same way. Figures are service-layer calls
(``node.front``, what the MCP tool and the REST route call), without HTTP.

Then the wire's own parts, one at a time on the same nodes: sealing and signing a forwarded
post's request, opening and verifying it, the same for an inbox read's answer (10 messages), with
the network key and without it (what sealing adds), and claiming a request id in the network's
record (the KV bucket's create-only key).

    .venv/bin/python bench/forward.py [--posts 1000] [--json bench/results/forward.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from bzzz.config import load_settings
from bzzz.eventlog import Caller
from bzzz.network.embedded import EmbeddedNats
from bzzz.network.forward import ONCE_TTL, ForwardRequest, ForwardWire, WireCaller, WirePrincipal
from bzzz.network.once import JetStreamOnce
from bzzz.network.sealing import encode_secret, new_secret
from bzzz.node import admin as node_admin
from bzzz.node.core import Node
from bzzz.principal import Principal, Scope
from bzzz.schemas import AnnounceInput, GetInput, PostInput

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchutil import code_version, machine, percentile

RESULTS = Path(__file__).resolve().parent / "results"
NETWORK_KEY = encode_secret(new_secret())
OWNER = Caller(
    "principal-bench",
    Principal(
        "token:bench", "token", frozenset({"p1", "p2"}), frozenset({"*"}), Scope.WRITE, "bench"
    ),
)


def _settings(data_dir: Path, url: str, project: str) -> Any:
    return load_settings(
        environ={},
        overrides={
            "node": {"data_dir": str(data_dir)},
            "bzzz": {"nats_url": [url], "projects": [project]},
            "encryption": {"key": NETWORK_KEY},
        },
    )


def _post(agent_id: str, n: int) -> PostInput:
    return PostInput(
        target_address="bzzz://w-2@p2",
        message_type="text",
        content={"text": f"message {n}"},
        agent_id=agent_id,
    )


def _figures(ms: list[float]) -> dict[str, float]:
    ordered = sorted(ms)
    return {
        "p50_ms": round(percentile(ordered, 50), 3),
        "p99_ms": round(percentile(ordered, 99), 3),
        "mean_ms": round(sum(ordered) / len(ordered), 3),
        "max_ms": round(ordered[-1], 3),
    }


async def _timed(call: Callable[[], Awaitable[Any]]) -> float:
    started = time.perf_counter()
    await call()
    return (time.perf_counter() - started) * 1000


async def measure(url: str, work: Path, posts: int) -> dict[str, Any]:
    """Local and forwarded posts and inbox reads, alternating."""
    async with (
        Node(_settings(work / "a", url, "p1")) as a,
        Node(_settings(work / "b", url, "p2")) as b,
    ):
        # A admitted itself (the network's first node); it admits B as `bzzz node admit` does.
        key = b.identity.public_key_b64
        await node_admin.admit(a.settings, key)
        for node in (a, b):
            await node.projector.wait_until(lambda n=node: key in n.projector.admission.members, 30)
        await a.agents.announce(OWNER, AnnounceInput(agent_id="s-1", role="dev", project="p1"))
        await b.agents.announce(OWNER, AnnounceInput(agent_id="s-2", role="dev", project="p2"))
        await b.agents.announce(OWNER, AnnounceInput(agent_id="w-2", role="dev", project="p2"))
        inbox = GetInput(address="bzzz://w-2@p2/inbox", max_history=10)
        times: dict[str, list[float]] = {k: [] for k in ("post", "fwd_post", "get", "fwd_get")}
        warm = 50
        for n in range(posts + warm):
            sample = {
                "post": await _timed(lambda n=n: b.front.post(OWNER, _post("s-2", n))),
                "fwd_post": await _timed(lambda n=n: a.front.post(OWNER, _post("s-1", n))),
                "get": await _timed(lambda: b.front.get(OWNER, inbox)),
                "fwd_get": await _timed(lambda: a.front.get(OWNER, inbox)),
            }
            if n >= warm:
                for key, value in sample.items():
                    times[key].append(value)
        forwarding = a.front.status()
        wire = await _wire_parts(a, b, await b.front.get(OWNER, inbox), posts)
    figures = {key: _figures(values) for key, values in times.items()}
    return {
        "posts": posts,
        "local_post": figures["post"],
        "forwarded_post": figures["fwd_post"],
        "local_inbox_read": figures["get"],
        "forwarded_inbox_read": figures["fwd_get"],
        "forwarded_post_p99_over_local_p99": round(
            figures["fwd_post"]["p99_ms"] / figures["post"]["p99_ms"], 2
        ),
        "forwarded_post_p50_over_local_p50": round(
            figures["fwd_post"]["p50_ms"] / figures["post"]["p50_ms"], 2
        ),
        "forwarding_counts_on_a": forwarding,
        "wire_parts_us": wire,
    }


def _us(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {"p50": round(percentile(ordered, 50), 1), "p99": round(percentile(ordered, 99), 1)}


async def _wire_parts(a: Node, b: Node, answer: dict[str, Any], n: int) -> dict[str, Any]:
    """Microseconds of each part of a forwarded call's wire, sealed and clear; an id's claim."""
    admits = a.projector.admission.admits
    parts: dict[str, dict[str, float]] = {}
    for label, keyring in (("sealed", a.keyring), ("clear", None)):
        mine = ForwardWire(a.identity, a.network, admits, keyring)
        theirs = ForwardWire(b.identity, b.network, admits, keyring)
        times: dict[str, list[float]] = {k: [] for k in ("request", "open", "answer", "result")}
        for i in range(n):
            body = ForwardRequest(
                id=f"bench-{label}-{i}",
                network=a.network,
                project="p2",
                op="post",
                params=_post("s-1", i).model_dump(mode="json"),
                caller=WireCaller(
                    session_id=OWNER.session_id, principal=WirePrincipal.of(OWNER.principal)
                ),
                sender="s-1",
                reply=a.bus.new_inbox(),
                origin=a.node_id,
                origin_key=a.identity.public_key_b64,
                at=time.time(),
            )
            started = time.perf_counter()
            data = mine.request(body)
            opened_at = time.perf_counter()
            theirs.open_request(data)
            answered_at = time.perf_counter()
            sent = theirs.answer_ok(body.id, answer)
            read_at = time.perf_counter()
            mine.result_of(sent, body.id)
            done = time.perf_counter()
            times["request"].append((opened_at - started) * 1e6)
            times["open"].append((answered_at - opened_at) * 1e6)
            times["answer"].append((read_at - answered_at) * 1e6)
            times["result"].append((done - read_at) * 1e6)
        parts[label] = {k: _us(v) for k, v in times.items()} | {
            "answer_bytes": len(sent),
            "request_bytes": len(data),
        }
    used = JetStreamOnce(b.bus.client, b.network, ONCE_TTL)  # type: ignore[attr-defined]
    claims: list[float] = []
    for i in range(n):
        started = time.perf_counter()
        await used.claim(f"bench-claim-{i}")
        claims.append((time.perf_counter() - started) * 1e6)
    return parts | {"claim_id": _us(claims)}


async def main() -> None:
    """Run the measurement and write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--posts", type=int, default=1000)
    parser.add_argument("--json", type=Path, default=RESULTS / "forward.json")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    with tempfile.TemporaryDirectory(prefix="bzzz-fwd-bench-") as tmp:
        work = Path(tmp)
        async with EmbeddedNats(work / "server") as server:
            results = await measure(server.client_url, work, args.posts)
    report = {"bench": "forward", "machine": machine(), "code": code_version(), **results}
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(report, indent=2) + "\n")
    sys.stdout.write(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    asyncio.run(main())
