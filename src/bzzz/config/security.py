"""Who may call and how much (``[auth]``, ``[limits]``), what is masked (``[privacy]``),
sealed (``[encryption]``), recorded (``[audit]``) and how long it is kept (``[retention]``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, ValidationInfo, field_validator

from bzzz.config.base import _Section


class AuthSettings(_Section):
    """Who may call: tokens (``node.auth_tokens``, network tokens) and an OAuth 2.1 issuer."""

    required: bool | None = Field(
        None,
        description="refuse calls without a credential; default: on unless the node serves "
        "loopback alone with no credential configured",
    )
    issuer: str | None = Field(None, description="OAuth 2.1 issuer whose JWT access tokens count")
    audience: str | None = Field(None, description="the aud a JWT must carry (this node's URL)")
    metrics_public: bool | None = Field(
        None, description="serve /metrics without a credential; default: on loopback only"
    )
    public_url: str | None = Field(
        None, description="this node's public base URL (the resource in OAuth metadata)"
    )

    @field_validator("audience")
    @classmethod
    def _audience_with_issuer(cls, value: str | None, info: ValidationInfo) -> str | None:
        if info.data.get("issuer") and not value:
            raise ValueError("required when auth.issuer is set (the aud a JWT must carry)")
        return value


class LimitsSettings(_Section):
    """Rate limits (token buckets) and quotas; 0 means no limit. Defaults leave benchmarks be."""

    node_messages_per_second: float = Field(0, ge=0, description="posts per second, whole node")
    agent_messages_per_second: float = Field(0, ge=0, description="posts per second, per agent")
    burst_seconds: float = Field(2.0, gt=0, description="a bucket holds this many seconds' worth")
    subscriptions_per_agent: int = Field(100, ge=0)
    agents_per_principal: int = Field(1000, ge=0)
    threads_per_principal: int = Field(0, ge=0, description="0: half of max_active_threads")
    subscriptions_per_principal: int = Field(1000, ge=0)
    sessions_per_principal: int = Field(200, ge=0, description="MCP sessions a principal holds")
    sessions_total: int = Field(2000, ge=0, description="MCP sessions the node holds at once")
    idle_session_seconds: float = Field(
        60.0, gt=0, description="a session that announced nothing ends after this long idle"
    )
    http_connections: int = Field(1000, gt=0, description="open HTTP connections at once")
    http_keepalive_seconds: float = Field(15.0, gt=0)
    http_header_timeout: float = Field(10.0, gt=0)
    http_max_body_bytes: int = Field(4 << 20, gt=0)
    as_of_reads_per_minute: float = Field(
        60, ge=0, description="threads read as_of a past point (log replays), per principal"
    )
    as_of_reads_burst: int = Field(10, ge=1, description="as_of reads a principal makes at once")


class PrivacySettings(_Section):
    """PII redaction: personal data and secrets masked with typed placeholders (``<EMAIL>``)."""

    redact_models: bool = Field(True, description="mask what is sent to a model endpoint")
    redact_stored: bool = Field(
        False, description="also mask message content before it is stored and delivered"
    )


class EncryptionSettings(_Section):
    """Content sealed at rest: on the network's log and in the store (network/sealing.py)."""

    enabled: bool = Field(
        True, description="seal content on the log and in the store (off: written in clear)"
    )
    key: SecretStr | None = Field(
        None, description="the network data key(s): base64, comma separated, oldest first"
    )
    key_file: Path | None = Field(
        None, description="a keyring file shared by the network's nodes (default: in data_dir)"
    )
    jetstream_cipher: Literal["chachapoly", "aes", "none"] = Field(
        "chachapoly", description="the embedded nats-server's own store encryption"
    )

    def env_keys(self) -> list[str]:
        """The configured keys, oldest first."""
        if self.key is None:
            return []
        return [part for part in self.key.get_secret_value().split(",") if part.strip()]


class AuditSettings(_Section):
    """The audit trail (bzzz.audit)."""

    enabled: bool = Field(
        True, description="record every agent action (off only to measure what it costs)"
    )
    head_every: int = Field(100, ge=1, description="records between two signed heads on the log")
    head_seconds: float = Field(
        10.0, gt=0, description="seconds a record waits at most for a signed head"
    )


class RetentionSettings(_Section):
    """How long content is kept, in days (fractions allowed); 0 keeps it forever (the default).

    Each node's hourly job (and ``bzzz retention run``) publishes its cut-offs on the log, and
    every node applies them in log order: set the same values on every node of a network.
    """

    messages_days: float = Field(
        0, ge=0, le=36_500, description="message content (a tombstone keeps id and time)"
    )
    events_days: float = Field(
        0, ge=0, le=36_500, description="subscription events, webhook deliveries, activity"
    )
    memory_days: float = Field(0, ge=0, le=36_500, description="hosted agents' memories")
    audit_days: float = Field(
        0, ge=0, le=36_500, description="this node's audit records (a signed anchor stays)"
    )
    interval: float = Field(3600.0, gt=0, description="seconds between the node's retention runs")

    @field_validator("messages_days", "events_days", "memory_days", "audit_days", mode="before")
    @classmethod
    def _days(cls, value: object) -> object:
        if isinstance(value, bool):
            raise ValueError("must be a number of days (0 keeps forever), not true/false")
        if isinstance(value, str) and value.strip().lower() in ("nan", "inf", "+inf", "infinity"):
            raise ValueError("must be a finite number of days (0 keeps forever)")
        return value

    def any(self) -> bool:
        """Whether any content ages out at all."""
        return any((self.messages_days, self.events_days, self.memory_days, self.audit_days))
