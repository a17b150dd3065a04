"""The cost of the access checks (issue 11): bzzz_post and bzzz_lookup, auth off, tokens and JWT.

One run spawns three `bzzz serve` processes, each with its own temporary data directory and free
loopback port:

- ``off``: the loopback default, no credential; every caller is the anonymous principal;
- ``tokens``: ``BZZZ_AUTH_TOKENS=<admin secret>``, and a write token of project ``bench`` minted
  with ``bzzz token create bench --project bench --json`` (the CLI joins the running node);
- ``jwt``: ``BZZZ_AUTH_ISSUER`` / ``BZZZ_AUTH_AUDIENCE`` of a JWT issuer on loopback (the tests'
  ``JwtIssuer``, imported from tests/access/issuer.py), clients send a JWT with the scopes
  ``bzzz:write bzzz:project:bench``.

The clients are the official MCP client over streamable HTTP, as asyncio tasks in this process,
all made by the SDK's own ``create_mcp_http_client`` (the credential, if any, in its headers): the
legacy handshake (``ClientSession``, one session per client, as bench/mcp_throughput.py does)
and the sessionless 2026-07-28 default ``mcp.Client``. Every server gets the same population of
50 agents in project ``bench`` and the same calls: a post from an announced agent to one of the
population, a lookup of ``bzzz://*:reviewer@*`` (25 matches on every server: checked first).
A sessionless post names its agent (``agent_id``) and passes the ``agent_handle`` bzzz_announce
returned, on every server alike (with a credential the principal holds the agent anyway).

Each (protocol, clients, tool) runs in ``--rounds`` rounds; a round measures the three servers
one after another, in an order that rotates from round to round, so that the machine's drift
hits them alike. The ratios tokens/off and jwt/off are over all rounds, with their spread over
the rounds beside them; the server's CPU per call says what the checks cost directly.

    .venv/bin/python bench/auth_overhead.py [--calls 1000] [--rounds 3] [--profile]

Prints a table and writes bench/results/auth_overhead.json. ``--profile`` samples the servers
with py-spy in each configuration's first round (bench/results/profile_auth_*.folded / .txt).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
from mcp import Client
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from ulid import ULID

import profile_summary
from benchutil import code_version, machine, wait_for_quiet
from bzzz.access.jwt import JwtPrincipals, JwtVerifier
from bzzz.access.service import AccessService, bearer_of
from bzzz.access.tokens import TokenRegistry, mint_secret, secret_hash
from bzzz.network.envelope import Envelope
from mcp_throughput import (
    CAPABILITIES,
    LOOKUP_ADDRESS,
    OTHER_ROLES,
    POPULATION,
    RESULTS,
    ClientRun,
    Figures,
    Meter,
    Plan,
    Round,
    ServerProcess,
    Workload,
    bzzz_command,
    bzzz_env,
    healthy,
    measure,
    summarize,
    warm_up,
)

REPO = Path(__file__).resolve().parent.parent
SERVERS = ("off", "tokens", "jwt")
TOOLS = ("bzzz_post", "bzzz_lookup")
PROTOCOLS = ("legacy", "stateless")
PROJECT = "bench"
JWT_SCOPES = ["bzzz:write", f"bzzz:project:{PROJECT}"]
MAX_CLIENTS = 8
TARGET = 0.9
# Sessionless agents are announced once per server and must stay online for the whole run.
LEASE_SECONDS = "7200"


# --- servers -----------------------------------------------------------------------------------


@dataclass(slots=True)
class Server:
    """One spawned `bzzz serve`, the credential its clients send, and its sessionless agents."""

    name: str
    process: ServerProcess
    token: str | None = None
    issuer: str | None = None  # the JWT server's issuer URL
    senders: tuple[tuple[str, str], ...] = ()  # (agent_id, agent_handle) per sessionless client

    def headers(self) -> dict[str, str] | None:
        """The clients' Authorization header."""
        return {"Authorization": f"Bearer {self.token}"} if self.token else None


def load_issuer() -> Any:
    """The tests' JWT issuer class and audience (tests/access/issuer.py, imported, not copied)."""
    sys.path.insert(0, str(REPO / "tests"))
    from access.issuer import AUDIENCE, JwtIssuer

    return JwtIssuer, AUDIENCE


def bzzz_script(*args: str) -> list[str]:
    """A `bzzz` command line of this interpreter's environment."""
    serve = bzzz_command()
    return [*serve[:-1], *args]


def spawn(name: str, data_dir: Path, **extra: str) -> ServerProcess:
    """`bzzz serve` on a fresh data directory (not yet waited for)."""
    env = bzzz_env(data_dir) | {"BZZZ_AGENTS__LEASE_SECONDS": LEASE_SECONDS} | extra
    return ServerProcess(name, bzzz_command(), env, RESULTS / f"auth_{name}.log")


def mint_network_token(data_dir: Path) -> str:
    """`bzzz token create bench --project bench --json` on a running node's data directory."""
    done = subprocess.run(
        bzzz_script("token", "create", "bench", "--project", PROJECT, "--json"),
        env=bzzz_env(data_dir),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"bzzz token create failed: {done.stderr[-2000:]}")
    created: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return str(created["token"])


def refuses_anonymous(server: Server) -> None:
    """A node with auth on answers 401 to a request without a credential: the checks are on."""
    ping = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    headers = {"Accept": "application/json, text/event-stream"}
    status = httpx.post(server.process.url, json=ping, headers=headers, timeout=10).status_code
    if status != 401:
        raise RuntimeError(f"{server.name}: a call without a credential got {status}, not 401")


@contextlib.contextmanager
def running_servers(tmp: Path) -> Iterator[dict[str, Server]]:
    """The three servers, healthy, with their credentials; stopped (and the issuer) on exit."""
    issuer_class, audience = load_issuer()
    admin = secrets.token_urlsafe(24)  # made per run: no secret in the repository
    with issuer_class() as issuer:
        processes = {
            "off": spawn("off", tmp / "off"),
            "tokens": spawn("tokens", tmp / "tokens", BZZZ_AUTH_TOKENS=admin),
            "jwt": spawn(
                "jwt", tmp / "jwt", BZZZ_AUTH_ISSUER=issuer.url, BZZZ_AUTH_AUDIENCE=audience
            ),
        }
        try:
            healthy(list(processes.values()))
            jwt = issuer.mint("bench", scopes=JWT_SCOPES, exp=24 * 3600)
            servers = {
                "off": Server("off", processes["off"]),
                "tokens": Server("tokens", processes["tokens"], mint_network_token(tmp / "tokens")),
                "jwt": Server("jwt", processes["jwt"], jwt, issuer.url),
            }
            for name in ("tokens", "jwt"):
                refuses_anonymous(servers[name])
            yield servers
        finally:
            for process in processes.values():
                process.stop()


# --- clients -----------------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def mcp_client(server: Server, protocol: str) -> AsyncIterator[Any]:
    """A client of ``server``: a legacy ``ClientSession`` (initialized) or the default Client."""
    http = create_mcp_http_client(headers=server.headers())
    transport = streamable_http_client(server.process.url, http_client=http)
    async with http:
        if protocol == "legacy":
            async with transport as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                yield session
        else:
            async with Client(transport) as client:
                yield client


async def answer(session: Any, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """A tool call that must succeed: its structured answer."""
    result = await session.call_tool(tool, arguments)
    body = dict(result.structured_content or {})
    if result.is_error or body.get("success") is False:
        raise RuntimeError(f"{tool} failed: {body or result.content}")
    return body


async def announce(session: Any, agent_id: str, role: str = "client") -> str:
    """Announce an agent in project ``bench``; its agent_handle."""
    args = {"agent_id": agent_id, "role": role, "project": PROJECT}
    body = await answer(session, "bzzz_announce", args)
    return str(body.get("agent_handle", ""))


async def populate(session: Any) -> None:
    """mcp_throughput's population (ids, roles, capabilities), all in project ``bench``."""
    for k in range(POPULATION):
        role = "reviewer" if k % 2 == 0 else OTHER_ROLES[k // 2 % len(OTHER_ROLES)]
        args: dict[str, Any] = {
            "agent_id": f"pop-{k:03d}",
            "role": role,
            "capabilities": [CAPABILITIES[(k + j) % len(CAPABILITIES)] for j in range(3)],
            "specialization": f"{CAPABILITIES[k % len(CAPABILITIES)]} reviews",
            "max_tasks": 5,
            "project": PROJECT,
        }
        await answer(session, "bzzz_announce", args)


async def sessionless_senders(server: Server) -> tuple[tuple[str, str], ...]:
    """The sessionless clients' agents, announced once (their lease outlasts the run)."""
    async with mcp_client(server, "stateless") as client:
        ids = [f"sl-{server.name}-{i}" for i in range(MAX_CLIENTS)]
        return tuple([(agent_id, await announce(client, agent_id)) for agent_id in ids])


@dataclass(frozen=True, slots=True)
class AuthWorkload(Workload):
    """mcp_throughput's calls; a sessionless post also names its agent and passes its handle."""

    senders: tuple[tuple[str, str], ...] = ()

    def arguments(self, client: int, call: int) -> dict[str, Any]:
        """The arguments of one call."""
        args = Workload.arguments(self, client, call)
        if self.tool == "bzzz_post" and self.senders:
            agent_id, handle = self.senders[client]
            args["agent_id"] = agent_id
            if handle:
                args["agent_handle"] = handle
        return args


# --- the checks alone, in this process -----------------------------------------------------------


def token_created(secret: str) -> Envelope:
    """A token.created envelope as the log carries it (unsigned: the registry reads its payload)."""
    payload = {
        "token_id": f"tok-{ULID()}",
        "name": "bench",
        "secret_hash": secret_hash(secret),
        "projects": [PROJECT],
        "roles": ["*"],
        "scope": "write",
        "created_by": "bench",
        "expires_at": None,
    }
    return Envelope(
        id=str(ULID()),
        network="main",
        origin="bench",
        origin_key="",
        type="token.created",
        subject=f"token.{payload['token_id']}",
        payload=payload,
        ts=datetime.now(UTC).isoformat(),
    )


async def per_call_us(check: Callable[[], Awaitable[object]], calls: int) -> float:
    """Microseconds per awaited call, after a warm-up of a tenth of the calls."""
    for _ in range(max(10, calls // 10)):
        await check()
    started = time.perf_counter()
    for _ in range(calls):
        await check()
    return round((time.perf_counter() - started) / calls * 1e6, 1)


async def check_floor(jwt_server: Server, calls: int) -> dict[str, float]:
    """What one request's check costs, in µs: ``AccessService.authenticate`` of a network token
    and of the run's JWT (the issuer's keys cached), and parts of the JWT's: ``bearer_of`` (the
    header's shape) and ``JwtVerifier.verify`` (header, signature, claims)."""
    secret, token = mint_secret(), jwt_server.token or ""
    registry = TokenRegistry()
    registry.on_applied([token_created(secret)])
    _, audience = load_issuer()
    async with JwtVerifier(jwt_server.issuer or "", audience) as verifier:
        access = AccessService(registry, [], required=True, jwt=JwtPrincipals(verifier))
        by_token, by_jwt = f"Bearer {secret}", f"Bearer {token}"

        async def bearer() -> object:
            return bearer_of(by_jwt)

        return {
            "token_authenticate": await per_call_us(lambda: access.authenticate(by_token), calls),
            "jwt_authenticate": await per_call_us(lambda: access.authenticate(by_jwt), calls),
            "jwt_bearer_of": await per_call_us(bearer, calls),
            "jwt_verify": await per_call_us(lambda: verifier.verify(token), calls),
        }


# --- rounds ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Config:
    """One measured configuration (run on each of the three servers)."""

    protocol: str
    clients: int
    tool: str


async def run_round(server: Server, config: Config, plan: Plan, tag: str) -> Round:
    """One round of ``config`` on ``server``: sessions, agents, warm-up, then measured calls."""
    per_client, warm = plan.share(config.clients)
    meter = Meter(server.process)
    async with contextlib.AsyncExitStack() as stack:
        sessions = [
            await stack.enter_async_context(mcp_client(server, config.protocol))
            for _ in range(config.clients)
        ]
        if config.protocol == "legacy":  # each session's own agent, as mcp_throughput
            for i, session in enumerate(sessions):
                await announce(session, f"bench-{tag}-{i}")
        senders = server.senders if config.protocol == "stateless" else ()
        workload = AuthWorkload("bzzz", config.tool, announce=True, senders=senders)
        async with asyncio.TaskGroup() as tg:
            for i, session in enumerate(sessions):
                tg.create_task(warm_up(session, workload, i, warm))
        deadline = time.monotonic() + plan.max_seconds / plan.rounds
        meter.start()
        async with asyncio.TaskGroup() as tg:
            tasks = [
                tg.create_task(measure(session, workload, i, per_client, deadline))
                for i, session in enumerate(sessions)
            ]
        meter.stop()
    runs: list[ClientRun] = [task.result() for task in tasks]
    return Round(runs, meter.cpu)


def profile_name(server: Server, config: Config) -> str:
    """bench/results/profile_auth_<server>_<tool>_<protocol>_<clients>.folded"""
    return f"profile_auth_{server.name}_{config.tool}_{config.protocol}_{config.clients}.folded"


async def run_config(
    servers: dict[str, Server], config: Config, plan: Plan, profile: bool, quiet_wait: float
) -> list[Figures]:
    """All rounds of one configuration; the servers' order rotates from round to round."""
    busy = await asyncio.to_thread(wait_for_quiet, quiet_wait) if quiet_wait else 0.0
    rounds: dict[str, list[Round]] = {name: [] for name in SERVERS}
    for n in range(plan.rounds):
        for name in SERVERS[n % 3 :] + SERVERS[: n % 3]:
            server = servers[name]
            tag = f"{config.protocol[0]}{config.clients}-{config.tool}-{n}"
            out = RESULTS / profile_name(server, config)
            with profile_summary.recording(
                server.process.proc.pid, out, enabled=profile and n == 0
            ):
                one = await run_round(server, config, plan, tag)
            one.busy_before_pct = busy if n == 0 else 0.0
            rounds[name].append(one)
    workload = Workload("bzzz", config.tool, announce=True)
    return [
        # summarize() labels by workload; "bzzz" keeps its nats-server CPU, then the server's name
        replace(summarize(workload, config.clients, config.protocol, rounds[name]), server=name)
        for name in SERVERS
    ]


async def prepare(servers: dict[str, Server], stack: contextlib.AsyncExitStack) -> None:
    """Populate every server (a legacy session kept open), announce the sessionless agents,
    and check that a lookup finds the same agents everywhere (the same work on each)."""
    found = {}
    for server in servers.values():
        session = await stack.enter_async_context(mcp_client(server, "legacy"))
        await populate(session)
        server.senders = await sessionless_senders(server)
        body = await answer(session, "bzzz_lookup", {"semantic_address": LOOKUP_ADDRESS})
        found[server.name] = sorted(m["id"] for m in body.get("matches") or [])
    if len({tuple(ids) for ids in found.values()}) != 1 or not found["off"]:
        raise RuntimeError(f"the servers' lookups differ: {found}")
    print(f"lookup {LOOKUP_ADDRESS}: {len(found['off'])} matches on every server", flush=True)


async def run_all(
    servers: dict[str, Server], plan: Plan, protocols: list[str], args: argparse.Namespace
) -> list[Figures]:
    """Every configuration (protocols, clients, tools), each on the three servers."""
    figures: list[Figures] = []
    async with contextlib.AsyncExitStack() as stack:
        await prepare(servers, stack)
        print(HEADER, flush=True)
        for protocol in protocols:
            for clients in args.clients:
                for tool in args.tools:
                    config = Config(protocol, clients, tool)
                    figs = await run_config(servers, config, plan, args.profile, args.quiet_wait)
                    for fig in figs:
                        print_row(fig)
                    figures += figs
    return figures


# --- report ------------------------------------------------------------------------------------

HEADER = (
    f"{'protocol':9} {'server':7} {'tool':12} {'clients':>7} {'calls':>6} {'err':>4} "
    f"{'calls/s':>8} {'p50 ms':>7} {'p99 ms':>7} {'srv ms/call':>11} {'others':>6}"
)


def print_row(fig: Figures) -> None:
    """One line of the table."""
    print(
        f"{fig.mode:9} {fig.server:7} {fig.tool:12} {fig.clients:>7} {fig.calls:>6} "
        f"{fig.errors:>4} {fig.calls_per_s:>8.1f} {fig.p50_ms:>7.2f} {fig.p99_ms:>7.2f} "
        f"{fig.server_cpu_ms_per_call:>11.3f} {fig.others_cpu_pct:>5.0f}%",
        flush=True,
    )
    if fig.first_error:
        print(f"    first error: {fig.first_error}", flush=True)


def ratio_entry(fig: Figures, base: Figures) -> dict[str, Any]:
    """One server's rate against auth off in the same configuration, over all rounds and each."""
    ratio = fig.calls_per_s / base.calls_per_s if base.calls_per_s else None
    by_round = sorted(
        round(ours / theirs, 3)
        for ours, theirs in zip(fig.round_rates, base.round_rates, strict=True)
        if theirs
    )
    return {
        "protocol": fig.mode,
        "clients": fig.clients,
        "tool": fig.tool,
        "server": fig.server,
        "rate_vs_off": round(ratio, 3) if ratio is not None else None,
        "rate_vs_off_by_round": by_round,
        "rate_vs_off_median_round": round(statistics.median(by_round), 3) if by_round else None,
        "target_met": ratio is not None and ratio >= TARGET,
        "p50_ms": fig.p50_ms,
        "p50_off_ms": base.p50_ms,
        "server_cpu_ms_per_call": fig.server_cpu_ms_per_call,
        "server_cpu_ms_per_call_off": base.server_cpu_ms_per_call,
        "errors": fig.errors,
    }


def verdicts(figures: list[Figures]) -> list[dict[str, Any]]:
    """tokens/off and jwt/off for every configuration."""
    off = {(f.mode, f.clients, f.tool): f for f in figures if f.server == "off"}
    return [
        ratio_entry(fig, off[(fig.mode, fig.clients, fig.tool)])
        for fig in figures
        if fig.server != "off"
    ]


def print_verdicts(entries: list[dict[str, Any]]) -> None:
    """The target, one line per configuration and server."""
    print(f"\ntarget: rate with auth >= {TARGET} x the rate without auth (same run)")
    for e in entries:
        spread = e["rate_vs_off_by_round"]
        line = (
            f"  {e['protocol']:9} {e['clients']} {e['tool']:12} {e['server']:6}/off "
            f"{e['rate_vs_off']}"
        )
        if len(spread) > 1:
            line += f" (rounds {spread[0]}-{spread[-1]}, median {e['rate_vs_off_median_round']})"
        line += " met" if e["target_met"] else " MISSED"
        cpu = e["server_cpu_ms_per_call"] - e["server_cpu_ms_per_call_off"]
        line += f"; server CPU/call {cpu:+.3f} ms"
        print(line)


def main() -> None:
    """Spawn the three servers, run every configuration, print and write the figures."""
    parser = argparse.ArgumentParser(description="bzzz_post and bzzz_lookup: auth on vs off")
    parser.add_argument("--calls", type=int, default=1000, help="measured calls per config")
    parser.add_argument("--warmup", type=int, default=100, help="warm-up calls per config")
    parser.add_argument("--max-seconds", type=float, default=120.0, help="bound per config")
    parser.add_argument("--rounds", type=int, default=3, help="rounds alternating the servers")
    parser.add_argument("--protocols", default=",".join(PROTOCOLS), help="legacy,stateless")
    parser.add_argument("--tools", default=",".join(TOOLS), help="bzzz_post,bzzz_lookup")
    parser.add_argument("--clients", default=f"1,{MAX_CLIENTS}", help="client counts: 1,8")
    parser.add_argument("--floor-calls", type=int, default=3000, help="in-process checks timed")
    parser.add_argument("--profile", action="store_true", help="py-spy the servers")
    parser.add_argument(
        "--quiet-wait",
        type=float,
        default=20.0,
        help="before each config, wait up to this many seconds for the machine to be idle",
    )
    parser.add_argument("--output", default=str(RESULTS / "auth_overhead.json"))
    args = parser.parse_args()
    args.tools = [t for t in args.tools.split(",") if t]
    args.clients = [min(MAX_CLIENTS, int(c)) for c in args.clients.split(",") if c]
    plan = Plan(args.calls, args.warmup, args.max_seconds, max(1, args.rounds))
    protocols = [p for p in args.protocols.split(",") if p]
    RESULTS.mkdir(parents=True, exist_ok=True)
    with (
        tempfile.TemporaryDirectory(prefix="bzzz-auth-bench-") as tmp,
        running_servers(Path(tmp)) as servers,
    ):
        floor = asyncio.run(check_floor(servers["jwt"], args.floor_calls))
        print(f"in-process cost of one check (AccessService.authenticate): {floor}", flush=True)
        figures = asyncio.run(run_all(servers, plan, protocols, args))
    entries = verdicts(figures)
    print_verdicts(entries)
    report = {
        "benchmark": "auth_overhead",
        "machine": machine(),
        "code": code_version(),
        "plan": asdict(plan),
        "population": POPULATION,
        "lookup_address": LOOKUP_ADDRESS,
        "target": TARGET,
        "profiled": args.profile,
        "check_floor_us": floor,
        "results": [asdict(f) for f in figures],
        "ratios": entries,
    }
    Path(args.output).write_text(json.dumps(report, indent=2))
    print(f"\nwrote {args.output}")


if __name__ == "__main__":
    main()
