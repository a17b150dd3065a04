"""KnowledgeService: a project's facts, stated by agents and by threads' consensus, read by all.

A fact is changed only through the log (``fact.stated``, ``fact.agreed``, applied in
``projection.py``), so which fact is current is decided in log order on every node. Facts
come from:

1. an agent: ``bzzz_post`` to ``bzzz://*@PROJECT/knowledge`` with ``message_type: "fact"``
   and content ``{subject, relation, object[, statement, confidence, status]}``
   (:meth:`post_fact`), or :meth:`state`;
2. a thread's consensus: the node whose message completed it states a fact sourced to the
   thread, its decision message and the agents who agreed (:meth:`from_consensus`). The
   decision message's content may carry ``subject``/``relation``/``object`` (top level or
   under ``fact``); otherwise the fact is derived: subject = the thread's topic, relation =
   ``decided``, object = the decision's text (its first 200 characters), statement = the
   decision's whole text;
3. a hosted agent's summary (``origin: summary``, proposed until another agent agrees).

Reading (:meth:`search`, ``bzzz_get bzzz://*@PROJECT/knowledge``) ranks the facts opened in
memory (``index.py``): by ``about`` (an entity: facts whose subject or object it is, and the
neighbourhood two hops out), by ``q`` (BM25 over the facts' words), ``as_of`` (the agreed facts
valid at that time), with up to ``max_history`` earlier versions of each fact. Only principals
granted the project read or state its facts (PERMISSION_DENIED otherwise).

The older ``llm_knowledge`` memory (llm/knowledge.py: decision and insight texts of SLURP
events, episode summaries) stays as it is: it is free text for hosted agents' prompts, not
facts. Facts are the structured, sourced, superseding part; :meth:`for_prompt` gives hosted
agents the agreed ones most relevant to a text.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Table, func, literal, select, tuple_
from ulid import ULID

from bzzz import domain
from bzzz.agents.service import raise_store_failure, thread_project
from bzzz.audit.records import Action, digest, stamp
from bzzz.clock import Clock, SystemClock
from bzzz.errors import BzzzError, InvalidParameters, PermissionDenied
from bzzz.eventlog import Caller, EventLog
from bzzz.knowledge import projection, selection
from bzzz.knowledge.index import Fact, ProjectIndex, query_words
from bzzz.knowledge.projection import (
    AGREED_STATUS,
    ENTITY_LENGTH,
    FACT_APPLIERS,
    PROPOSED,
    RELATION_LENGTH,
    STATEMENT_LENGTH,
    STATUSES,
    check_confidence,
)
from bzzz.principal import Principal, Scope
from bzzz.projects import NO_PROJECT
from bzzz.retention.projection import register_steps
from bzzz.retention.stream import register_erased_kind
from bzzz.store.batch import register_appliers
from bzzz.store.database import Database
from bzzz.store.models import FactRow, ThreadRow
from bzzz.store.repository import Repository

logger = logging.getLogger(__name__)

# Bounds of a read (documented in docs/tools.md): facts answered, words of a query, earlier
# versions per fact, the neighbourhood's entities and facts.
DEFAULT_LIMIT = 20
MAX_LIMIT = 100
MAX_HISTORY = 20
# Projects whose facts a node keeps opened in memory at once (least recently read go first).
INDEXED_PROJECTS = 32
# Threads with a consensus but no fact yet that one catch-up looks at.
CATCH_UP_BATCH = 200
# An index looks at the store at least this often even when no change was heard of.
RECHECK_SECONDS = 5.0
# A prompt's text is ranked by its rarest words in the project (at most this many, of the
# first PROMPT_TEXT_WORDS distinct ones): its cost stays bounded however long the text.
PROMPT_WORDS = 16
PROMPT_TEXT_WORDS = 400
# Facts opened from the store in one query when a project's index loads or catches up.
LOAD_PAGE = 250
CATCH_UP_SECONDS = 60.0
CONTENT_KEYS = frozenset({"subject", "relation", "object", "statement", "confidence", "status"})

AuthorOf = Callable[[Caller], Awaitable[str]]


def consensus_fact_id(thread_id: str, message_id: str) -> str:
    """The one id of the fact a thread's consensus on a decision gives (stated once)."""
    return "fact-" + hashlib.sha256(f"{thread_id}/{message_id}".encode()).hexdigest()[:40]


def _field_text(content: dict[str, Any], name: str, limit: int, required: bool) -> str | None:
    value = content.get(name)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value.strip():
        raise InvalidParameters(
            f"a fact needs '{name}': a non-empty string", details={"field": name}
        )
    value = value.strip()
    if len(value) > limit:
        raise InvalidParameters(
            f"'{name}' is {len(value)} characters long; at most {limit}",
            details={"field": name, "limit": limit},
        )
    return value


def _confidence(value: Any) -> float:
    try:
        return check_confidence(value)
    except ValueError as exc:
        raise InvalidParameters(str(exc), details={"field": "confidence"}) from None


def _project(project: Any) -> str:
    if (
        not isinstance(project, str)
        or not project
        or len(project) > 128
        or project in ("*", NO_PROJECT)
    ):
        raise InvalidParameters(
            "knowledge belongs to a named project: bzzz://*@PROJECT/knowledge",
            details={"field": "project"},
        )
    return project


def _as_of(value: Any) -> datetime | None:
    if value is None or isinstance(value, datetime):
        return value
    raise InvalidParameters(
        "as_of of knowledge is a time (ISO 8601), not a log sequence",
        details={"field": "as_of"},
    )


class KnowledgeService:
    """Facts of projects: stated, agreed, superseded, searched."""

    def __init__(self, db: Database, log: EventLog, *, clock: Clock | None = None) -> None:
        # Every node decides superseding the same way: in log order, in its own store.
        register_appliers(FACT_APPLIERS)
        register_steps("facts", forget=projection.forget_agent, memory=projection.expire_history)
        # Erasure purges an agent's facts from the log too (their subjects name the author).
        register_erased_kind(projection.KIND, projection.subject_key)
        self._db = db
        self._log = log
        self.clock: Clock = clock or SystemClock()
        # Who states a fact for a caller (the node sets it: the caller's agent, else its
        # principal); without it, the principal.
        self.author_of: AuthorOf | None = None
        # Set by the node: its audit trail, for the facts the node states itself (a
        # consensus's); callers' facts are on it through the face they called.
        self.audit: Callable[[Action], None] | None = None
        self._indexes: OrderedDict[str, ProjectIndex] = OrderedDict()
        self._loading = asyncio.Lock()
        # Threads whose consensus gives no fact (this process does not look at them again).
        self._no_fact: set[str] = set()
        # Projects whose facts the log changed since their index last looked.
        self._changed: set[str] = set()
        self.stated = 0
        log.projector.add_outcome_listener(self._on_outcomes)

    # --- stating -----------------------------------------------------------------------------

    async def state(
        self,
        caller: Caller,
        project: str,
        subject: str,
        relation: str,
        object: str,
        *,
        statement: str | None = None,
        source: dict[str, Any] | None = None,
        status: str = AGREED_STATUS,
        confidence: float = 1.0,
        author: str | None = None,
        fact_id: str | None = None,
    ) -> dict[str, Any]:
        """State a fact in ``project`` (agreed: it supersedes the current one of its subject
        and relation); the stored fact."""
        who = caller.principal
        who.require(Scope.WRITE, "stating a fact")
        project = _project(project)
        who.require_project(project, "stating a fact")
        content = {"subject": subject, "relation": relation, "object": object}
        if statement is not None:
            content["statement"] = statement
        checked = self._checked(content)
        if status not in STATUSES:
            raise InvalidParameters(
                f"status must be one of {', '.join(STATUSES)}", details={"field": "status"}
            )
        author = author or await self._author(caller)
        wanted = dict(source or {})
        origin = "summary" if wanted.pop("origin", None) == "summary" else "agent"
        agents = [a for a in wanted.get("agents") or [] if isinstance(a, str)]
        payload = {
            "fact_id": fact_id or f"fact-{ULID()}",
            "project": project,
            **checked,
            "confidence": _confidence(confidence),
            "status": status,
            "origin": origin,
            "author": author[:128],
            "source": {
                "thread": wanted.get("thread"),
                "message": wanted.get("message"),
                "agents": list(dict.fromkeys([author[:128], *agents]))[:100],
            },
        }
        return await self._emit(payload)

    async def post_fact(
        self, caller: Caller, project: str, sender: str, content: dict[str, Any], message_id: str
    ) -> dict[str, Any]:
        """``bzzz_post`` of ``message_type: "fact"`` to ``bzzz://*@PROJECT/knowledge``."""
        unknown = sorted(set(content) - CONTENT_KEYS)
        if unknown:
            raise InvalidParameters(
                f"a fact's content has subject, relation, object and optionally statement, "
                f"confidence, status; not {', '.join(unknown)}",
                details={"field": unknown[0]},
            )
        fact = await self.state(
            caller,
            project,
            content.get("subject"),  # type: ignore[arg-type]  # checked in state
            content.get("relation"),  # type: ignore[arg-type]
            content.get("object"),  # type: ignore[arg-type]
            statement=content.get("statement"),
            status=content.get("status", AGREED_STATUS),
            confidence=content.get("confidence", 1.0),
            author=sender,
            fact_id="fact-" + message_id.removeprefix("msg-"),
        )
        return {
            "success": True,
            "message_id": message_id,
            "target_address": f"bzzz://*@{project}/knowledge",
            "message_type": "fact",
            "fact": fact,
            "posted_at": fact["recorded_at"],
        }

    def _checked(self, content: dict[str, Any]) -> dict[str, Any]:
        checked: dict[str, Any] = {
            "subject": _field_text(content, "subject", ENTITY_LENGTH, True),
            "relation": _field_text(content, "relation", RELATION_LENGTH, True),
            "object": _field_text(content, "object", ENTITY_LENGTH, True),
        }
        statement = _field_text(content, "statement", STATEMENT_LENGTH, False)
        if statement is not None:
            checked["statement"] = statement
        return checked

    async def _author(self, caller: Caller) -> str:
        if self.author_of is not None:
            return await self.author_of(caller)
        return caller.principal.actor

    async def _emit(self, payload: dict[str, Any]) -> dict[str, Any]:
        key = payload["author"] if domain.names_an_agent(payload["author"]) else "principal"
        outcome = await self._log.emit(
            projection.STATED,
            projection.KIND,
            projection.subject_key(key),
            payload,
            project=payload["project"],
        )
        raise_store_failure(outcome)
        if not outcome.get("ok"):
            raise InvalidParameters(
                f"the fact was refused: {outcome.get('reason')}",
                details={"reason": outcome.get("reason")},
            )
        self.stated += 0 if outcome.get("duplicate") else 1
        return await self._stored(payload["fact_id"])

    async def _stored(self, fact_id: str) -> dict[str, Any]:
        async with self._db.session() as session:
            row = await session.get(FactRow, fact_id)
            if row is None:
                raise InvalidParameters(
                    f"no fact '{fact_id}'", details={"field": "fact_id", "fact_id": fact_id}
                )
            return Fact.of(row).to_json()

    async def agree(
        self, caller: Caller, fact_id: str, *, agent: str | None = None
    ) -> dict[str, Any]:
        """Agree with a fact (a proposed one becomes agreed); by anyone of its project but
        its author: a participant of its source thread, or a second agent."""
        who = caller.principal
        who.require(Scope.WRITE, "agreeing with a fact")
        async with self._db.session() as session:
            row = await session.get(FactRow, fact_id)
            project = row.project if row is not None else None
            author = row.author if row is not None else None
        if row is None or not who.may_see_project(project):
            # Another project's fact is as unknown as a missing one.
            raise InvalidParameters(
                f"no fact '{fact_id[:64]}' in your projects", details={"field": "fact_id"}
            )
        agent = agent or await self._author(caller)
        if agent == author:
            raise PermissionDenied(
                "a fact is agreed by someone other than its author (a participant of its "
                "thread, or a second agent)",
                details={"missing": "another agent", "fact_id": fact_id},
            )
        outcome = await self._log.emit(
            projection.AGREED,
            projection.KIND,
            projection.subject_key(author or "principal"),
            {"fact_id": fact_id, "agent": agent[:128]},
            project=project,
        )
        raise_store_failure(outcome)
        if not outcome.get("ok"):
            raise InvalidParameters(
                f"not agreed: {outcome.get('reason')}",
                details={"field": "fact_id", "reason": outcome.get("reason")},
            )
        return await self._stored(fact_id)

    # --- consensus ---------------------------------------------------------------------------

    async def on_thread_message(self, thread_id: str, outcome: dict[str, Any]) -> None:
        """A message that completed a consensus: its decision becomes a fact."""
        if outcome.get("consensus"):
            await self.from_consensus(thread_id)

    async def from_consensus(self, thread_id: str) -> dict[str, Any] | None:
        """State the fact of a thread's consensus, when this node completed it (None: no
        consensus, another node's, a thread without a project, or stated already)."""
        async with self._db.session() as session:
            repo = Repository(session)
            thread = await repo.thread(thread_id)
            owner = await repo.consensus_origin(thread_id)
            consensus = thread.consensus if thread is not None else None
            message_id = (consensus or {}).get("decision_message_id")
            message = await repo.message(message_id) if isinstance(message_id, str) else None
        if thread is None or not consensus or message is None:
            return None
        if owner is not None and owner != self._log.node_id:
            return None
        project = thread_project(thread)
        if project is None or project == NO_PROJECT:
            return None
        decisions = [str(d) for d in consensus.get("decisions") or []]
        if not decisions or not decisions[0].strip():
            # Its text was erased with its author: so is the fact (it is not stated again).
            return None
        fact_id = consensus_fact_id(thread.id, message.id)
        payload = {
            "fact_id": fact_id,
            "project": project,
            **_consensus_triple(thread, message.content, decisions[0] if decisions else ""),
            "confidence": _bounded_confidence(consensus.get("confidence")),
            "status": AGREED_STATUS,
            "origin": "consensus",
            "author": message.sender[:128],
            "source": {
                "thread": thread.id,
                "message": message.id,
                "agents": [str(a)[:128] for a in consensus.get("agreed_by") or []][:100],
            },
        }
        try:
            fact = await self._emit(payload)
        except InvalidParameters as exc:
            logger.info("no fact from the consensus of %s: %s", thread_id, exc.message)
            self._audited(payload, f"refused:{exc.code}")
            return None
        self._audited(payload, "ok")
        return fact

    def _audited(self, payload: dict[str, Any], outcome: str) -> None:
        """The node's own fact (a consensus's) on its audit trail: ids and a digest, no text."""
        if self.audit is None:
            return
        self.audit(
            Action(
                at=stamp(self.clock.now()),
                principal=f"node:{self._log.node_id}"[:256],
                session="knowledge",
                action="knowledge:consensus_fact",
                outcome=outcome[:64],
                digest=digest(payload),
                agent=payload["author"] if domain.names_an_agent(payload["author"]) else None,
                target=f"bzzz://*@{payload['project']}/knowledge/{payload['fact_id']}"[:512],
            )
        )

    async def facts_missing(self) -> int:
        """State the facts this node's consensus still owes (it stopped in between)."""
        stated, after = 0, ""
        while True:
            async with self._db.session() as session:
                owed = list(
                    await session.scalars(
                        select(ThreadRow.id)
                        .where(
                            ThreadRow.consensus_origin == self._log.node_id,
                            ThreadRow.id > after,
                            ThreadRow.id.not_in(
                                select(FactRow.source_thread).where(FactRow.origin == "consensus")
                            ),
                        )
                        .order_by(ThreadRow.id)
                        .limit(CATCH_UP_BATCH)
                    )
                )
            for thread_id in owed:
                if thread_id in self._no_fact:
                    continue
                if await self.from_consensus(thread_id) is not None:
                    stated += 1
                else:
                    self._no_fact.add(thread_id)  # no project, erased, refused: not again
            if len(owed) < CATCH_UP_BATCH:
                return stated
            after = owed[-1]

    async def run_catch_up(self, interval: float = CATCH_UP_SECONDS) -> None:
        """Open the recent projects' facts, then state owed consensus facts now and every
        ``interval`` seconds, until cancelled."""
        try:
            await self.warm()
        except BzzzError as exc:
            logger.warning("knowledge not opened ahead (%s); the first read opens it", exc.message)
        while True:
            try:
                stated = await self.facts_missing()
                if stated:
                    logger.info("stated %d facts of consensus reached before a stop", stated)
            except BzzzError as exc:
                logger.warning("consensus facts not caught up (%s); trying later", exc.message)
            await asyncio.sleep(interval)

    # --- reading -----------------------------------------------------------------------------

    def _may_read(self, who: Principal, project: Any) -> str:
        who.require(Scope.READ, "reading knowledge")
        named = _project(project)
        who.require_project(named, "reading the project's knowledge")
        return named

    async def search(
        self,
        who: Principal,
        project: str,
        *,
        about: str | None = None,
        q: str | None = None,
        as_of: datetime | None = None,
        max_history: int = 0,
        limit: int = DEFAULT_LIMIT,
    ) -> dict[str, Any]:
        """The project's facts best first: about an entity, matching words, as of a time;
        with the entity's neighbourhood (facts sharing an entity with them, two hops)."""
        project = self._may_read(who, project)
        about, q = selection.search_terms(about, q)
        as_of = _as_of(as_of)
        if not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
            raise InvalidParameters(
                f"limit is from 1 to {MAX_LIMIT}", details={"field": "limit", "limit": MAX_LIMIT}
            )
        history = min(max(int(max_history), 0), MAX_HISTORY)
        index = await self._index(project)
        shown, total = selection.select_facts(
            index, about, q, as_of, agreed_only=False, limit=limit
        )
        facts = [selection.shown(index, fact, history) for fact in shown]
        neighbourhood = selection.neighbourhood(index, about, as_of) if about is not None else []
        return {
            "project": project,
            "about": about,
            "q": q,
            "as_of": domain.iso(as_of),
            "facts": facts,
            "count": len(facts),
            "total": total,
            "neighbourhood": neighbourhood,
        }

    async def history(self, who: Principal, project: str, fact_id: str) -> dict[str, Any]:
        """A fact, the facts it superseded (older first) and those that superseded it."""
        project = self._may_read(who, project)
        index = await self._index(project)
        fact = index.facts.get(fact_id)
        if fact is None:
            raise InvalidParameters(
                f"no fact '{fact_id[:64]}' in project '{project}'", details={"field": "fact_id"}
            )
        earlier = selection.chain(index, fact, backwards=True, limit=MAX_HISTORY)
        later = selection.chain(index, fact, backwards=False, limit=MAX_HISTORY)
        return {
            "fact": fact.to_json(),
            "superseded": [f.to_json() for f in reversed(earlier)],
            "superseded_by": [f.to_json() for f in later],
        }

    async def for_prompt(
        self, project: str, text: str, *, limit: int = 8, max_chars: int = 2000
    ) -> list[dict[str, Any]]:
        """The agreed, current facts of ``project`` most relevant to ``text`` (hosted agents'
        prompts: the node itself reads), at most ``limit`` and ``max_chars`` of statements."""
        if not project or project == NO_PROJECT or limit <= 0 or max_chars <= 0:
            return []
        words = query_words(text[:20_000], limit=PROMPT_TEXT_WORDS)
        if not words:
            return []
        index = await self._index(project)
        best, _ = selection.select_facts(
            index, None, None, None, agreed_only=True, limit=limit,
            words=index.rarest(words, PROMPT_WORDS),
        )  # fmt: skip
        chosen: list[dict[str, Any]] = []
        used = 0
        for fact in best:
            shown = fact.to_json()
            line = selection.prompt_line(shown)
            if used + len(line) > max_chars:
                break
            chosen.append(shown)
            used += len(line) + 1
        return chosen

    async def read_address(
        self, caller: Caller, project: str, path: str, params: Any
    ) -> dict[str, Any]:
        """``bzzz_get`` of ``bzzz://*@PROJECT/knowledge`` (search) or ``…/knowledge/<fact_id>``
        (a fact's history)."""
        fact_id = path.removeprefix("/knowledge").strip("/")
        if fact_id:
            found = await self.history(caller.principal, project, fact_id)
            return found | {"last_updated": found["fact"]["recorded_at"]}
        found = await self.search(
            caller.principal,
            project,
            about=getattr(params, "about", None),
            q=getattr(params, "q", None),
            as_of=getattr(params, "as_of", None),
            max_history=getattr(params, "max_history", 0),
            limit=getattr(params, "limit", None) or DEFAULT_LIMIT,
        )
        newest = max((f["recorded_at"] for f in found["facts"]), default=None)
        return found | {"last_updated": newest}

    # --- the index of opened facts --------------------------------------------------------

    async def _index(self, project: str) -> ProjectIndex:
        """The project's facts in memory, brought up to the store's newest change."""
        async with self._loading:
            index = self._indexes.get(project)
            if index is None:
                index = ProjectIndex(project)
                self._indexes[project] = index
                while len(self._indexes) > INDEXED_PROJECTS:
                    self._indexes.popitem(last=False)
            self._indexes.move_to_end(project)
            if index.stale:
                await self._drop_removed(index)
            elif not self._may_have_changed(index):
                return index
            self._changed.discard(project)
            index.checked = time.monotonic()
            # Page by page, handing the loop back between pages: a cold load of 100,000 facts
            # opens 400,000 sealed values and must not hold every other caller that long.
            while True:
                async with self._db.session() as session:
                    rows = (await session.execute(_changed(project, index.cursor))).all()
                for row in rows:
                    index.put(Fact.of(row))
                if len(rows) < LOAD_PAGE:
                    return index
                await asyncio.sleep(0)

    async def _drop_removed(self, index: ProjectIndex) -> None:
        """Forget the opened facts the store no longer holds (erasure, retention removed them)."""
        async with self._db.session() as session:
            kept = set(
                await session.scalars(select(_FACTS.c.id).where(_FACTS.c.project == index.project))
            )
        for fact_id in [f for f in index.facts if f not in kept]:
            index.remove(fact_id)
        index.stale = False

    def _may_have_changed(self, index: ProjectIndex) -> bool:
        """Whether the store may hold changes the index has not loaded: the log applied a
        fact of its project since, or the last look is older than RECHECK_SECONDS."""
        fresh = time.monotonic() - index.checked < RECHECK_SECONDS
        return index.project in self._changed or not fresh

    def _on_outcomes(self, outcomes: dict[str, Any]) -> None:
        """Facts of a project changed: its index loads them at its next read. Erasure or
        retention may have removed rows: each index checks its ids then."""
        for outcome in outcomes.values():
            project = outcome.get("project")
            if outcome.get("fact_id") and isinstance(project, str):
                self._changed.add(project)
            if outcome.get("retention") in ("applied", "forgotten"):
                for index in self._indexes.values():
                    index.stale = True

    async def warm(self, projects: int = INDEXED_PROJECTS) -> int:
        """Open the facts of the projects changed most recently (at start, in the background:
        the first read of a large project then finds them opened); how many projects."""
        async with self._db.session() as session:
            newest = func.max(_FACTS.c.v)
            rows = await session.execute(
                select(_FACTS.c.project).group_by(_FACTS.c.project).order_by(newest.desc())
                .limit(projects)
            )  # fmt: skip
            names = [str(r[0]) for r in rows]
        for project in reversed(names):  # the most recent last: least likely to be evicted
            await self._index(project)
        return len(names)


_FACTS = cast(Table, FactRow.__table__)


def _changed(project: str, cursor: tuple[int, str]) -> Any:
    """A page of a project's facts changed after ``cursor`` (change number, id), in order."""
    v, fact_id = cursor
    return (
        select(*_FACTS.c)
        .where(
            _FACTS.c.project == project,
            # A row value: the index on (project, v, id) seeks to it.
            tuple_(_FACTS.c.v, _FACTS.c.id) > tuple_(literal(v), literal(fact_id)),
        )
        .order_by(_FACTS.c.v, _FACTS.c.id)
        .limit(LOAD_PAGE)
    )


def _bounded_confidence(value: Any) -> float:
    try:
        return check_confidence(value)
    except ValueError:
        return 1.0


def _consensus_triple(
    thread: domain.Thread, content: dict[str, Any], decision: str
) -> dict[str, str]:
    """Subject, relation, object and statement of a consensus's fact (see the module doc)."""
    inner = content.get("fact")
    given: dict[str, Any] = inner if isinstance(inner, dict) else content
    statement = (decision or thread.topic).strip()[:STATEMENT_LENGTH] or thread.id
    triple = {k: given.get(k) for k in ("subject", "relation", "object")}
    limits = {"subject": ENTITY_LENGTH, "relation": RELATION_LENGTH, "object": ENTITY_LENGTH}
    if all(isinstance(v, str) and v.strip() for v in triple.values()):
        chosen = {k: str(v).strip()[: limits[k]] for k, v in triple.items()}
    else:
        chosen = {
            "subject": (thread.topic.strip() or thread.id)[:ENTITY_LENGTH],
            "relation": "decided",
            "object": statement[:ENTITY_LENGTH],
        }
    return chosen | {"statement": statement}


prompt_line = selection.prompt_line

__all__ = ["PROPOSED", "KnowledgeService", "consensus_fact_id", "prompt_line"]
