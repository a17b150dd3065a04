"""Resource updates reach only who may read the resource: ``resources/subscribe`` (legacy) and
``subscriptions/listen`` (2026-07-28).

A project's facts (``bzzz://PROJECT/knowledge``) are heard by who may read the project.
A subscription's events (``bzzz://subscriptions/<id>``) belong to the session or principal that
made it. Another caller naming that URI is answered as for a URI that does not exist: the
legacy subscribe succeeds and never fires; a listen stream leaves the URI out of what it
acknowledges and delivers, as it leaves out an unknown one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.types import SubscriptionsListenRequestParams

from bzzz.errors import BzzzError
from bzzz.eventlog import Caller
from bzzz.mcp.knowledge import project_of_uri

SUBSCRIPTIONS_PREFIX = "bzzz://subscriptions/"

CallerOf = Callable[[Any, Any], Caller]


class SubscriptionReader(Protocol):
    """What says whether a caller reads a subscription (the subscription service)."""

    async def events(self, caller: Caller, subscription_id: str, limit: int = 100) -> Any:
        """The subscription's events; InvalidParameters for one the caller may not read."""
        ...


async def may_follow(subscriptions: SubscriptionReader, caller: Caller, uri: str) -> bool:
    """Whether ``caller`` may be told of updates of ``uri`` (a subscription's events, or a
    project's facts; no other resource ever updates)."""
    project = project_of_uri(uri)
    if project is not None:
        return caller.principal.may_see_project(project)
    if not uri.startswith(SUBSCRIPTIONS_PREFIX):
        return True
    try:
        await subscriptions.events(caller, uri.removeprefix(SUBSCRIPTIONS_PREFIX), limit=1)
    except BzzzError:
        return False
    return True


def guard_listen(
    lowlevel: Server[Any], subscriptions: SubscriptionReader, caller_of: CallerOf
) -> None:
    """Wrap the SDK's ``subscriptions/listen`` handler: only URIs the caller reads are heard."""
    entry = lowlevel.get_request_handler("subscriptions/listen")
    if entry is None:
        return
    listen = entry.handler

    async def on_listen(
        ctx: ServerRequestContext[Any], params: SubscriptionsListenRequestParams
    ) -> Any:
        wanted = params.notifications.resource_subscriptions
        if wanted:
            caller = caller_of(ctx.session, ctx.request)
            heard = [uri for uri in wanted if await may_follow(subscriptions, caller, uri)]
            notifications = params.notifications.model_copy(
                update={"resource_subscriptions": heard}
            )
            params = params.model_copy(update={"notifications": notifications})
        return await listen(ctx, params)

    lowlevel.add_request_handler(
        "subscriptions/listen", SubscriptionsListenRequestParams, on_listen
    )
