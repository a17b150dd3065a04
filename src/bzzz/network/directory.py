"""The network's agent directory: a JetStream KV bucket with one compact entry per agent.

Bucket ``bzzz_dir_<network>`` (history 1, file storage, ``bzzz.stream_replicas`` replicas),
key ``<project token>.<agent token>`` (``subject_token`` of each; ``_`` for no project). An
entry is compact JSON of what a lookup shows and scores. Its serving node writes it with the
agent's lease as a per-message TTL (``Nats-TTL``) and writes it again before that runs out;
an entry not renewed expires, and the server leaves a delete marker
(``subject_delete_marker_ttl``) so watchers see an expiry as they see a removal. An agent that
went offline keeps an entry without TTL (status ``offline``), as the stores keep its row.

Reads: an agent's project by one batched direct get (``multi_last`` of ``*.<agent>``); a
project's agents from a view kept by a KV watch of ``<project>.*`` (bounded: at most
``max_views`` projects, each rebuilt after ``max_age`` seconds). ``InMemoryDirectory`` is the
same for unit tests.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import math
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from bzzz import domain
from bzzz.errors import NetworkError
from bzzz.network.deliveries import still_wanted
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
_GONE = ("DEL", "PURGE")
_versions = itertools.count(1)


def directory_bucket(network: str) -> str:
    """The KV bucket that holds a network's agent directory."""
    return f"bzzz_dir_{network}"


def entry_key(project: str | None, agent_id: str) -> str:
    """An agent's key: its project's token and its id's, each one legal subject token."""
    return f"{subject_token(project)}.{subject_token(agent_id)}"


def project_filter(project: str | None) -> str:
    """The keys of a project's agents (None: every agent)."""
    return "*.*" if project is None else f"{subject_token(project)}.*"


def encode(agent: domain.Agent) -> bytes:
    """An agent's entry: what lookups show and score, no session, owner or handle."""
    entry = {
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
    return json.dumps(entry, separators=(",", ":")).encode()


def decode(data: bytes) -> domain.Agent:
    """The agent an entry describes (no session or metadata: those stay on its node)."""
    entry = json.loads(data)
    return domain.Agent(
        id=entry["i"],
        role=entry["r"],
        capabilities=list(entry["c"]),
        specialization=entry["sp"],
        max_tasks=int(entry["m"]),
        project=entry["p"],
        task=entry["t"],
        status=entry["s"],
        active_tasks=int(entry["a"]),
        tasks_completed=int(entry["ok"]),
        tasks_failed=int(entry["f"]),
        performance=float(entry["pf"]),
        node_id=entry["n"],
        session_id="",
        created_at=datetime.fromisoformat(entry["ca"]),
        last_activity=datetime.fromisoformat(entry["la"]),
    )


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
    ) -> None:
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
        key = entry_key(agent.project, agent.id)
        try:
            await self._js.publish(self._subject(key), encode(agent), msg_ttl=_ttl_header(ttl))
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
        for data in await self.last_values([f"*.{subject_token(agent_id)}"]):
            agent = decode(data)
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
            for data in await self.last_values([f"*.{subject_token(i)}" for i in part]):
                agent = decode(data)
                found.setdefault(agent.id, set()).add(agent.project)
        asked = set(wanted)
        return {i: projects for i, projects in found.items() if i in asked}

    async def entries(self, keys: Sequence[tuple[str | None, str]]) -> dict[str, domain.Agent]:
        """The live entries of these (project, agent id) pairs, by agent id: batched direct
        gets, LISTED_PER_REQUEST keys a request."""
        wanted = [entry_key(project, agent_id) for project, agent_id in dict.fromkeys(keys)]
        found: dict[str, domain.Agent] = {}
        for first in range(0, len(wanted), LISTED_PER_REQUEST):
            for data in await self.last_values(wanted[first : first + LISTED_PER_REQUEST]):
                agent = decode(data)
                found[agent.id] = agent
        return found

    async def last_values(self, filters: list[str]) -> list[bytes]:
        """The live values of the newest entry of each key matching ``filters`` (direct get,
        batched: ``multi_last``, at most DIRECT_BATCH a request)."""
        request = {
            "multi_last": [self._subject(f) for f in filters],
            "batch": DIRECT_BATCH,
        }
        inbox = self._nc.new_inbox()
        sub = await self._nc.subscribe(inbox)
        values: list[bytes] = []
        try:
            await self._nc.publish(
                f"$JS.API.DIRECT.GET.KV_{self.bucket}", json.dumps(request).encode(), reply=inbox
            )
            while True:
                msg = await sub.next_msg(timeout=self._timeout)
                if _status(msg) is not None:
                    break  # 204: the end of the batch; 404: nothing matched
                if (msg.headers or {}).get("KV-Operation") not in _GONE and msg.data:
                    values.append(msg.data)
        except Exception as exc:  # a timeout or a lost connection: the directory is away
            raise NetworkError(f"the directory did not answer ({exc!r})") from exc
        finally:
            with contextlib.suppress(Exception):  # the connection may be gone already
                await sub.unsubscribe()
        return values

    async def agents(self, project: str | None) -> tuple[int, Mapping[str, domain.Agent]]:
        """The listed agents of ``project`` (None: all) by key, from a watch-kept view."""
        token = project_filter(project)
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
        try:
            async with asyncio.timeout(self._timeout):
                await view.ready.wait()
        except TimeoutError as exc:
            raise NetworkError(f"the directory did not list {token} in time") from exc
        return view.version, view.agents

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
                # nats-py may say "all in" before the entries it already received are read
                # (under load: a lookup then saw a part of the project): ready once they are,
                # or once an entry the server sent with nothing after it is.
                if owed is not None and (read >= owed or (entry is not None and entry.delta == 0)):
                    view.ready.set()
        except (ValueError, KeyError) as exc:
            logger.warning("an entry of %s did not read (%r); listing it afresh", self.bucket, exc)
        finally:
            with contextlib.suppress(Exception):  # the connection may be gone already
                await watcher.stop()  # type: ignore[no-untyped-call]  # nats-py: untyped

    @staticmethod
    def _take(view: _View, entry: Any) -> None:
        """One watched entry into ``view``."""
        if entry.operation in _GONE or not entry.value:
            view.agents.pop(entry.key, None)
        else:
            agent = decode(entry.value)
            if _renewal(view.agents, entry.key, agent):
                return  # what lookups rank is unchanged
            view.agents[entry.key] = agent
        view.version = next(_versions)

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


async def _stop(view: _View) -> None:
    if view.task is not None:
        view.task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await view.task
