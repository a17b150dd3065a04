"""The model hook: every hosted-agent model call on the trail, sent or refused."""

from __future__ import annotations

import functools
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar, cast

from bzzz.audit.records import Action, digest, stamp
from bzzz.audit.trail import AuditTrail
from bzzz.errors import BzzzError, ErrorCode

F = TypeVar("F", bound=Callable[..., Coroutine[Any, Any, Any]])


def _params(options: Any, agent_id: str | None, purpose: str) -> dict[str, Any]:
    # The shape of the request, never its messages (content).
    return {
        "model": getattr(options, "model", None),
        "message_count": len(getattr(options, "messages", ()) or ()),
        "tool_count": len(getattr(options, "tools", ()) or ()),
        "max_tokens": getattr(options, "max_tokens", None),
        "purpose": purpose,
        "agent_id": agent_id,
    }


def audited_model_call(fn: F) -> F:
    """Record each call of ``complete(options, *, agent_id, purpose, ...)`` on ``self.audit``."""

    @functools.wraps(fn)
    async def recorded(self: Any, options: Any, *args: Any, **kwargs: Any) -> Any:
        trail: AuditTrail | None = getattr(self, "audit", None)
        if trail is None:
            return await fn(self, options, *args, **kwargs)
        outcome = ErrorCode.NETWORK_ERROR.value
        try:
            result = await fn(self, options, *args, **kwargs)
            outcome = "ok"
            return result
        except BzzzError as exc:
            outcome = exc.code
            raise
        finally:
            agent = kwargs.get("agent_id")
            purpose = str(kwargs.get("purpose", "task"))
            agent_id = agent if isinstance(agent, str) else None
            trail.record(
                Action(
                    at=stamp(trail.clock.now()),
                    principal=f"node:{trail.node_id}",
                    session=f"hosted-{agent_id}" if agent_id else "node",
                    action=f"model:{purpose}"[:128],
                    outcome=outcome,
                    digest=digest(_params(options, agent_id, purpose)),
                    agent=agent_id,
                )
            )

    return cast(F, recorded)
