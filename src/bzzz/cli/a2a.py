"""`bzzz a2a add|list|remove`: A2A agents elsewhere, put on the network by this data directory.

``add`` fetches the agent's card (under the webhook SSRF rules: loopback and private hosts
only on a node that serves loopback alone, or with ``webhooks.allow_private``; at most
``a2a.max_card_bytes`` of it read), checks it is a well-formed A2A card, verifies its JWS
signatures when it carries any (a bad one is refused), refuses it when its endpoint is one
deliveries would never reach (the same check, ``bzzz.a2a.guard``),
records it in the data directory's registry (``a2a-agents.json``) and announces the agent on
the network's log with the data directory's node key, as `bzzz token create` stores its
envelope. The node on this directory then delivers the agent's posts and tasks over A2A
(``bzzz.a2a.bridge``); with no node running, it does once one starts. ``remove`` takes the
agent offline and out of the registry. The commands act as the local user (``local``) and
are recorded on the audit trail as every CLI change is.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
from typing import TYPE_CHECKING, Any

from bzzz.cli import output as out
from bzzz.errors import InvalidParameters
from bzzz.projects import NO_PROJECT

if TYPE_CHECKING:
    from bzzz.a2a.registry import RemoteAgent
    from bzzz.config import Settings


def add_parser(sub: Any) -> None:
    """The `a2a` command group."""
    a2a = sub.add_parser("a2a", help="A2A agents elsewhere, put on the network: add, list, remove")
    commands = a2a.add_subparsers(dest="a2a_command", required=True)
    add = commands.add_parser("add", help="fetch, verify and announce a remote A2A agent")
    add.add_argument("url", help="the agent's base URL or its agent card's URL")
    add.add_argument("--project", help="the project it works in (default: none)")
    add.add_argument("--role", default="a2a", help="its role on the network (default: a2a)")
    add.add_argument("--agent-id", help="its id on the network (default: from its card's name)")
    add.add_argument("--require-signature", action="store_true", help="refuse an unsigned card")
    out.json_flag(add, "the agent as recorded")
    listing = commands.add_parser("list", help="the remote A2A agents of this data directory")
    out.json_flag(listing, '{"agents": [...]}')
    remove = commands.add_parser("remove", help="take a remote A2A agent off the network")
    remove.add_argument("agent_id", help="its id on the network")


def run(args: argparse.Namespace, settings: Settings) -> int:
    """Run one `a2a` command."""
    if args.a2a_command == "add":
        return asyncio.run(_add(args, settings))
    if args.a2a_command == "remove":
        return asyncio.run(_remove(args, settings))
    return _list(args, settings)


def agent_id_of(name: str) -> str:
    """An agent id from a card's name: lower case, letters, digits and dashes."""
    slug = re.sub(r"[^a-z0-9_-]+", "-", name.lower()).strip("-_")[:64]
    if not slug:
        raise InvalidParameters("the card's name gives no agent id: pass --agent-id")
    return slug


async def _add(args: argparse.Namespace, settings: Settings) -> int:
    from bzzz.a2a import cards, registry
    from bzzz.a2a.guard import check_endpoint, guarded_client, normal_url
    from bzzz.access.service import serves_loopback_only
    from bzzz.domain import RESERVED_AGENT_IDS, iso, utcnow
    from bzzz.events.targets import TargetPolicy
    from bzzz.schemas import AnnounceInput, validate_input

    policy = TargetPolicy(
        allow_private=settings.webhooks.allow_private,
        loopback_only=serves_loopback_only(settings.node.http_host),
    )
    # Any spelling of the host becomes the one the rules check, or one clear refusal.
    url = normal_url(args.url, "url", policy)
    limit = settings.a2a.max_card_bytes
    async with guarded_client(policy, settings.webhooks.timeout, max_bytes=limit) as http:
        card = await cards.fetch_card(http, url, require_signature=args.require_signature)
    endpoint = await check_endpoint(policy, card.endpoint, "endpoint")
    agent_id = args.agent_id or agent_id_of(card.name)
    if agent_id.lower() in RESERVED_AGENT_IDS:
        raise InvalidParameters(f"agent id '{agent_id}' is reserved; pass another --agent-id")
    skills = [str(s.get("id") or s.get("name")) for s in card.card.get("skills", [])][:32]
    params = validate_input(
        AnnounceInput,
        {
            "agent_id": agent_id,
            "role": args.role,
            "capabilities": [s for s in skills if s] or [args.role],
            "specialization": (str(card.card.get("description") or card.name))[:256] or None,
            "project": args.project,
        },
    )
    agent = registry.RemoteAgent(
        agent_id=params.agent_id,
        role=params.role,
        project=params.project,
        card_url=card.card_url,
        endpoint=endpoint,
        protocol_version=card.protocol_version,
        name=card.name,
        description=str(card.card.get("description") or ""),
        skills=list(params.capabilities),
        signed=card.signed,
        added_at=iso(utcnow()) or "",
    )
    await _announce(settings, agent, params.model_dump())
    if args.json:
        sys.stdout.write(json.dumps(agent.to_json()) + "\n")
    else:
        signed = "signed card verified" if agent.signed else "unsigned card"
        sys.stdout.write(
            f"A2A agent {agent.agent_id} ({agent.name}, {signed}) is on the network as "
            f"bzzz://{agent.agent_id}; its posts and tasks go to {agent.endpoint}\n"
        )
    return 0


async def _announce(settings: Settings, agent: RemoteAgent, params: dict[str, Any]) -> None:
    """Record the agent and store its announcement on the log; undo the record if refused."""
    from bzzz.a2a import registry
    from bzzz.a2a.bridge import session_of
    from bzzz.access.keys import handle_hash, mint_handle
    from bzzz.cli import log as cli_log
    from bzzz.principal import node_principal

    data_dir = settings.node.data_dir.expanduser()
    data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    known = registry.load(data_dir)
    before = dict(known)
    known[agent.agent_id] = agent
    registry.save(data_dir, known)
    try:
        async with cli_log.joined(settings) as log:
            owner = node_principal(log.identity.node_id).id
            metadata = agent.metadata() | {
                "owner": owner,
                "handle_hash": handle_hash(mint_handle(agent.agent_id)),
            }
            payload = params | {"session_id": session_of(agent.agent_id), "metadata": metadata}
            outcome = await log.emit(
                "agent.announced",
                "agent",
                agent.agent_id,
                payload,
                project=agent.project or NO_PROJECT,
            )
            if not outcome["ok"]:
                raise InvalidParameters(f"the announcement was refused: {outcome['reason']}")
            if log.served_here:
                await _check_held(settings, agent.agent_id, log.identity.node_id)
    except BaseException:
        registry.save(data_dir, before)
        raise


async def _check_held(settings: Settings, agent_id: str, node_id: str) -> None:
    """The node here applied the announcement: refuse if another holder kept the id."""
    from bzzz.a2a.bridge import session_of
    from bzzz.cli import start as start
    from bzzz.store.repository import Repository

    async with start.opened_store(settings) as db, db.session() as session:
        agent = await Repository(session).agent(agent_id)
    if agent is None or agent.session_id != session_of(agent_id) or agent.node_id != node_id:
        raise InvalidParameters(
            f"Agent ID already exists: '{agent_id}' is held by a live agent of another "
            "session; pass another --agent-id",
            details={"agent_id": agent_id},
        )


def _list(args: argparse.Namespace, settings: Settings) -> int:
    from bzzz.a2a import registry

    agents = registry.load(settings.node.data_dir.expanduser())
    shown = [a.to_json() for a in agents.values()]
    if args.json:
        out.print_json({"agents": shown})
        return 0
    columns = [
        out.Column("agent", whole=True),
        out.Column("name"),
        out.Column("project"),
        out.Column("endpoint", whole=True),
        out.Column("signed"),
    ]
    cells = [
        [
            a["agent_id"],
            a["name"],
            a["project"] or "",
            a["endpoint"],
            "yes" if a["signed"] else "no",
        ]
        for a in shown
    ]
    out.print_table("remote A2A agents", columns, cells)
    return 0


async def _remove(args: argparse.Namespace, settings: Settings) -> int:
    from bzzz.a2a import registry
    from bzzz.cli import log as cli_log

    data_dir = settings.node.data_dir.expanduser()
    known = registry.load(data_dir)
    if args.agent_id not in known:
        raise InvalidParameters(f"no remote A2A agent '{args.agent_id}' in this data directory")
    project = known[args.agent_id].project or NO_PROJECT
    del known[args.agent_id]
    registry.save(data_dir, known)
    async with cli_log.joined(settings) as log:
        from bzzz.a2a.bridge import session_of

        payload = {
            "agent_ids": [args.agent_id],
            "session_id": session_of(args.agent_id),
            "reason": "removed (bzzz a2a remove)",
        }
        await log.emit("agent.offline", "agent", args.agent_id, payload, project=project)
    sys.stdout.write(f"A2A agent {args.agent_id} is off the network\n")
    return 0
