"""The one exception tree of BZZZ; every error carries a code from the API reference.

    BzzzError                      (code chosen per instance, default INVALID_PARAMETERS)
    ├── InvalidParameters          INVALID_PARAMETERS
    │   └── IllegalTransition      INVALID_PARAMETERS (a hosted agent's lifecycle)
    ├── AgentNotFound              AGENT_NOT_FOUND
    ├── ThreadNotFound             THREAD_NOT_FOUND
    ├── NetworkError               NETWORK_ERROR
    │   ├── WhooshUnavailable      NETWORK_ERROR (WHOOSH unreachable, 5xx, 408, 429: retried)
    │   └── WhooshRefused          NETWORK_ERROR (WHOOSH answered 4xx: details.status)
    ├── OpenAIError                OPENAI_ERROR
    ├── CostLimitExceeded          COST_LIMIT_EXCEEDED
    ├── EscalationFailed           ESCALATION_FAILED
    ├── PermissionDenied           PERMISSION_DENIED (names the missing grant)
    │   └── Unauthenticated        PERMISSION_DENIED (HTTP 401: no or a bad credential)
    ├── RateLimited                RATE_LIMITED (details.retry_after in seconds)
    ├── ReservationConflict        RESERVATION_CONFLICT (details.holder: agent, paths, expiry)
    └── ConfigError                CONFIG_ERROR (start-up only, never reaches a client)

Errors from SQLAlchemy, NATS or HTTP are translated where they are caught:
``raise NetworkError(...) from exc``. Only ``message``, ``code`` and ``details`` are ever shown
to a client; the chained cause stays in the logs.
"""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum
from typing import Any


class ErrorCode(StrEnum):
    """The error codes of the API reference, plus CONFIG_ERROR (start-up) and the access codes."""

    INVALID_PARAMETERS = "INVALID_PARAMETERS"
    AGENT_NOT_FOUND = "AGENT_NOT_FOUND"
    THREAD_NOT_FOUND = "THREAD_NOT_FOUND"
    NETWORK_ERROR = "NETWORK_ERROR"
    OPENAI_ERROR = "OPENAI_ERROR"
    COST_LIMIT_EXCEEDED = "COST_LIMIT_EXCEEDED"
    ESCALATION_FAILED = "ESCALATION_FAILED"
    CONFIG_ERROR = "CONFIG_ERROR"
    PERMISSION_DENIED = "PERMISSION_DENIED"
    RATE_LIMITED = "RATE_LIMITED"
    # A path reservation overlaps a live one of another agent that it may not coexist with.
    RESERVATION_CONFLICT = "RESERVATION_CONFLICT"


class BzzzError(Exception):
    """Root of every error BZZZ raises on purpose."""

    default_code: ErrorCode = ErrorCode.INVALID_PARAMETERS

    def __init__(
        self,
        message: str,
        *,
        code: ErrorCode | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code or self.default_code
        self.details = details or {}

    def to_response(self) -> dict[str, Any]:
        """The reference's ErrorResponse for this error."""
        return {
            "success": False,
            "error": self.message,
            "code": str(self.code),
            "details": self.details,
            "timestamp": datetime.now(UTC).isoformat().replace("+00:00", "Z"),
        }


class InvalidParameters(BzzzError):
    """A parameter is missing, of the wrong type, too large or malformed."""

    default_code = ErrorCode.INVALID_PARAMETERS


class IllegalTransition(InvalidParameters):
    """A hosted agent was asked to move between lifecycle states the design does not link."""


class AgentNotFound(BzzzError):
    """A referenced agent does not exist."""

    default_code = ErrorCode.AGENT_NOT_FOUND


class ThreadNotFound(BzzzError):
    """A referenced thread does not exist."""

    default_code = ErrorCode.THREAD_NOT_FOUND


class NetworkError(BzzzError):
    """The event log (NATS) could not be reached or did not acknowledge in time."""

    default_code = ErrorCode.NETWORK_ERROR


class NotServed(NetworkError):
    """The call is about a project this node does not serve (``bzzz.projects``).

    The faces forward such a call to a node that serves ``project``; where none does, it reaches
    the caller as this NETWORK_ERROR, naming the project.
    """

    def __init__(self, project: str) -> None:
        super().__init__(
            f"no node of this network serves project {project!r} (bzzz.projects)",
            details={"project": project},
        )
        self.project = project


class WhooshUnavailable(NetworkError):
    """WHOOSH could not be reached or asked to come back later; the call is retried."""


class WhooshRefused(NetworkError):
    """WHOOSH refused a call (HTTP 4xx); ``details`` has the status and WHOOSH's answer."""


class OpenAIError(BzzzError):
    """The model endpoint failed."""

    default_code = ErrorCode.OPENAI_ERROR


class CostLimitExceeded(BzzzError):
    """A call would pass the daily or monthly cost limit."""

    default_code = ErrorCode.COST_LIMIT_EXCEEDED


class EscalationFailed(BzzzError):
    """An escalation action could not be carried out."""

    default_code = ErrorCode.ESCALATION_FAILED


class PermissionDenied(BzzzError):
    """The caller's grants do not allow the call; ``details.missing`` names the grant."""

    default_code = ErrorCode.PERMISSION_DENIED


class RateLimited(BzzzError):
    """A rate limit or quota was reached; ``details.retry_after`` says when to try again."""

    default_code = ErrorCode.RATE_LIMITED


class ReservationConflict(BzzzError):
    """Paths held by another agent: ``details.holder`` names it, its paths and expiry."""

    default_code = ErrorCode.RESERVATION_CONFLICT


class Unauthenticated(PermissionDenied):
    """No credential, or one that is unknown, revoked, expired or malformed (HTTP 401)."""


class ConfigError(BzzzError):
    """A setting is invalid; the node refuses to start."""

    default_code = ErrorCode.CONFIG_ERROR
