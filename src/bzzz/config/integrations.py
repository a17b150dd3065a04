"""What the node calls out to: subscribers' webhooks (``[webhooks]``), SLURP (``[slurp]``),
WHOOSH (``[whoosh]``) and remote A2A agents (``[a2a]``).
"""

from __future__ import annotations

from pydantic import Field, SecretStr, field_validator

from bzzz.config.base import _Section


class SlurpSettings(_Section):
    """Where consensus context events go (SLURP); without a URL they are stored and listable."""

    url: str | None = None
    token: SecretStr | None = None
    timeout: float = Field(10.0, gt=0)
    initial_backoff: float = Field(5.0, gt=0)
    max_backoff: float = Field(600.0, gt=0)


class WhooshSettings(_Section):
    """WHOOSH, the orchestrator hosted agents register with (design §4.2); off without a URL."""

    url: str | None = Field(
        None, description="WHOOSH's base URL: agents are registered at {url}/agents"
    )
    token: SecretStr | None = Field(None, description="sent to WHOOSH as a bearer token")
    timeout: float = Field(10.0, gt=0, description="seconds per request to WHOOSH")
    health_interval: float = Field(
        30.0, gt=0, description="seconds between health reports (health_check.interval)"
    )
    health_timeout: float = Field(
        10.0, gt=0, description="WHOOSH's timeout for our status endpoint (health_check.timeout)"
    )
    health_retries: int = Field(3, ge=0, description="health_check.retries told to WHOOSH")
    initial_backoff: float = Field(1.0, gt=0, description="first retry delay while WHOOSH is down")
    max_backoff: float = Field(60.0, gt=0)

    @field_validator("url")
    @classmethod
    def _check_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError(f"{value!r} is not an http:// or https:// URL")
        return value.rstrip("/") if value is not None else None


class WebhookSettings(_Section):
    """Delivery of events to subscribers' callback webhooks."""

    timeout: float = Field(10.0, gt=0)
    initial_backoff: float = Field(1.0, gt=0)
    max_backoff: float = Field(300.0, gt=0)
    max_age: float = Field(86_400.0, gt=0, description="seconds before a delivery is dead-lettered")
    allow_private: bool = Field(
        False,
        description="allow callbacks to loopback/private addresses on a node that serves more "
        "than loopback (a loopback-only node always allows them)",
    )


class A2ASettings(_Section):
    """Remote A2A agents (``bzzz a2a add``): how much of what they send is read.

    Their requests follow ``[webhooks]`` (timeout, backoff, ``max_age``, ``allow_private``); a
    body past its limit is refused as soon as its ``Content-Length`` or its bytes go past it,
    never read whole.
    """

    max_answer_bytes: int = Field(
        4 << 20,
        ge=1024,
        description="bytes an A2A agent's answer may have; a bigger one fails the task",
    )
    max_card_bytes: int = Field(
        256 << 10,
        ge=1024,
        description="bytes an agent card (and its JWK set) may have; a bigger one fails the add",
    )
