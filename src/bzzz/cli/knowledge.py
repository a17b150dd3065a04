"""`bzzz knowledge search|show|export`: a project's facts, read from the data directory's store.

The commands read the store through the knowledge service's own reads and access checks, as
`bzzz threads` does: by default as the local user of the data directory (an admin of every
project); with ``--token`` (or ``BZZZ_TOKEN``) as the principal of that network token, so a
token of another project is refused as it is over MCP and REST. No node starts, and a running
one is not disturbed. Each read is on the audit trail (``cli:knowledge``).

``export`` writes the project's current facts for a graph database of the team's choosing:
``--format jsonld`` (one JSON-LD document) or ``--format graphiti`` (JSON lines, each the
arguments of Graphiti's ``add_triplet``: source node, edge, target node).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from bzzz.cli import output as out
from bzzz.cli import start as start

if TYPE_CHECKING:
    from bzzz.config import Settings
    from bzzz.principal import Principal

T = TypeVar("T")
# The knowledge service's bounds (bzzz.knowledge.service), kept here so help loads nothing.
MAX_LIMIT = 100
MAX_HISTORY = 20
EXPORT_LIMIT = 100
# The namespace of the entities' ids in an export: the same name in a project, the same id.
ENTITY_NAMESPACE = uuid.UUID("6b1f4c52-8a4e-4d0f-9a43-2a1c3f0b7e55")
JSONLD_CONTEXT = {
    "@vocab": "https://bzzz.dev/ns/knowledge#",
    "schema": "https://schema.org/",
    "name": "schema:name",
    "validFrom": {"@id": "schema:validFrom", "@type": "schema:DateTime"},
    "validUntil": {"@id": "schema:validThrough", "@type": "schema:DateTime"},
    "recordedAt": {"@id": "schema:dateCreated", "@type": "schema:DateTime"},
    "subject": {"@type": "@id"},
    "object": {"@type": "@id"},
    "supersededBy": {"@type": "@id"},
}


def add_parser(sub: Any) -> None:
    """The `knowledge` command group."""
    knowledge = sub.add_parser("knowledge", help="a project's facts: search, show, export")
    actions = knowledge.add_subparsers(dest="knowledge_command", required=True)
    search = actions.add_parser("search", help="a project's facts, best first")
    _project(search)
    search.add_argument("--about", help="an entity: its facts and its neighbourhood")
    search.add_argument("q", nargs="*", metavar="Q", help="words to rank the facts by")
    search.add_argument("--as-of", help="the facts as they stood then (an ISO 8601 time)")
    search.add_argument(
        "--history",
        type=int,
        default=0,
        help=f"superseded versions shown with each fact (0-{MAX_HISTORY})",
    )
    search.add_argument(
        "--limit", type=_bounded, default=20, help=f"at most N facts (1-{MAX_LIMIT})"
    )
    _token(search)
    out.json_flag(search, '{"facts": [Fact], "neighbourhood": [...]}')
    show = actions.add_parser("show", help="a fact and its history")
    show.add_argument("fact_id", metavar="FACT_ID", help="the fact's id")
    _project(show)
    _token(show)
    out.json_flag(show, '{"fact": Fact, "superseded": [Fact], "superseded_by": [Fact]}')
    export = actions.add_parser("export", help="a project's facts as JSON-LD or for Graphiti")
    _project(export)
    export.add_argument("--format", choices=("jsonld", "graphiti"), default="jsonld")
    export.add_argument("-o", "--output", help="write to this file (default: stdout)")
    _token(export)


def _project(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--project", help="the project (default: the token's, when it has exactly one)"
    )


def _token(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--token",
        help="read as this network token's principal (better BZZZ_TOKEN: other users see a "
        "command line; default: the local user)",
    )


def _bounded(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 1 <= value <= MAX_LIMIT:
        raise argparse.ArgumentTypeError(f"{value} is not between 1 and {MAX_LIMIT}")
    return value


# --- reading ---------------------------------------------------------------------------------


async def _principal(db: Any, secret: str | None) -> Principal:
    """The local user, or the principal of a network token this data directory knows."""
    from bzzz.access.tokens import TokenRegistry
    from bzzz.domain import utcnow
    from bzzz.errors import PermissionDenied
    from bzzz.principal import LOCAL

    if not secret:
        return LOCAL
    tokens = TokenRegistry()
    await tokens.load(db)
    record = tokens.by_secret(secret)
    if record is None or not record.valid_at(utcnow()):
        raise PermissionDenied(
            "the token is not a valid token of this network", details={"missing": "token"}
        )
    return record.principal()


def _time(text: str | None) -> datetime | None:
    """An ISO 8601 time with its zone (INVALID_PARAMETERS otherwise)."""
    from bzzz.errors import InvalidParameters

    if text is None:
        return None
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        when = None
    if when is None or when.tzinfo is None:
        raise InvalidParameters(
            f"--as-of {text[:64]!r} is not an ISO 8601 time with its zone",
            details={"field": "as_of"},
        )
    return when


def _project_of(args: argparse.Namespace, who: Principal) -> str:
    from bzzz.errors import InvalidParameters

    if args.project:
        return str(args.project)
    if not who.all_projects and len(who.projects) == 1:
        return str(next(iter(who.projects)))
    raise InvalidParameters("name the project: --project P", details={"field": "project"})


class _NoProjector:
    """The CLI applies nothing: what the service would listen to never speaks."""

    def add_outcome_listener(self, listener: Any) -> None:
        """Nothing is applied here."""


@contextlib.asynccontextmanager
async def reading(settings: Settings, secret: str | None) -> AsyncIterator[tuple[Any, Principal]]:
    """The knowledge service's reads on the store, and who reads, for one command."""
    from typing import cast

    from bzzz.cli.work import _ReadOnlyLog
    from bzzz.eventlog import EventLog
    from bzzz.knowledge.service import KnowledgeService
    from bzzz.network.identity import KEY_FILE, NodeIdentity

    data_dir = start.require_node(settings)
    start.require_node(settings, KEY_FILE)
    node_id = NodeIdentity.load_or_create(data_dir).node_id
    async with start.opened_store(settings) as db:
        log = _ReadOnlyLog(settings.bzzz.network_id, node_id)
        log.projector = _NoProjector()  # type: ignore[attr-defined]  # the service listens
        service = KnowledgeService(db, cast(EventLog, log))
        yield service, await _principal(db, secret)


def _read(
    settings: Settings, args: argparse.Namespace, work: Callable[[Any, Principal], Awaitable[T]]
) -> T:
    from bzzz.errors import ConfigError
    from bzzz.network.sealing import SealError

    secret = args.token or os.environ.get("BZZZ_TOKEN") or None

    async def run() -> T:
        async with reading(settings, secret) as (service, who):
            return await work(service, who)

    try:
        return asyncio.run(run())
    except SealError as exc:
        raise ConfigError(
            f"cannot open the store's sealed content ({exc.reason}): give this command the "
            "network key the node runs with (BZZZ_NETWORK_KEY or BZZZ_NETWORK_KEY_FILE)"
        ) from None


# --- the commands ------------------------------------------------------------------------------


def run(args: argparse.Namespace, settings: Settings) -> int:
    """Run `bzzz knowledge …`."""
    command = {"search": _search, "show": _show, "export": _export}[args.knowledge_command]
    return command(args, settings)


def _search(args: argparse.Namespace, settings: Settings) -> int:
    from bzzz.errors import InvalidParameters

    if not 0 <= args.history <= MAX_HISTORY:
        raise InvalidParameters(
            f"--history is between 0 and {MAX_HISTORY}", details={"field": "max_history"}
        )
    words = " ".join(args.q) or None
    as_of = _time(args.as_of)

    async def work(service: Any, who: Principal) -> dict[str, Any]:
        found: dict[str, Any] = await service.search(
            who,
            _project_of(args, who),
            about=args.about,
            q=words,
            as_of=as_of,
            max_history=args.history,
            limit=args.limit,
        )
        return found

    found = _read(settings, args, work)
    if args.json:
        out.print_json(found)
        return 0
    _facts_table("facts", found.get("facts") or [])
    return 0


def _show(args: argparse.Namespace, settings: Settings) -> int:
    async def work(service: Any, who: Principal) -> dict[str, Any]:
        shown: dict[str, Any] = await service.history(who, _project_of(args, who), args.fact_id)
        return shown

    shown = _read(settings, args, work)
    if args.json:
        out.print_json(shown)
        return 0
    fact = shown.get("fact") or {}
    _facts_table(f"fact {args.fact_id}", [fact] if fact else [])
    versions = history_of(shown)
    if len(versions) > 1:
        _facts_table("its versions (oldest first)", versions)
    return 0


def history_of(shown: dict[str, Any]) -> list[dict[str, Any]]:
    """Every version a history answer lists, oldest first: those the fact superseded, the
    fact, and those that superseded it."""
    found = [
        *(shown.get("superseded") or []),
        shown.get("fact"),
        *(shown.get("superseded_by") or []),
    ]
    return [f for f in found if isinstance(f, dict)]


def _facts_table(title: str, facts: list[dict[str, Any]]) -> None:
    columns = [
        out.Column("id", whole=True),
        out.Column("subject"),
        out.Column("relation"),
        out.Column("object"),
        out.Column("status"),
        out.Column("valid from", whole=True),
        out.Column("valid until", whole=True),
        out.Column("source"),
    ]
    cells = [
        [
            str(f.get("id")),
            str(f.get("subject")),
            str(f.get("relation")),
            str(f.get("object")),
            str(f.get("status")),
            str(f.get("valid_from") or ""),
            str(f.get("valid_until") or ""),
            _source(f),
        ]
        for f in facts
    ]
    out.print_table(title, columns, cells)


def _source(fact: dict[str, Any]) -> str:
    source = fact.get("source") if isinstance(fact.get("source"), dict) else {}
    assert isinstance(source, dict)
    parts = [f"thread {source['thread']}"] if source.get("thread") else []
    agents = source.get("agents") or []
    if agents:
        parts.append("by " + ", ".join(str(a) for a in agents))
    return "; ".join(parts) or str(fact.get("author") or "")


def _export(args: argparse.Namespace, settings: Settings) -> int:
    async def work(service: Any, who: Principal) -> tuple[str, list[dict[str, Any]]]:
        project = _project_of(args, who)
        found = await service.search(who, project, limit=EXPORT_LIMIT)
        return project, list(found.get("facts") or [])

    project, facts = _read(settings, args, work)
    if args.format == "jsonld":
        text = json.dumps(jsonld(project, facts), indent=2) + "\n"
    else:
        text = "".join(json.dumps(t) + "\n" for t in graphiti_triplets(project, facts))
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0


# --- export formats ----------------------------------------------------------------------------


def entity_id(project: str, name: str) -> str:
    """An entity's stable id in an export (a UUID of its project and name)."""
    return str(uuid.uuid5(ENTITY_NAMESPACE, f"{project}\x00{name}"))


def jsonld(project: str, facts: list[dict[str, Any]]) -> dict[str, Any]:
    """The facts as one JSON-LD document: entities and facts in one ``@graph``."""
    entities: dict[str, dict[str, Any]] = {}
    graph: list[dict[str, Any]] = []
    for fact in facts:
        ends = []
        for name in (str(fact.get("subject")), str(fact.get("object"))):
            ref = f"urn:uuid:{entity_id(project, name)}"
            entities.setdefault(ref, {"@id": ref, "@type": "Entity", "name": name})
            ends.append(ref)
        source = fact.get("source") if isinstance(fact.get("source"), dict) else {}
        entry = {
            "@id": f"bzzz://{project}/knowledge/{fact.get('id')}",
            "@type": "Fact",
            "subject": ends[0],
            "relation": fact.get("relation"),
            "object": ends[1],
            "statement": fact.get("statement"),
            "status": fact.get("status"),
            "confidence": fact.get("confidence"),
            "author": fact.get("author"),
            "source": source,
            "validFrom": fact.get("valid_from"),
            "validUntil": fact.get("valid_until"),
            "recordedAt": fact.get("recorded_at"),
        }
        graph.append({k: v for k, v in entry.items() if v not in (None, {}, [])})
    return {
        "@context": JSONLD_CONTEXT,
        "@id": f"bzzz://{project}/knowledge",
        "@graph": [*entities.values(), *graph],
    }


def _edge_name(relation: str) -> str:
    # Graphiti names edges in upper snake case (RELATES_TO).
    words = "".join(c if c.isalnum() else " " for c in relation).split()
    return "_".join(words).upper() or "RELATES_TO"


def graphiti_triplets(project: str, facts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each fact as the arguments of Graphiti's ``add_triplet(source_node, edge, target_node)``
    (``EntityNode(**source_node)``, ``EntityEdge(**edge)``); the project is the group."""
    triplets = []
    for fact in facts:
        subject, obj = str(fact.get("subject")), str(fact.get("object"))
        source = fact.get("source") if isinstance(fact.get("source"), dict) else {}
        assert isinstance(source, dict)
        source_node = {"uuid": entity_id(project, subject), "name": subject, "group_id": project}
        target_node = {"uuid": entity_id(project, obj), "name": obj, "group_id": project}
        edge = {
            "uuid": str(uuid.uuid5(ENTITY_NAMESPACE, f"fact\x00{fact.get('id')}")),
            "group_id": project,
            "source_node_uuid": source_node["uuid"],
            "target_node_uuid": target_node["uuid"],
            "name": _edge_name(str(fact.get("relation"))),
            "fact": fact.get("statement") or f"{subject} {fact.get('relation')} {obj}",
            "created_at": fact.get("recorded_at"),
            "valid_at": fact.get("valid_from"),
            "invalid_at": fact.get("valid_until"),
            "episodes": [str(source["thread"])] if source.get("thread") else [],
        }
        triplets.append({"source_node": source_node, "edge": edge, "target_node": target_node})
    return triplets
