"""Projects spread over several streams by the engine's own partitioning.

A network's log is one stream, ``BZZZ_<NETWORK>``, which every node consumes (through its
filter) in one order. When the servers partition project subjects, a project's envelopes are
written to one of N partition streams instead, and the network's stream copies them in (a
JetStream *source*): the writes of a busy network are spread over N stream leaders — each
server of a cluster leads some — while every node still reads one log in one order.

The partition is the engine's: a subject mapping on the servers, ``MAPPING_SOURCE`` to
``mapping_destination(N)`` (``{{partition(N, 2)}}``: an FNV-1a hash of the project token,
modulo N). A publish on ``bzzz.<network>.p.<project>.<kind>.<key>`` is mapped to
``bzzz.<network>.part.<k>.<project>.<kind>.<key>``, which only partition ``k``'s stream
captures; that stream stores it under its original subject again (a stream subject
transform), so every reader sees the subjects it always saw. The mapping lives in the server
configuration (the embedded server writes it from ``bzzz.partitions``) and serves every network
alike; nodes do not choose N, they ask the servers (``probe``, on subjects no stream stores): a
node never writes a project's envelope anywhere but where the engine puts it.

Nothing is ordered twice: the partition streams only hold what they took until the network's
stream has it; erasure and retention remove both copies (``source_bounds``, ``copy_of``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import secrets
from collections.abc import Sequence

from nats.aio.client import Client as NatsClient
from nats.errors import Error as NatsError
from nats.js import JetStreamContext
from nats.js.api import (
    RetentionPolicy,
    StorageType,
    StreamConfig,
    StreamSource,
    SubjectTransform,
)
from nats.js.errors import NotFoundError

from bzzz.errors import NetworkError
from bzzz.network import subjects

logger = logging.getLogger(__name__)

PART = "part"  # the token after the network on a mapped (partitioned) subject
# Every network's project subjects, whatever the network (one mapping line serves them all).
MAPPING_SOURCE = f"bzzz.*.{subjects.PROJECT}.*.>"
MAX_PARTITIONS = 64
# The probe's project tokens: enough that exactly one N agrees with where the servers put them.
PROBES = 96
PROBE_WAIT = 2.0
# Probes go out again this many times in all when none came back (a busy server).
PROBE_TRIES = 3


def mapping_destination(partitions: int) -> str:
    """Where the servers map ``MAPPING_SOURCE`` to spread projects over ``partitions`` streams."""
    split = f"{{{{partition({partitions},2)}}}}"
    return f"bzzz.{{{{wildcard(1)}}}}.{PART}.{split}.{{{{wildcard(2)}}}}.>"


def mapping_config(partitions: int) -> list[str]:
    """The nats-server configuration lines of the mapping (none for one partition)."""
    if partitions <= 1:
        return []
    return ["mappings {", f'  "{MAPPING_SOURCE}": "{mapping_destination(partitions)}"', "}"]


def fnv1a32(text: str) -> int:
    """The 32-bit FNV-1a hash of ``text``'s UTF-8 bytes (the engine's ``partition``)."""
    value = 0x811C9DC5
    for byte in text.encode():
        value = ((value ^ byte) * 0x01000193) & 0xFFFFFFFF
    return value


def partition_of(token: str, partitions: int) -> int:
    """The partition the servers put a project token in (``subjects.subject_token``)."""
    return fnv1a32(token) % partitions


def stream_name(network: str, index: int) -> str:
    """Partition ``index``'s stream (``BZZZP_``: no network's own stream is named so)."""
    return f"BZZZP_{network.replace('-', '_').upper()}_{index}"


def log_subjects(network: str, partitions: int) -> list[str]:
    """What the network's stream captures: everything, or with partitions all but the
    partitioned project subjects (network-wide kinds, and the older layout's project kinds)."""
    if partitions <= 1:
        return [f"bzzz.{network}.>"]
    kinds = sorted(subjects.NETWORK_KINDS | subjects.PROJECT_KINDS)
    return [f"bzzz.{network}.{kind}.>" for kind in kinds]


def log_sources(network: str, partitions: int) -> list[StreamSource] | None:
    """The partition streams the network's stream copies in (None without partitions)."""
    if partitions <= 1:
        return None
    return [StreamSource(name=stream_name(network, k)) for k in range(partitions)]


def partition_config(network: str, index: int, *, replicas: int) -> StreamConfig:
    """Partition ``index``'s stream: takes its mapped subjects, stores them as published."""
    mapped = f"bzzz.{network}.{PART}.{index}"
    return StreamConfig(
        name=stream_name(network, index),
        # Project, kind and key at least: the probe's shorter subjects are never stored.
        subjects=[f"{mapped}.*.*.>"],
        subject_transform=SubjectTransform(
            src=f"{mapped}.*.>", dest=f"bzzz.{network}.{subjects.PROJECT}.{{{{wildcard(1)}}}}.>"
        ),
        retention=RetentionPolicy.LIMITS,
        storage=StorageType.FILE,
        num_replicas=replicas,
        duplicate_window=120.0,
    )


async def probe(nc: NatsClient) -> int:
    """How many partitions the servers spread every network's projects over (1: none).

    ``_probe_once`` again while no probe came back, PROBE_TRIES times in all.
    """
    for _ in range(PROBE_TRIES - 1):
        try:
            return await _probe_once(nc)
        except _NoneBack:
            logger.info("no probe came back from the servers; probing again")
    return await _probe_once(nc)


class _NoneBack(ValueError):
    """No probe came back within PROBE_WAIT."""


async def _probe_once(nc: NatsClient) -> int:
    """How many partitions the servers spread every network's projects over (1: none).

    Publishes ``PROBES`` core messages on the project subjects of a network no node can have
    (``~`` is no network id's: no stream captures them, mapped or not) and listens where the
    mapping (if any) sends them; the one N with which ``partition_of`` puts every probe where
    the servers did is the answer. Raises ValueError when the servers' mapping is not this one
    (no N agrees).
    """
    network = f"~{secrets.token_hex(6)}"
    nonce = "probe"
    heard: dict[str, int | None] = {}
    done = asyncio.Event()

    async def mapped(msg: object) -> None:
        parts = msg.subject.split(".")  # type: ignore[attr-defined]
        heard[parts[4]] = int(parts[3]) if parts[3].isdigit() else -1
        if len(heard) >= PROBES:
            done.set()

    async def unmapped(msg: object) -> None:
        heard[msg.subject.split(".")[3]] = None  # type: ignore[attr-defined]
        if len(heard) >= PROBES:
            done.set()

    subs = [
        await nc.subscribe(f"bzzz.{network}.{PART}.*.*.{nonce}", cb=mapped),
        await nc.subscribe(f"bzzz.{network}.{subjects.PROJECT}.*.{nonce}", cb=unmapped),
    ]
    try:
        await nc.flush()
        tokens = [f"t{i}" for i in range(PROBES)]
        for token in tokens:
            await nc.publish(f"bzzz.{network}.{subjects.PROJECT}.{token}.{nonce}", b"")
        await nc.flush()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(PROBE_WAIT):
                await done.wait()
    finally:
        for sub in subs:
            with contextlib.suppress(NatsError):
                await sub.unsubscribe()
    return _agreeing(heard, tokens)


def _agreeing(heard: dict[str, int | None], tokens: Sequence[str]) -> int:
    if not heard:
        raise _NoneBack("no probe came back: the servers did not deliver this node's messages")
    if all(value is None for value in heard.values()):
        return 1
    if any(value is None or value < 0 for value in heard.values()):
        raise ValueError("the servers map some project subjects and not others")
    for n in range(2, MAX_PARTITIONS + 1):
        if all(heard[t] == partition_of(t, n) for t in tokens if t in heard):
            return n
    raise ValueError(
        f"the servers map project subjects, but not as {MAPPING_SOURCE} -> "
        f"{mapping_destination(2).replace('(2,', '(N,')} with N <= {MAX_PARTITIONS}"
    )


def copy_of(headers: dict[str, str] | None) -> tuple[str, int] | None:
    """(stream, sequence) of the partition's copy of an envelope the network's stream took
    from it (JetStream's ``Nats-Stream-Source`` header); None for one published there."""
    source = (headers or {}).get("Nats-Stream-Source")
    if not source:
        return None
    parts = source.split(" ")
    if len(parts) < 2 or not parts[1].isdigit() or not parts[0].startswith("BZZZP_"):
        return None
    return parts[0], int(parts[1])


def source_bounds(headers: Sequence[dict[str, str] | None]) -> dict[str, int]:
    """Per partition stream, the sequence below which every copy is one of these envelopes'
    or older: given the headers of envelopes the network's stream took from its partitions
    (in log order), one past the newest copy of each. Partitions are copied in their order,
    so what a partition holds below that is in the network's stream, at or before them."""
    bounds: dict[str, int] = {}
    for one in headers:
        copy = copy_of(one)
        if copy is not None:
            stream, seq = copy
            bounds[stream] = max(bounds.get(stream, 0), seq + 1)
    return bounds


async def ensure_log(
    js: JetStreamContext, network: str, stream: str, count: int, replicas: int
) -> None:
    """The network's stream ``stream`` and, with ``count`` partitions, theirs.

    A network whose servers now partition projects (or into more streams) keeps its log:
    the stream stops capturing project subjects and copies them in from the partitions.
    """
    config = StreamConfig(
        name=stream,
        subjects=log_subjects(network, count),
        sources=log_sources(network, count),
        retention=RetentionPolicy.LIMITS,
        storage=StorageType.FILE,
        num_replicas=replicas,
        duplicate_window=120.0,
    )
    try:
        info = await js.stream_info(stream)
    except NotFoundError:
        await js.add_stream(config)
        logger.info("created stream %s (replicas=%d)", stream, replicas)
    else:
        await _update_log(js, network, info.config, config)
    made = False
    for index in range(count if count > 1 else 0):
        wanted = partition_config(network, index, replicas=replicas)
        name = wanted.name or ""
        try:
            have = await js.stream_info(name)
        except NotFoundError:
            await js.add_stream(wanted)
            made = True
            continue
        if list(have.config.subjects or []) != wanted.subjects:
            raise _collision(network, name, have.config.subjects)
    if made and replicas > 1:
        await spread_leaders(js, network, stream, count)


async def spread_leaders(js: JetStreamContext, network: str, stream: str, count: int) -> None:
    """Ask the servers to hand the partitions' leadership round the cluster, starting after
    the log's leader (the engine placed them at random; several may share one server).
    Best effort: a server that does not move a leader leaves it where it is."""
    log = await js.stream_info(stream)
    if log.cluster is None or not log.cluster.leader:
        return
    replicas = [str(r.name) for r in log.cluster.replicas or [] if r.name]
    servers = sorted({log.cluster.leader, *replicas})
    start = servers.index(log.cluster.leader) + 1
    for index in range(count):
        name = stream_name(network, index)
        preferred = servers[(start + index) % len(servers)]
        try:
            info = await js.stream_info(name)
            if info.cluster is None or info.cluster.leader == preferred:
                continue
            request = json.dumps({"placement": {"preferred": preferred}}).encode()
            # nats-py has no call for a stepdown with a preferred server: the API's own request.
            await js._nc.request(f"$JS.API.STREAM.LEADER.STEPDOWN.{name}", request, timeout=5)
        except (NatsError, TimeoutError) as exc:
            logger.info("the leader of %s stays where it is (%r)", name, exc)


async def _update_log(
    js: JetStreamContext, network: str, have: StreamConfig, wanted: StreamConfig
) -> None:
    captured = list(have.subjects or [])
    sources = {source.name for source in have.sources or []}
    wanted_sources = {source.name for source in wanted.sources or []}
    if captured == wanted.subjects and sources == wanted_sources:
        return
    if not all(subject.startswith(f"bzzz.{network}.") for subject in captured):
        # Network ids that differ only by case or -/_ map to one stream name: refuse to
        # share it rather than read or write another network's log.
        raise _collision(network, wanted.name or "", captured)
    if sources and not wanted_sources:
        raise NetworkError(
            f"the log of network {network!r} takes projects from {len(sources)} partition "
            f"streams, but the servers no longer partition them: restore their subject "
            f"mapping ({MAPPING_SOURCE})",
            details={"stream": wanted.name, "partitions": sorted(sources)},
        )
    # Partitions a smaller mapping no longer writes to are still copied in.
    kept = [s for s in have.sources or [] if s.name not in wanted_sources]
    wanted.sources = [*(wanted.sources or []), *kept] or None
    await js.update_stream(wanted)
    logger.warning(
        "stream %s now takes project subjects from %d partition streams",
        wanted.name,
        len(wanted.sources or []),
    )


def _collision(network: str, stream: str, captured: Sequence[str] | None) -> NetworkError:
    return NetworkError(
        f"network id {network!r} collides with the stream {stream} of another network "
        f"({', '.join(captured or [])}); choose another network id",
        details={"stream": stream},
    )
