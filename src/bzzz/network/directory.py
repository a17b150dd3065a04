"""The network's agent directory: a JetStream KV bucket with one compact entry per agent.

Bucket ``bzzz_dir_<network>`` (history 1, file storage, ``bzzz.stream_replicas`` replicas),
key ``<project token>.<agent token>`` (``subject_token`` of each; ``_`` for no project). An
entry is compact JSON of what a lookup shows and scores, signed by the node that writes it
(``{"e": entry, "k": its public key, "g": Ed25519 signature}``, the signature covering the
bucket, the key and the entry: an entry moved to another key or network no longer verifies).
Its serving node writes it with the
agent's lease as a per-message TTL (``Nats-TTL``) and writes it again before that runs out;
an entry not renewed expires, and the server leaves a delete marker
(``subject_delete_marker_ttl``) so watchers see an expiry as they see a removal. An agent that
went offline keeps an entry without TTL (status ``offline``), as the stores keep its row.

Reads: an agent's project by one batched direct get (``multi_last`` of ``*.<agent>``); a
project's agents from a view kept by a KV watch of ``<project>.*`` (bounded: at most
``max_views`` projects, each rebuilt after ``max_age`` seconds). ``InMemoryDirectory`` is the
same for unit tests.

Anyone holding the NATS login can put keys in the bucket, so nothing read from it is taken for
what it says: a value over ``MAX_ENTRY_BYTES`` (checked before parsing), not JSON, unsigned,
badly signed, signed for another key, signed by a node the network does not admit (``Signers``:
a node removed since is no longer taken, and the views are read again when the set changes) or
not an entry is left out of every answer and counted by reason (``rejected``); the good entries
are answered as if it were not there. The serving node's renewals write the real entry over it.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import math
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from bzzz import domain
from bzzz.errors import NetworkError
from bzzz.network.deliveries import still_wanted
from bzzz.network.identity import NodeIdentity, origin_of, verify_signature
from bzzz.projects import NO_PROJECT, subject_token

if TYPE_CHECKING:
    from nats.aio.client import Client as NatsClient
    from nats.aio.msg import Msg
    from nats.js.kv import KeyValue

logger = logging.getLogger(__name__)

MAX_VIEWS = 16
VIEW_MAX_AGE = 60.0
MARKER_TTL = 60.0
# A direct get answers at most this many messages a request (ADR-31).
DIRECT_BATCH = 1024
LISTED_PER_REQUEST = 256
# An entry's bound, checked before it is parsed: the largest an announce allows (64
# capabilities of 128 characters, 4 bytes each in UTF-8, a 256-character specialization and
# the ids) with its signature is about 36 KB.
MAX_ENTRY_BYTES = 64 * 1024
# How far the clocks of a writer and a reader may disagree about an entry's signed end (``x``):
# a renewed entry's end lies two thirds of a lease ahead of its writer's clock.
CLOCK_SKEW = 120.0
_GONE = ("DEL", "PURGE")
_SIGNED = b"bzzz.directory"  # what an entry's signature covers starts with this
_versions = itertools.count(1)


class EntryRejected(Exception):
    """A value of the bucket that is not a directory entry to take; ``reason`` is counted."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Signers(Protocol):
    """Whose entries the directory takes: the network's admitted nodes (``node/network.py``)."""

    def admits(self, public_key: str, node_id: str) -> bool:
        """Whether entries signed by that node are taken."""
        ...

    @property
    def changes(self) -> int:
        """A number that moves whenever the set does (the views are then read again)."""
        ...


def directory_bucket(network: str) -> str:
    """The KV bucket that holds a network's agent directory."""
    return f"bzzz_dir_{network}"


def entry_key(project: str | None, agent_id: str) -> str:
    """An agent's key: its project's token and its id's, each one legal subject token."""
    return f"{subject_token(project)}.{subject_token(agent_id)}"


def project_filter(project: str | None) -> str:
    """The keys of a project's agents (None: every agent)."""
    return "*.*" if project is None else f"{subject_token(project)}.*"


def _body(agent: domain.Agent) -> dict[str, Any]:
    """What lookups show and score of an agent, no session, owner or handle."""
    return {
        "i": agent.id,
        "r": agent.role,
        "c": agent.capabilities,
        "sp": agent.specialization,
        "m": agent.max_tasks,
        "p": agent.project,
        "t": agent.task,
        "s": agent.status,
        "a": agent.active_tasks,
        "ok": agent.tasks_completed,
        "f": agent.tasks_failed,
        "pf": agent.performance,
        "n": agent.node_id,
        "ca": agent.created_at.isoformat(),
        "la": agent.last_activity.isoformat(),
    }


def _signed_bytes(bucket: str, key: str, body: Any) -> bytes:
    """What an entry's signature covers: the bucket (so the network), the key, the entry."""
    entry = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return b"\n".join((_SIGNED, bucket.encode(), key.encode(), entry.encode()))


def encode(
    agent: domain.Agent, identity: NodeIdentity, bucket: str, ttl: float | None = None
) -> bytes:
    """An agent's entry as ``identity`` writes it in ``bucket``, signed; with ``ttl``, the
    time it runs out is signed with it (``x``, Unix seconds), so a copy put back later,
    without the TTL, is not taken past it."""
    body = _body(agent)
    if ttl is not None:
        body["x"] = math.ceil(time.time() + ttl)
    signature = identity.sign(_signed_bytes(bucket, entry_key(agent.project, agent.id), body))
    value = {"e": body, "k": identity.public_key_b64, "g": signature}
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def decode(data: bytes) -> domain.Agent:
    """The agent a stored value describes, unverified (tests and tools; reads use ``read``)."""
    return _agent(json.loads(data)["e"])


def _agent(entry: Mapping[str, Any]) -> domain.Agent:
    """The agent an entry describes (no session or metadata: those stay on its node)."""
    return domain.Agent(
        id=_text(entry["i"]),
        role=_text(entry["r"]),
        capabilities=[_text(c) for c in _list(entry["c"])],
        specialization=_text(entry["sp"]) if entry["sp"] is not None else None,
        max_tasks=int(entry["m"]),
        project=_text(entry["p"]) if entry["p"] is not None else None,
        task=_text(entry["t"]) if entry["t"] is not None else None,
        status=_text(entry["s"]),
        active_tasks=int(entry["a"]),
        tasks_completed=int(entry["ok"]),
        tasks_failed=int(entry["f"]),
        performance=float(entry["pf"]),
        node_id=_text(entry["n"]),
        session_id="",
        created_at=datetime.fromisoformat(entry["ca"]),
        last_activity=datetime.fromisoformat(entry["la"]),
    )


def _list(value: object) -> list[Any]:
    if not isinstance(value, list):
        raise TypeError("a list field holds no list")
    return value


def _text(value: object) -> str:
    if not isinstance(value, str):
        raise TypeError("a text field holds no text")
    return value


def read(bucket: str, key: str, data: bytes, signers: Signers | None) -> domain.Agent:
    """The agent of the value stored under ``key``, verified; EntryRejected (with its reason)
    when it is not an entry to take. ``signers`` None: any valid signature (tests, benches)."""
    body, signer, signature = _parsed(data)
    try:
        node_id, _ = origin_of(signer)
    except ValueError as exc:
        raise EntryRejected("bad_signature") from exc
    # Who signed first: a node the network does not admit is not worth a verification.
    if signers is not None and not signers.admits(signer, node_id):
        raise EntryRejected("not_admitted")
    if not verify_signature(signer, signature, _signed_bytes(bucket, key, body)):
        raise EntryRejected(_misplaced_or_forged(bucket, key, body, signer, signature))
    runs_out = body.get("x")
    if runs_out is not None and time.time() > float(runs_out) + CLOCK_SKEW:
        raise EntryRejected("expired")  # a signed entry put back after its time
    try:
        agent = _agent(body)
    except (KeyError, TypeError, ValueError, OverflowError) as exc:
        raise EntryRejected("malformed") from exc
    if entry_key(agent.project, agent.id) != key:
        raise EntryRejected("misplaced")  # signed so by an admitted node: a writer's bug
    return agent


def _parsed(data: bytes) -> tuple[dict[str, Any], str, str]:
    """A value's (entry, signer's key, signature), its size checked before it is parsed."""
    if len(data) > MAX_ENTRY_BYTES:
        raise EntryRejected("oversized")
    try:
        value = json.loads(data)
    except (ValueError, RecursionError) as exc:  # not JSON, not UTF-8, nested past the stack
        raise EntryRejected("malformed") from exc
    if not isinstance(value, dict):
        raise EntryRejected("malformed")
    body, signer, signature = value.get("e"), value.get("k"), value.get("g")
    if signer is None and signature is None:
        raise EntryRejected("unsigned")
    if not isinstance(body, dict) or not isinstance(signer, str) or not isinstance(signature, str):
        raise EntryRejected("malformed")
    runs_out = body.get("x", 0)  # Unix seconds: a finite number (no NaN, nothing past a float)
    if isinstance(runs_out, bool) or not isinstance(runs_out, int | float):
        raise EntryRejected("malformed")
    if not -1e12 < runs_out < 1e12:
        raise EntryRejected("malformed")
    return body, signer, signature


def _misplaced_or_forged(
    bucket: str, key: str, body: dict[str, Any], signer: str, signature: str
) -> str:
    """Why a signature failed: a good entry copied under another key, or a forgery."""
    project, agent_id = body.get("p"), body.get("i")
    if not isinstance(agent_id, str) or not isinstance(project, str | None):
        return "bad_signature"
    own = entry_key(project, agent_id)
    if own != key and verify_signature(signer, signature, _signed_bytes(bucket, own, body)):
        return "misplaced"
    return "bad_signature"


def _project_of(agent: domain.Agent) -> str:
    return agent.project or NO_PROJECT


def _ttl_seconds(ttl: float) -> int:
    # Nats-TTL is whole seconds here (nats-py writes int(ttl)); never 0, which means "none".
    return max(1, math.ceil(ttl))


def _ttl_header(ttl: float | None) -> int | None:
    """The Nats-TTL of an entry: None (no header) keeps it until it is written again."""
    return None if ttl is None else _ttl_seconds(ttl)


class InMemoryDirectory:
    """The directory in a dict, with TTLs on this process's clock (unit tests)."""

    def __init__(self) -> None:
        self._entries: dict[str, tuple[domain.Agent, float]] = {}
        self._version = 0

    async def put(self, agent: domain.Agent, ttl: float | None) -> None:
        """Write or renew an entry (``ttl`` None: kept until written again)."""
        until = math.inf if ttl is None else time.monotonic() + ttl
        self._entries[entry_key(agent.project, agent.id)] = (agent, until)
        self._version += 1

    async def remove(self, project: str | None, agent_id: str) -> None:
        """Take an entry out."""
        if self._entries.pop(entry_key(project, agent_id), None) is not None:
            self._version += 1

    async def project_of(self, agent_id: str) -> str | None:
        """The project of a listed agent."""
        for agent in self._live().values():
            if agent.id == agent_id:
                return _project_of(agent)
        return None

    async def listed_projects(self, agent_ids: Sequence[str]) -> dict[str, set[str | None]]:
        """The projects each of ``agent_ids`` has an entry in."""
        wanted = set(agent_ids)
        found: dict[str, set[str | None]] = {}
        for agent in self._live().values():
            if agent.id in wanted:
                found.setdefault(agent.id, set()).add(agent.project)
        return found

    async def entries(self, keys: Sequence[tuple[str | None, str]]) -> dict[str, domain.Agent]:
        """The live entries of these (project, agent id) pairs, by agent id."""
        live = self._live()
        found = (live.get(entry_key(project, agent_id)) for project, agent_id in keys)
        return {agent.id: agent for agent in found if agent is not None}

    async def agents(self, project: str | None) -> tuple[int, Mapping[str, domain.Agent]]:
        """The live entries of ``project`` (None: all), by key."""
        live = self._live()
        if project is None:
            return self._version, live
        prefix = f"{subject_token(project)}."
        return self._version, {k: a for k, a in live.items() if k.startswith(prefix)}

    def _live(self) -> dict[str, domain.Agent]:
        now = time.monotonic()
        expired = [key for key, (_, until) in self._entries.items() if until <= now]
        for key in expired:
            del self._entries[key]
        self._version += bool(expired)
        return {key: agent for key, (agent, _) in self._entries.items()}


@dataclass(slots=True)
class _View:
    """One project's entries as a watch keeps them."""

    agents: dict[str, domain.Agent] = field(default_factory=dict)
    version: int = field(default_factory=lambda: next(_versions))
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    born: float = field(default_factory=time.monotonic)
    task: asyncio.Task[None] | None = None

    def fresh(self, max_age: float) -> bool:
        alive = self.task is not None and not self.task.done()
        return alive and time.monotonic() - self.born < max_age


class JetStreamDirectory:
    """The directory in the network's KV bucket (see the module docstring)."""

    def __init__(
        self,
        nc: NatsClient,
        network: str,
        *,
        replicas: int = 1,
        timeout: float = 10.0,
        max_views: int = MAX_VIEWS,
        max_age: float = VIEW_MAX_AGE,
        marker_ttl: float = MARKER_TTL,
        identity: NodeIdentity | None = None,
        signers: Signers | None = None,
    ) -> None:
        """``identity`` signs what this node writes (None: it only reads); ``signers`` are the
        nodes whose entries it takes (None: any valid signature, for tests and benches)."""
        self._nc = nc
        self._js = nc.jetstream(timeout=timeout)
        self.bucket = directory_bucket(network)
        self._replicas = replicas
        self._timeout = timeout
        self.max_views = max_views
        self.max_age = max_age
        self._marker_ttl = marker_ttl
        self._kv: KeyValue | None = None
        self._views: OrderedDict[str, _View] = OrderedDict()
        self._identity = identity
        self._signers = signers
        self._signers_seen = signers.changes if signers is not None else 0
        # Values left out of answers, by reason (/metrics, /healthz).
        self.rejected: Counter[str] = Counter()
        self._moved = asyncio.Event()  # a watch took a value (``wait_until``)

    async def start(self) -> None:
        """Bind the bucket, creating it when the network has none yet."""
        from nats.js.api import KeyValueConfig, StorageType
        from nats.js.errors import BucketNotFoundError

        try:
            self._kv = await self._js.key_value(self.bucket)
        except BucketNotFoundError:
            self._kv = await self._js.create_key_value(
                KeyValueConfig(
                    bucket=self.bucket,
                    history=1,
                    storage=StorageType.FILE,
                    replicas=self._replicas,
                    direct=True,
                    limit_marker_ttl=self._marker_ttl,
                )
            )

    async def close(self) -> None:
        """Stop every view's watch."""
        views, self._views = list(self._views.values()), OrderedDict()
        for view in views:
            await _stop(view)

    def _subject(self, key: str) -> str:
        return f"$KV.{self.bucket}.{key}"

    async def put(self, agent: domain.Agent, ttl: float | None) -> None:
        """Write or renew an agent's entry, expiring ``ttl`` seconds from now (None: kept)."""
        if self._identity is None:
            raise NetworkError("this directory reads only: it has no key to sign entries with")
        key = entry_key(agent.project, agent.id)
        value = encode(agent, self._identity, self.bucket, ttl)
        try:
            await self._js.publish(self._subject(key), value, msg_ttl=_ttl_header(ttl))
        except Exception as exc:  # nats-py raises many kinds; all mean "not written"
            raise NetworkError(f"the directory did not take {agent.id!r} ({exc!r})") from exc

    async def remove(self, project: str | None, agent_id: str) -> None:
        """Purge an agent's entry; the purge marker itself expires after ``marker_ttl``."""
        headers = {"KV-Operation": "PURGE", "Nats-Rollup": "sub"}
        key = entry_key(project, agent_id)
        try:
            await self._js.publish(
                self._subject(key), headers=headers, msg_ttl=_ttl_seconds(self._marker_ttl)
            )
        except Exception as exc:  # nats-py raises many kinds; all mean "not written"
            raise NetworkError(f"the directory did not drop {agent_id!r} ({exc!r})") from exc

    async def project_of(self, agent_id: str) -> str | None:
        """The project of a listed agent: one direct get of the last ``*.<agent>``."""
        for agent in await self._last_entries([f"*.{subject_token(agent_id)}"]):
            if agent.id == agent_id:
                return _project_of(agent)
        return None

    async def listed_projects(self, agent_ids: Sequence[str]) -> dict[str, set[str | None]]:
        """The projects each of ``agent_ids`` has an entry in: batched direct gets of the
        last ``*.<agent>``, LISTED_PER_REQUEST agents a request (their entries stay far under
        the DIRECT_BATCH a request answers)."""
        wanted = list(dict.fromkeys(agent_ids))
        found: dict[str, set[str | None]] = {}
        for first in range(0, len(wanted), LISTED_PER_REQUEST):
            part = wanted[first : first + LISTED_PER_REQUEST]
            for agent in await self._last_entries([f"*.{subject_token(i)}" for i in part]):
                found.setdefault(agent.id, set()).add(agent.project)
        asked = set(wanted)
        return {i: projects for i, projects in found.items() if i in asked}

    async def entries(self, keys: Sequence[tuple[str | None, str]]) -> dict[str, domain.Agent]:
        """The live entries of these (project, agent id) pairs, by agent id: batched direct
        gets, LISTED_PER_REQUEST keys a request."""
        wanted = [entry_key(project, agent_id) for project, agent_id in dict.fromkeys(keys)]
        found: dict[str, domain.Agent] = {}
        for first in range(0, len(wanted), LISTED_PER_REQUEST):
            for agent in await self._last_entries(wanted[first : first + LISTED_PER_REQUEST]):
                found[agent.id] = agent
        return found

    async def _last_entries(self, filters: list[str]) -> list[domain.Agent]:
        """The verified entries among the newest of each key matching ``filters``."""
        found = []
        for key, data in await self.last_values(filters):
            agent = self._read(key, data)
            if agent is not None:
                found.append(agent)
        return found

    def _read(self, key: str, data: bytes) -> domain.Agent | None:
        """The agent a value stored under ``key`` describes; None (counted) if it is not one."""
        try:
            return read(self.bucket, key, data, self._signers)
        except EntryRejected as exc:
            self.rejected[exc.reason] += 1
            count = self.rejected[exc.reason]
            if count & (count - 1) == 0:  # the 1st, 2nd, 4th, 8th…: a flood does not flood the log
                logger.warning(
                    "left out the value of %s under %r (%s; %d so far)",
                    self.bucket,
                    key,
                    exc.reason,
                    count,
                )
            return None

    async def last_values(self, filters: list[str]) -> list[tuple[str, bytes]]:
        """The (key, value) of the newest entry of each key matching ``filters``, unverified
        (direct get, batched: ``multi_last``, at most DIRECT_BATCH a request)."""
        request = {
            "multi_last": [self._subject(f) for f in filters],
            "batch": DIRECT_BATCH,
        }
        inbox = self._nc.new_inbox()
        sub = await self._nc.subscribe(inbox)
        values: list[tuple[str, bytes]] = []
        prefix = self._subject("")
        try:
            await self._nc.publish(
                f"$JS.API.DIRECT.GET.KV_{self.bucket}", json.dumps(request).encode(), reply=inbox
            )
            while True:
                msg = await sub.next_msg(timeout=self._timeout)
                if _status(msg) is not None:
                    break  # 204: the end of the batch; 404: nothing matched
                headers: dict[str, str] = msg.headers or {}
                if headers.get("KV-Operation") not in _GONE and msg.data:
                    subject = headers.get("Nats-Subject", "")
                    values.append((subject.removeprefix(prefix), msg.data))
        except Exception as exc:  # a timeout or a lost connection: the directory is away
            raise NetworkError(f"the directory did not answer ({exc!r})") from exc
        finally:
            with contextlib.suppress(Exception):  # the connection may be gone already
                await sub.unsubscribe()
        return values

    async def agents(self, project: str | None) -> tuple[int, Mapping[str, domain.Agent]]:
        """The listed agents of ``project`` (None: all) by key, from a watch-kept view."""
        if self._signers is not None and self._signers.changes != self._signers_seen:
            # Who may write changed (a node removed, say): every view is read again under it.
            self._signers_seen = self._signers.changes
            await self.close()
        token = project_filter(project)
        try:
            async with asyncio.timeout(self._timeout):
                while True:
                    view = await self._view(token)
                    if await _ready(view, token):
                        return view.version, view.agents
                    # Stopped before it was ready (evicted, or read again under new signers,
                    # by another lookup): the current view of the project is the one to wait on.
        except TimeoutError as exc:
            raise NetworkError(f"the directory did not list {token} in time") from exc

    async def _view(self, token: str) -> _View:
        """The held view of ``token``, made (its watch started) when none is fresh."""
        view = self._views.get(token)
        if view is None or not view.fresh(self.max_age):
            if view is not None:
                await _stop(view)
            view = self._views[token] = _View()
            view.task = asyncio.create_task(self._follow(view, token), name="bzzz-directory")
            while len(self._views) > self.max_views:
                _, oldest = self._views.popitem(last=False)
                await _stop(oldest)
        self._views.move_to_end(token)
        return view

    async def _follow(self, view: _View, token: str) -> None:
        """Keep ``view`` as the bucket's entries under ``token`` change, until cancelled."""
        assert self._kv is not None, "start() first"
        watcher = await self._kv.watch(token)
        read = 0  # entries taken from the watch
        owed: int | None = None  # how many the server had delivered when it said "all in"
        try:
            while True:
                still_wanted()
                entry = await anext(watcher)
                if entry is None:  # the server has delivered the current entries
                    owed = await _delivered(watcher)
                else:
                    read += 1
                    self._take(view, entry)
                    self._moved.set()
                # nats-py may say "all in" before the entries it already received are read
                # (under load: a lookup then saw a part of the project): ready once they are,
                # or once an entry the server sent with nothing after it is.
                if owed is not None and (read >= owed or (entry is not None and entry.delta == 0)):
                    view.ready.set()
        finally:
            with contextlib.suppress(Exception):  # the connection may be gone already
                await watcher.stop()  # type: ignore[no-untyped-call]  # nats-py: untyped

    def _take(self, view: _View, entry: Any) -> None:
        """One watched entry into ``view``: a value that is not an entry to take leaves its key
        without one (the bucket holds no good entry there now)."""
        agent = None
        if entry.operation not in _GONE and entry.value:
            agent = self._read(entry.key, entry.value)
        if agent is None:
            if view.agents.pop(entry.key, None) is None:
                return
        elif _renewal(view.agents, entry.key, agent):
            return  # what lookups rank is unchanged
        else:
            view.agents[entry.key] = agent
        view.version = next(_versions)

    async def wait_until(self, predicate: Callable[[], bool], within: float) -> None:
        """Wait until ``predicate`` holds, tried again as the watches take values (tests)."""
        async with asyncio.timeout(within):
            while not predicate():
                self._moved.clear()
                await self._moved.wait()

    def cached(self) -> dict[str, int]:
        """The views held: filter -> how many entries (health, tests)."""
        return {token: len(view.agents) for token, view in self._views.items()}


def _renewal(agents: dict[str, domain.Agent], key: str, new: domain.Agent) -> bool:
    """Whether ``new`` only renews the held entry; its last activity is moved on in place (as
    the store's directory does), so what was built from the view needs no rebuilding."""
    old = agents.get(key)
    if old is None or replace(new, last_activity=old.last_activity) != old:
        return False
    old.last_activity = new.last_activity
    return True


async def _delivered(watcher: KeyValue.KeyWatcher) -> int:
    """How many messages the server has delivered to ``watcher``'s consumer."""
    # nats-py keeps the watch's subscription private; its consumer info is what tells.
    if watcher._sub is None:
        return 0
    info = await watcher._sub.consumer_info()
    return int(info.delivered.consumer_seq or 0) if info.delivered else 0


def _status(msg: Msg) -> str | None:
    headers: dict[str, Any] = msg.headers or {}
    status = headers.get("Status")
    return None if status is None else str(status)


async def _ready(view: _View, token: str) -> bool:
    """Wait until ``view`` is ready (True) or its watch was stopped first (False); a watch that
    ended on its own (it failed) is NetworkError."""
    assert view.task is not None
    ready = asyncio.create_task(view.ready.wait())
    try:
        await asyncio.wait({ready, view.task}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        ready.cancel()
    if view.ready.is_set():
        return True
    if view.task.cancelled():
        return False
    raise NetworkError(f"the directory's watch of {token} ended ({view.task.exception()!r})")


async def _stop(view: _View) -> None:
    if view.task is not None:
        view.task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await view.task
