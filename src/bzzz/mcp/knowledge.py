"""The MCP resource ``bzzz://PROJECT/knowledge``: a project's facts, updated as they change.

Reading it is ``bzzz_get bzzz://*@PROJECT/knowledge`` without a query: the project's current
facts, best first, with the knowledge service's access check (another project's is refused).
Whenever a fact of the project is stated, agreed or superseded, a client that subscribed
(``resources/subscribe``, legacy sessions) or listens (``subscriptions/listen``, 2026-07-28)
is told ``notifications/resources/updated`` for the URI; only callers who may read the project
are told (``listen.may_follow``).
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Sequence
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError
from mcp.server.subscriptions import InMemorySubscriptionBus, ResourceUpdated

from bzzz.errors import BzzzError
from bzzz.mcp.sessions import SessionRegistry
from bzzz.network.envelope import Envelope
from bzzz.node.core import Node

KNOWLEDGE_TEMPLATE = "bzzz://{project}/knowledge"
# The facts a read shows (the service's bound applies too).
READ_LIMIT = 50
# bzzz://P/knowledge, or bzzz_get's own form bzzz://*@P/knowledge (the template takes both).
_URI = re.compile(r"^bzzz://(?:\*@)?([A-Za-z0-9._-]{1,128})/knowledge$")
WILDCARD = "*@"
DESCRIPTION = (
    "A project's facts (subject, relation, object, statement, source, valid from/until), "
    "best first, as bzzz_get bzzz://*@PROJECT/knowledge answers them. Subscribe to hear when "
    "a fact of the project is stated, agreed or superseded."
)


def knowledge_uri(project: str) -> str:
    """The resource URI of a project's facts."""
    return KNOWLEDGE_TEMPLATE.format(project=project)


def knowledge_uris(project: str) -> set[str]:
    """Both URIs a client may have subscribed to for a project's facts."""
    return {knowledge_uri(project), knowledge_uri(WILDCARD + project)}


def project_of_uri(uri: str) -> str | None:
    """The project a knowledge URI names (None: not a knowledge URI)."""
    found = _URI.match(uri)
    return found.group(1) if found else None


def changed_projects(envelopes: Sequence[Envelope]) -> set[str]:
    """The projects whose facts the applied envelopes changed."""
    found = set()
    for env in envelopes:
        if not env.type.startswith("fact."):
            continue
        project = env.payload.get("project")
        if isinstance(project, str) and project:
            found.add(project)
    return found


def register_knowledge(
    server: MCPServer[Any], node: Node, sessions: SessionRegistry, bus: InMemorySubscriptionBus
) -> None:
    """Serve ``bzzz://{project}/knowledge`` and tell its readers when it changes.

    Registered before the ``bzzz://{+address}`` template, which would otherwise take the URI.
    """

    @server.resource(
        KNOWLEDGE_TEMPLATE,
        name="bzzz-knowledge",
        mime_type="application/json",
        description=DESCRIPTION,
    )
    async def read_knowledge(project: str, ctx: Context[Any, Any]) -> str:
        request = ctx.request_context.request if ctx.request_context else None
        caller = sessions.caller(ctx.session, request)
        project = project.removeprefix(WILDCARD)
        try:
            data = await node.knowledge.search(caller.principal, project, limit=READ_LIMIT)
        except BzzzError as exc:
            raise ResourceError(f"{exc.code}: {exc.message}") from exc
        return json.dumps({"project": project, **data})

    async def on_applied(envelopes: Sequence[Envelope]) -> None:
        uris = {uri for project in changed_projects(envelopes) for uri in knowledge_uris(project)}
        if not uris:
            return
        await sessions.notify_updated(uris)
        for uri in uris:
            await bus.publish(ResourceUpdated(uri=uri))

    node.projector.add_applied_listener(_later(on_applied))


def _later(handler: Any) -> Any:
    """A synchronous applied-listener that runs ``handler`` as a task (the log is not held)."""
    tasks: set[asyncio.Task[None]] = set()

    def listener(envelopes: Sequence[Envelope]) -> None:
        if not changed_projects(envelopes):
            return
        task = asyncio.create_task(handler(list(envelopes)), name="bzzz-knowledge-updated")
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    return listener
