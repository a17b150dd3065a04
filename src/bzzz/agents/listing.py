"""The agent directory from the services' side: this node lists its agents; lookups read it.

``DirectoryWriter``: the node that serves an agent (its ``node_id``) writes its directory entry
when the agent comes online or changes what lookups show, renews it well within the lease
(the entry's TTL), and writes it once more without TTL when the agent goes offline (the stores
keep offline agents: a lookup from the directory lists them as a serving node's does).
A lost node's agents (``node.lost``) are written offline by the witness that recorded the
loss, for the projects it serves (its payload names them: it holds all their agents), and by
every node holding them for the other projects (the witness has none of them): one writer
where there were as many as the project's nodes, a storm's write load on a saturated network.
An agent going offline on its own node (``agent.offline``) is written by that node; a removed
node's (``node.removed``) by every node holding them. A write that fails is tried again. The
other nodes holding an agent whose entry one node writes look again ``CHECK_OTHERS_AFTER``
seconds later (one batched read) and write it themselves if it is still listed online as they
last saw it: the writer failed, or stopped before it wrote. The first
time this process writes an online agent, entries of its id in other projects (it moved, or
its id was free and taken again elsewhere) are dropped, so a lookup and a forwarded call find
it where the stores have it now.

``RemoteAgents``: what a lookup searches on a node that does not serve every project. A
project it does not serve is read from the directory into an ``AgentDirectory`` (the store's
own read model, so ranks and scores are the ones a serving node computes); the built
directories are cached (a bounded number) and kept up to date by difference as entries change.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import TypeVar

from bzzz import domain
from bzzz.errors import BzzzError, NetworkError
from bzzz.network import admission
from bzzz.network.base import Directory
from bzzz.network.envelope import Envelope
from bzzz.projects import NO_PROJECT, ProjectSet
from bzzz.store.directory import AgentDirectory

logger = logging.getLogger(__name__)

# (An erasure, ``retention.forget``, keeps the agent: its entry stays as the agent does.)
WRITE_CHUNK = 256
BUILT_KEPT = 8
# After a failed write, the next try.
RETRY_AFTER = 5.0
# How long after an offline change another node writes, this node checks that it did.
CHECK_OTHERS_AFTER = 30.0

_T = TypeVar("_T")


def _shown(agent: domain.Agent) -> tuple[object, ...]:
    """What a lookup shows and scores of an agent, but its last activity (renewals bring it)."""
    return (
        agent.role,
        tuple(agent.capabilities),
        agent.specialization,
        agent.max_tasks,
        agent.project,
        agent.task,
        agent.status,
        agent.active_tasks,
        agent.tasks_completed,
        agent.tasks_failed,
        agent.performance,
    )


class DirectoryWriter:
    """This node's side of the directory: its agents' entries, written by it alone."""

    def __init__(
        self, directory: Directory, local: AgentDirectory, node_id: str, ttl: float
    ) -> None:
        self.directory = directory
        self._local = local
        self._node_id = node_id
        self.ttl = ttl
        self.refresh_every = max(ttl / 3, 0.3)
        # agent id -> (project, what was shown) as last written.
        self._written: dict[str, tuple[str | None, tuple[object, ...]]] = {}
        self._pending: dict[str, domain.Agent] = {}
        # Offline agents whose entry another node writes, and when each was noted (in order).
        self._others: dict[str, tuple[domain.Agent, float]] = {}
        self._wake = asyncio.Event()
        # One flush at a time: a caller's flush returns once what was noted before is written.
        self._flushing = asyncio.Lock()

    def changed(self, agents: Sequence[domain.Agent], envelopes: Sequence[Envelope]) -> None:
        """The projector changed ``agents`` (a listener: it only notes them)."""
        losses: dict[str, list[ProjectSet | None]] = {}
        removed = False
        for env in envelopes:
            if env.type == "node.lost":
                losses.setdefault(str(env.payload.get("node_id")), []).append(self._left_to(env))
            removed = removed or env.type == admission.REMOVED
        for agent in agents:
            if agent.node_id == self._node_id:
                self._pending[agent.id] = agent
            elif agent.online:
                self._others.pop(agent.id, None)  # back on its node: that node lists it
            elif removed or any(
                left is None or not left.serves(agent.project)
                for left in losses.get(agent.node_id, ())
            ):
                self._pending[agent.id] = agent
            else:
                self._others.pop(agent.id, None)  # noted again: now, at the end
                self._others[agent.id] = (agent, time.monotonic())
                self._wake.set()
        if self._pending:
            self._wake.set()

    def _left_to(self, loss: Envelope) -> ProjectSet | None:
        """The projects whose agents a ``node.lost``'s witness writes offline, not this node:
        None when this node writes them all (it is the witness, or an older envelope names
        no projects: every node holding the agents writes them)."""
        served = loss.payload.get("served")
        if loss.origin == self._node_id or not isinstance(served, list):
            return None
        return ProjectSet.of(str(name) for name in served)

    def _others_due(self) -> float | None:
        """When the oldest noted agent of another writer is due a check."""
        for _, noted in self._others.values():
            return noted + CHECK_OTHERS_AFTER
        return None

    async def run(self) -> None:
        """Write what changed as it changes; renew every entry within its TTL; check what
        other nodes write. Until cancelled."""
        renew_at = time.monotonic() + self.refresh_every
        retry_at: float | None = None  # after a failed write
        while True:
            due = [renew_at]
            others_due = self._others_due()
            if others_due is not None:
                due.append(others_due)
            if retry_at is not None:
                due.append(retry_at)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(max(0.0, min(due) - time.monotonic())):
                    await self._wake.wait()
            self._wake.clear()
            # Due however busy the node is: a node noting changes all the time renews too.
            if time.monotonic() >= renew_at:
                renew_at = time.monotonic() + self.refresh_every
                await self._guard(self.renew())
            if retry_at is None or time.monotonic() >= retry_at:
                written = await self._guard(self.flush())
                retry_at = None if written else time.monotonic() + RETRY_AFTER
            others_due = self._others_due()
            if others_due is not None and time.monotonic() >= others_due:
                await self._guard(self.check_others())

    @staticmethod
    async def _guard(work: Awaitable[None]) -> bool:
        """``work``; False (logged) when the directory did not take it."""
        try:
            await work
        except BzzzError as exc:
            logger.warning("could not write the agent directory: %s", exc.message)
            return False
        return True

    async def flush(self) -> None:
        """Write the noted changes; those not written stay noted (NetworkError)."""
        async with self._flushing:
            await self._flush()

    async def _flush(self) -> None:
        pending, self._pending = self._pending, {}
        first = [
            agent
            for agent in pending.values()
            if agent.online and agent.node_id == self._node_id and agent.id not in self._written
        ]
        try:
            if first:
                await self._drop_elsewhere(first)
            failed = await _each(self._write, list(pending.values()))
        except BaseException as exc:  # cancelled (a stop) or refused: none is taken as written
            self._note_again(pending.values())
            if isinstance(exc, BzzzError):
                raise NetworkError(f"{len(pending)} directory entries not written") from exc
            raise
        self._note_again(failed)
        if failed:
            raise NetworkError(f"{len(failed)} directory entries not written; trying again")

    def _note_again(self, agents: Iterable[domain.Agent]) -> None:
        """Unwritten agents back among the noted, unless a newer change of one came."""
        for agent in agents:
            self._pending.setdefault(agent.id, agent)

    async def check_others(self) -> None:
        """Write the offline entries another node should have written and did not, of the
        agents noted CHECK_OTHERS_AFTER ago or more: still listed online, as this node last
        saw the agent before it went offline."""
        until = time.monotonic() - CHECK_OTHERS_AFTER
        due = [i for i, (_, noted) in self._others.items() if noted <= until]
        others = {i: self._others.pop(i)[0] for i in due}
        try:
            listed = await self.directory.entries([(a.project, a.id) for a in others.values()])
        except BzzzError:
            retry = time.monotonic() - CHECK_OTHERS_AFTER + RETRY_AFTER
            self._others = {i: (a, retry) for i, a in others.items()} | self._others
            raise
        for agent in others.values():
            entry = listed.get(agent.id)
            current = self._local.get(agent.id)
            if entry is None or not entry.online or current is None or current.online:
                continue  # written, not listed at all, or back online since
            if entry.node_id == agent.node_id and entry.last_activity <= agent.last_activity:
                self._pending[agent.id] = current
        if self._pending:
            self._wake.set()

    async def _drop_elsewhere(self, agents: Sequence[domain.Agent]) -> None:
        """Drop entries of these agents' ids in other projects than theirs."""
        listed = await self.directory.listed_projects([agent.id for agent in agents])
        elsewhere = [
            (project, agent.id)
            for agent in agents
            for project in listed.get(agent.id, ())
            if project != agent.project
        ]
        await _all(lambda entry: self.directory.remove(*entry), elsewhere)

    async def _write(self, agent: domain.Agent) -> None:
        was = self._written.get(agent.id)
        if was is not None and was[0] != agent.project:
            await self.directory.remove(was[0], agent.id)
        if not agent.online:
            self._written.pop(agent.id, None)
            current = self._local.get(agent.id)
            if current is None or not current.online:  # else it came back since
                await self.directory.put(agent, None)
            return
        if agent.node_id != self._node_id:
            return  # another node's agent that came back: its node lists it
        shown = _shown(agent)
        if was is not None and was[1] == shown:
            return
        await self.directory.put(agent, self.ttl)
        self._written[agent.id] = (agent.project, shown)

    async def renew(self) -> None:
        """Write every online agent of this node again (a TTL counts from the last write)."""
        mine = self._local.online_of_node(self._node_id)
        await _all(self._renewal, mine)

    async def _renewal(self, agent: domain.Agent) -> None:
        await self.directory.put(agent, self.ttl)
        self._written[agent.id] = (agent.project, _shown(agent))


async def _each(write: Callable[[_T], Awaitable[None]], items: Sequence[_T]) -> list[_T]:
    """``write`` each item, WRITE_CHUNK at a time; the items whose write the directory refused
    (any other exception, a cancellation included, is raised)."""
    failed: list[_T] = []
    for first in range(0, len(items), WRITE_CHUNK):
        part = items[first : first + WRITE_CHUNK]
        results = await asyncio.gather(*(write(item) for item in part), return_exceptions=True)
        for item, result in zip(part, results, strict=True):
            if isinstance(result, BzzzError):
                failed.append(item)
            elif isinstance(result, BaseException):
                raise result
    return failed


async def _all(write: Callable[[_T], Awaitable[None]], items: Sequence[_T]) -> None:
    """``write`` each item (``_each``); NetworkError if the directory refused any."""
    failed = await _each(write, items)
    if failed:
        raise NetworkError(f"the directory did not take {len(failed)} of {len(items)} writes")


@dataclass(slots=True)
class _Built:
    """A ranked copy of directory entries, and what it was built from (entry key -> agent)."""

    directory: AgentDirectory = field(default_factory=AgentDirectory)
    held: dict[str, domain.Agent] = field(default_factory=dict)
    versions: tuple[int, ...] = ()

    def update(self, wanted: dict[str, domain.Agent]) -> None:
        """Make the copy hold ``wanted``: only what changed is taken out or put in."""
        gone = [entry for entry in self.held if entry not in wanted]
        for entry in gone:
            self.directory.remove(self.held.pop(entry).id)
        for entry, agent in wanted.items():
            if self.held.get(entry) is not agent:
                self.directory.put(agent)
                self.held[entry] = agent


class RemoteAgents:
    """What a lookup searches when this node does not serve every project."""

    def __init__(self, directory: Directory, served: ProjectSet, kept: int = BUILT_KEPT) -> None:
        self.directory = directory
        self.served = served
        self._kept = kept
        self._built: OrderedDict[tuple[object, ...], _Built] = OrderedDict()

    async def searched(
        self, project: str | None, visible: AbstractSet[str] | None, local: AgentDirectory
    ) -> list[AgentDirectory]:
        """The directories a lookup of ``project`` searches: the local store for what this node
        serves, the network directory for the rest (both when no project is named)."""
        if self.served.every or (project is not None and self.served.serves(project)):
            return [local]
        if project is not None:
            # Agents without a project match every project's lookups, as in the store.
            return [await self._built_of((project, NO_PROJECT), None)]
        if visible is None:
            return [local, await self._built_of(None, local)]
        wanted = tuple(sorted(p for p in visible if not self.served.serves(p)))
        if not wanted:
            return [local]
        return [local, await self._built_of(wanted, local)]

    async def _built_of(
        self, projects: tuple[str, ...] | None, local: AgentDirectory | None
    ) -> AgentDirectory:
        """An AgentDirectory of the listed agents of ``projects`` (None: every unserved one),
        without those ``local`` holds; brought up to date (by difference) when entries change."""
        parts = [await self.directory.agents(p) for p in projects or (None,)]
        versions = tuple(version for version, _ in parts)
        key = (projects, local is not None)
        built = self._built.get(key)
        if built is None:
            built = self._built[key] = _Built()
            while len(self._built) > self._kept:
                self._built.popitem(last=False)
        self._built.move_to_end(key)
        if built.versions != versions:
            wanted = {
                entry: agent
                for _, agents in parts
                for entry, agent in agents.items()
                if self._wanted(agent, projects, local)
            }
            built.update(wanted)
            built.versions = versions
        return built.directory

    def _wanted(
        self, agent: domain.Agent, projects: tuple[str, ...] | None, local: AgentDirectory | None
    ) -> bool:
        if local is not None and local.get(agent.id) is not None:
            return False  # this node holds it: the local store answers for it
        return projects is not None or not self.served.serves(agent.project)
