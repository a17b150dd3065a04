"""`bzzz agents`, `bzzz threads`, `bzzz tasks`, `bzzz inbox AGENT`: the work on the network.

The commands read the data directory's store through the services' own reads (the agent
service's lookup and get, the dashboard's overview), with their access checks, as the local
user of the data directory (an admin of every project, as for the other CLI commands). No node
starts and a running one is not disturbed: the store is read beside it. Reading an inbox, the
threads or the tasks shows content, so each of those reads is on the audit trail
(``cli:inbox``, ``cli:threads``, ``cli:tasks``; cli/audit.py), as the MCP tools' reads are.

``--json`` prints one JSON object; ``--project P`` keeps a project's agents, threads or tasks.

`bzzz inbox AGENT` also goes through a running node (``cli/remote.py``) when given a node or a
token (``--url``, ``--token``, ``BZZZ_URL``, ``BZZZ_TOKEN``) or asked to ``--mark-read``: with
the agent's own token, an agent runner reads its unread messages and marks them read (a
change on the network's log, on the node's audit trail). Read marks are the network's
(``bzzz.agents.inbox``): ``--unread`` shows what no one marked read, whichever way it is read.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from bzzz.cli import output as out
from bzzz.cli import start as start

if TYPE_CHECKING:
    from bzzz.agents.inbox import InboxService
    from bzzz.agents.overview import Overview
    from bzzz.agents.service import AgentService
    from bzzz.config import Settings
    from bzzz.eventlog import Caller

T = TypeVar("T")
DEFAULT_LIMIT = 50


def add_parser(sub: Any) -> None:
    """The `agents`, `threads`, `tasks` and `inbox` commands."""
    agents = sub.add_parser("agents", help="the agents on the network (every project's)")
    agents.add_argument("--project", help="only this project's")
    agents.add_argument("--role", help="only agents of this role")
    agents.add_argument("--online", action="store_true", help="only agents online")
    _limit(agents, 100)
    out.json_flag(agents, '{"agents": [Agent], "count": n, "total": n}')
    threads = sub.add_parser("threads", help="conversation threads, most recently active first")
    threads.add_argument("--project", help="only this project's")
    threads.add_argument("--agent", help="only the threads of this agent")
    _limit(threads, DEFAULT_LIMIT)
    out.json_flag(threads, '{"threads": [Thread], "count": n}')
    tasks = sub.add_parser("tasks", help="tasks of the agents, newest first")
    tasks.add_argument("--project", help="only this project's")
    tasks.add_argument("--agent", help="only the tasks of this agent")
    _limit(tasks, DEFAULT_LIMIT)
    out.json_flag(tasks, '{"tasks": [Task], "count": n}')
    inbox = sub.add_parser(
        "inbox",
        help="an agent's inbox, newest first",
        description="An agent's inbox, newest first. Read from the data directory's store, "
        "or through the node (--url, --token, BZZZ_URL, BZZZ_TOKEN, and always with "
        "--mark-read) with the agent's own token.",
    )
    inbox.add_argument("agent", metavar="AGENT", help="the agent's id")
    inbox.add_argument(
        "--unread", action="store_true", help="only the messages not marked read yet"
    )
    inbox.add_argument(
        "--mark-read",
        action="store_true",
        help="mark the messages shown read (through the node; on its audit trail)",
    )
    inbox.add_argument(
        "--format",
        choices=("table", "text", "json"),
        default=None,
        help="table (default), text (plain lines, for an agent's context) or json",
    )
    _limit(inbox, DEFAULT_LIMIT)
    out.json_flag(inbox, '{"agent_id": ..., "messages": [Message], "count": n, "unread": n}')
    from bzzz.cli import remote

    remote.add_flags(inbox)


def _limit(parser: argparse.ArgumentParser, default: int) -> None:
    parser.add_argument(
        "--limit",
        type=_bounded,
        default=default,
        help=f"at most N (1-1000, default {default})",
    )


def _bounded(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 1 <= value <= 1000:
        raise argparse.ArgumentTypeError(f"{value} is not between 1 and 1000")
    return value


class _ReadOnlyLog:
    """What the agent service reads of the node's log when the CLI only reads: the network and
    the node. Nothing the CLI calls writes; if something did, it is refused here."""

    def __init__(self, network: str, node_id: str) -> None:
        from bzzz.projects import ALL_PROJECTS

        self.network = network
        self.node_id = node_id
        self.projects = ALL_PROJECTS

    def require_served(self, project: str | None) -> None:
        """Every project is read here."""

    async def emit(self, *args: Any, **kwargs: Any) -> Any:
        """The CLI's reads write nothing."""
        from bzzz.errors import BzzzError

        raise BzzzError("this command only reads; it cannot change the network")


class Reader:
    """The services' reads over the data directory's store, as the local user."""

    def __init__(
        self, agents: AgentService, overview: Overview, inbox: InboxService, caller: Caller
    ) -> None:
        self.agents = agents
        self.overview = overview
        self.inbox = inbox
        self.caller = caller


@contextlib.asynccontextmanager
async def reading(settings: Settings) -> AsyncIterator[Reader]:
    """The services' reads on the store, for the time of a command (a node must have run)."""
    from typing import cast

    from bzzz.agents.inbox import InboxService
    from bzzz.agents.overview import Overview
    from bzzz.agents.service import AgentService
    from bzzz.eventlog import Caller, EventLog
    from bzzz.network.identity import KEY_FILE, NodeIdentity
    from bzzz.principal import LOCAL
    from bzzz.store.directory import AgentDirectory
    from bzzz.store.repository import Repository

    data_dir = start.require_node(settings)
    start.require_node(settings, KEY_FILE)
    node_id = NodeIdentity.load_or_create(data_dir).node_id
    async with start.opened_store(settings) as db:
        directory = AgentDirectory()
        async with db.session() as session:
            directory.load(await Repository(session).all_agents())
        log = cast(EventLog, _ReadOnlyLog(settings.bzzz.network_id, node_id))
        agents = AgentService(db, log, directory, settings.agents.max_agents)
        inbox = InboxService(db, log, agents)
        yield Reader(agents, Overview(db, agents, node_id), inbox, Caller("cli", LOCAL))


def _read(settings: Settings, work: Callable[[Reader], Awaitable[T]]) -> T:
    from bzzz.errors import ConfigError
    from bzzz.network.sealing import SealError

    async def run() -> T:
        async with reading(settings) as reader:
            return await work(reader)

    try:
        return asyncio.run(run())
    except SealError as exc:
        # The store's content is sealed under the network key the node runs with.
        raise ConfigError(
            f"cannot open the store's sealed content ({exc.reason}): give this command the "
            "network key the node runs with (BZZZ_NETWORK_KEY or BZZZ_NETWORK_KEY_FILE)"
        ) from None


# --- bzzz agents ---------------------------------------------------------------------------------


async def list_agents(reader: Reader, args: argparse.Namespace) -> dict[str, Any]:
    """The agents (bzzz_lookup of ``bzzz://*:<role>@<project>``), best first."""
    from bzzz.schemas import LookupInput

    address = f"bzzz://*:{args.role or '*'}@{args.project or '*'}"
    # Lookups match agents without a project to any project: a person asking for a project
    # wants that project's, so those are left out here; the limit applies after.
    found = await reader.agents.lookup(
        reader.caller, LookupInput(semantic_address=address, limit=1000)
    )
    matches = [
        agent
        for agent in found["matches"]
        if (args.project is None or agent["project"] == args.project)
        and (not args.online or agent["status"] != "offline")
    ]
    shown = matches[: args.limit]
    # A lookup answers at most 1,000 agents; unfiltered, its own count is the whole total.
    total = len(matches) if args.project or args.online else found["total_matches"]
    return {"agents": shown, "count": len(shown), "total": total}


def agents(args: argparse.Namespace, settings: Settings) -> int:
    """Run `bzzz agents`."""
    listed = _read(settings, lambda reader: list_agents(reader, args))
    if args.json:
        out.print_json(listed)
        return 0
    columns = [
        out.Column("id", whole=True),
        out.Column("role"),
        out.Column("project"),
        out.Column("status"),
        out.Column("tasks", justify="right"),
        out.Column("last activity", whole=True),
        out.Column("capabilities"),
    ]
    cells = [
        [
            a["id"],
            a["role"],
            a["project"] or "",
            a["status"],
            f"{a['active_tasks']}/{a['max_tasks']}",
            a["last_activity"] or "",
            ", ".join(a["capabilities"]),
        ]
        for a in listed["agents"]
    ]
    out.print_table(f"agents ({listed['count']} of {listed['total']})", columns, cells)
    return 0


# --- bzzz threads --------------------------------------------------------------------------------


def _project_of(thread: dict[str, Any]) -> str | None:
    metadata = thread.get("metadata")
    project = metadata.get("project") if isinstance(metadata, dict) else None
    return project if isinstance(project, str) else None


async def list_threads(reader: Reader, args: argparse.Namespace) -> dict[str, Any]:
    """The threads (the dashboard's overview, or one agent's as bzzz_get shows them)."""
    from bzzz.agents.overview import SCANNED_THREADS
    from bzzz.schemas import GetInput

    wanted = SCANNED_THREADS if args.project else args.limit
    if args.agent is None:
        threads = await reader.overview.threads(reader.caller, wanted)
    else:
        params = GetInput(address=f"bzzz://{args.agent}/threads", max_history=wanted)
        threads = (await reader.agents.get(reader.caller, params))["content"]["threads"]
    if args.project:
        threads = [t for t in threads if _project_of(t) == args.project]
    shown = threads[: args.limit]
    return {"threads": shown, "count": len(shown)}


def threads(args: argparse.Namespace, settings: Settings) -> int:
    """Run `bzzz threads`."""
    listed = _read(settings, lambda reader: list_threads(reader, args))
    if args.json:
        out.print_json(listed)
        return 0
    columns = [
        out.Column("id", whole=True),
        out.Column("project"),
        out.Column("status"),
        out.Column("topic"),
        out.Column("participants"),
        out.Column("messages", justify="right"),
        out.Column("last activity", whole=True),
    ]
    cells = [
        [
            t["id"],
            _project_of(t) or "",
            t["status"],
            t["topic"],
            ", ".join(t["participants"]),
            str(t["message_count"]),
            t["last_activity"] or "",
        ]
        for t in listed["threads"]
    ]
    out.print_table(f"threads ({listed['count']})", columns, cells)
    return 0


# --- bzzz tasks ----------------------------------------------------------------------------------


async def list_tasks(reader: Reader, args: argparse.Namespace) -> dict[str, Any]:
    """The tasks (the dashboard's overview, or one agent's as bzzz_get shows them)."""
    from bzzz.schemas import GetInput

    wanted = 1000 if args.project else args.limit
    if args.agent is None:
        tasks = await reader.overview.tasks(reader.caller, wanted)
    else:
        params = GetInput(address=f"bzzz://{args.agent}/tasks", max_history=wanted)
        content = (await reader.agents.get(reader.caller, params))["content"]
        project = content["agent_info"]["project"]
        tasks = [t | {"agent_id": args.agent, "project": project} for t in content["tasks"]]
    if args.project:
        tasks = [t for t in tasks if t.get("project") == args.project]
    shown = tasks[: args.limit]
    return {"tasks": shown, "count": len(shown)}


def tasks(args: argparse.Namespace, settings: Settings) -> int:
    """Run `bzzz tasks`."""
    listed = _read(settings, lambda reader: list_tasks(reader, args))
    if args.json:
        out.print_json(listed)
        return 0
    columns = [
        out.Column("id", whole=True),
        out.Column("agent", whole=True),
        out.Column("project"),
        out.Column("status"),
        out.Column("priority"),
        out.Column("type"),
        out.Column("description"),
        out.Column("started", whole=True),
    ]
    cells = [
        [
            t["id"],
            t["agent_id"],
            t.get("project") or "",
            t["status"],
            t["priority"],
            t["type"],
            t["description"],
            t["startTime"] or "",
        ]
        for t in listed["tasks"]
    ]
    out.print_table(f"tasks ({listed['count']})", columns, cells)
    return 0


# --- bzzz inbox ----------------------------------------------------------------------------------


async def read_inbox(reader: Reader, args: argparse.Namespace) -> dict[str, Any]:
    """An agent's inbox from the store (the inbox service's read), newest first."""
    return await reader.inbox.read(
        reader.caller, args.agent, unread=bool(args.unread), limit=args.limit
    )


def inbox_through_node(args: argparse.Namespace, settings: Settings) -> dict[str, Any]:
    """An agent's inbox through the node (``GET …/inbox``), the unread ones shown marked read
    (``POST …/inbox/read``) with ``--mark-read``."""
    from urllib.parse import quote

    from bzzz.cli import remote

    node = remote.Remote.of(args, settings)
    path = f"/agents/{quote(args.agent, safe='')}/inbox"
    params = {"unread": "true" if args.unread else "false", "limit": str(args.limit)}
    shown = node.call("GET", path, params=params)
    unread = [m["id"] for m in shown["messages"] if not m.get("read")]
    shown["marked"] = []
    if args.mark_read and unread:
        marked = node.call("POST", f"{path}/read", body={"message_ids": unread})
        shown["marked"] = marked["marked"]
    return shown


def inbox(args: argparse.Namespace, settings: Settings) -> int:
    """Run `bzzz inbox AGENT`."""
    import json

    from bzzz.cli import remote

    if remote.chosen(args):
        shown = inbox_through_node(args, settings)
    else:
        shown = _read(settings, lambda reader: read_inbox(reader, args))
    shape = args.format or ("json" if args.json else "table")
    if shape == "json":
        out.print_json(shown)
        return 0
    if shape == "text":
        sys.stdout.write(inbox_text(shown, unread_only=bool(args.unread)) + "\n")
        return 0
    columns = [
        out.Column("id", whole=True),
        out.Column("time", whole=True),
        out.Column("from", whole=True),
        out.Column("type"),
        out.Column("priority"),
        out.Column("thread", whole=True),
        out.Column("content"),
    ]
    cells = [
        [
            m["id"],
            m["timestamp"] or "",
            m["sender"],
            m["message_type"],
            m["priority"],
            m["thread_id"] or "",
            _text(m["content"], json.dumps),
        ]
        for m in shown["messages"]
    ]
    which = "unread messages" if args.unread else "messages"
    title = (
        f"inbox of {shown['agent_id']} ({shown['status']}): {shown['count']} {which}, "
        f"{shown['unread']} unread in all"
    )
    out.print_table(title, columns, cells)
    return 0


def inbox_text(shown: dict[str, Any], *, unread_only: bool) -> str:
    """An inbox as plain lines (what an agent runner puts in a model's context)."""
    import json

    which = "unread messages" if unread_only else "messages"
    agent = shown["agent_id"]
    if not shown["messages"]:
        return f"No {which} for {agent}."
    lines = [f"{shown['count']} {which} for {agent} (newest first):"]
    for m in shown["messages"]:
        thread = f" in thread {m['thread_id']}" if m.get("thread_id") else ""
        lines.append(
            f"- [{m['timestamp']}] from {m['sender']} ({m['message_type']}, "
            f"{m['priority']}){thread}, id {m['id']}: {_text(m['content'], json.dumps)}"
        )
    left = shown["unread"] - sum(1 for m in shown["messages"] if not m.get("read"))
    if left > 0:
        lines.append(f"({left} older unread not shown: bzzz inbox {agent} --unread)")
    return "\n".join(lines)


def _text(content: Any, dumps: Callable[[Any], str]) -> str:
    """A message's content as a cell: its text if it has one, else its JSON."""
    if isinstance(content, dict) and isinstance(content.get("text"), str):
        return str(content["text"])
    return dumps(content)
