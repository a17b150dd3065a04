"""Settings: the seed's BzzzMcpConfig sections plus the node's own, from a TOML file and BZZZ_*.

Precedence (highest first): environment variables, the TOML file (``--config`` / ``BZZZ_CONFIG``),
defaults. Every setting can be set from the environment as ``BZZZ_<SECTION>__<KEY>`` (for example
``BZZZ_COST__DAILY_LIMIT=5``); the common ones also have short names (``BZZZ_DATA_DIR``,
``BZZZ_NATS_URL``, ``BZZZ_DATABASE_URL``, ``BZZZ_NETWORK_ID``, ``BZZZ_HTTP_PORT`` …).
"""

from __future__ import annotations

import difflib
import json
import os
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
)

from bzzz.errors import ConfigError

ENV_PREFIX = "BZZZ_"

# Short environment names for the settings people set most; value: (section, key).
ENV_ALIASES: dict[str, tuple[str, str]] = {
    "BZZZ_DATA_DIR": ("node", "data_dir"),
    "BZZZ_DATABASE_URL": ("node", "database_url"),
    "BZZZ_HTTP_HOST": ("node", "http_host"),
    "BZZZ_HTTP_PORT": ("node", "http_port"),
    "BZZZ_AUTH_TOKENS": ("node", "auth_tokens"),
    "BZZZ_AUTH_REQUIRED": ("auth", "required"),
    "BZZZ_AUTH_ISSUER": ("auth", "issuer"),
    "BZZZ_AUTH_AUDIENCE": ("auth", "audience"),
    "BZZZ_NATS_URL": ("bzzz", "nats_url"),
    "BZZZ_NATS_CREDS": ("bzzz", "nats_creds"),
    "BZZZ_NETWORK_ID": ("bzzz", "network_id"),
    "BZZZ_TRUSTED_NODES": ("bzzz", "trusted_nodes"),
    "BZZZ_FEDERATED_NETWORKS": ("bzzz", "federated_networks"),
    "BZZZ_HEARTBEAT_INTERVAL": ("bzzz", "heartbeat_interval"),
    "BZZZ_OPENAI_API_KEY": ("openai", "api_key"),
    "BZZZ_OPENAI_BASE_URL": ("openai", "base_url"),
    "BZZZ_DEFAULT_MODEL": ("openai", "default_model"),
    "BZZZ_DAILY_LIMIT": ("cost", "daily_limit"),
    "BZZZ_MONTHLY_LIMIT": ("cost", "monthly_limit"),
    "BZZZ_MAX_ACTIVE_THREADS": ("conversation", "max_active_threads"),
    "BZZZ_MAX_AGENTS": ("agents", "max_agents"),
    "BZZZ_LOG_LEVEL": ("logging", "level"),
    "BZZZ_LOG_FILE": ("logging", "file"),
    "BZZZ_NETWORK_KEY": ("encryption", "key"),
    "BZZZ_NETWORK_KEY_FILE": ("encryption", "key_file"),
    "BZZZ_WHOOSH_URL": ("whoosh", "url"),
    "BZZZ_WHOOSH_TOKEN": ("whoosh", "token"),
}

SECRET_KEYS = frozenset(
    {"api_key", "auth_tokens", "secret", "human_channel_secret", "token", "key"}
)
# Settings holding URLs whose credentials (user info, a password parameter) must not be shown.
URL_KEYS = frozenset(
    {"database_url", "nats_url", "node_url", "base_url", "url", "human_channel_url"}
)
_PASSWORD_PARAM = re.compile(r"(?i)([?&](?:password|passwd|pwd|sslpassword)=)[^&#]*")


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_default=True)


class OpenAISettings(_Section):
    """The model endpoint (any OpenAI-compatible API)."""

    api_key: SecretStr | None = None
    base_url: str | None = None
    default_model: str = "gpt-5"
    max_tokens: int = Field(4000, gt=0)
    temperature: float = Field(0.7, ge=0, le=2)
    cheap_model: str = Field("gpt-5-mini", description="model for tasks below the complexity bar")
    request_timeout: float = Field(120.0, gt=0)
    max_retries: int = Field(4, ge=0, le=20, description="retries on 429, 5xx, lost connections")
    backoff_initial: float = Field(0.5, ge=0)
    backoff_max: float = Field(30.0, ge=0)
    breaker_threshold: int = Field(5, ge=1, description="failed attempts in a row that open it")
    breaker_cooldown: float = Field(30.0, ge=0, description="seconds the breaker stays open")
    max_tool_rounds: int = Field(5, ge=0, le=50, description="tool-call rounds per task")
    max_tokens_param: Literal["max_completion_tokens", "max_tokens"] = Field(
        "max_completion_tokens",
        description="chat models only: older OpenAI-compatible servers want max_tokens",
    )
    reasoning_effort: Literal["minimal", "low", "medium", "high"] | None = Field(
        None, description="sent to reasoning models (gpt-5, o1/o3/o4) only; unset: theirs"
    )
    model_kinds: dict[str, Literal["reasoning", "chat"]] = Field(
        default_factory=dict,
        description="which request rules a model follows, over the table shipped with prices",
    )


class BzzzSettings(_Section):
    """The network this node belongs to."""

    network_id: str = Field("main", pattern=r"^[A-Za-z0-9_-]{1,64}$")
    nats_url: list[str] = Field(default_factory=list)
    nats_creds: Path | None = Field(
        None, description="a NATS creds file (user JWT and seed) for the servers of nats_url"
    )
    node_url: str | None = None
    pubsub_topics: list[str] = Field(
        default_factory=lambda: ["bzzz/coordination/v1", "antennae/meta-discussion/v1"]
    )
    stream_replicas: int = Field(1, ge=1, le=5)
    publish_timeout: float = Field(10.0, gt=0)
    max_file_store: int = Field(1 << 30, gt=0)
    max_memory_store: int = Field(64 << 20, gt=0)
    heartbeat_interval: float = Field(5.0, gt=0, le=3600, description="seconds between heartbeats")
    heartbeat_misses: int = Field(
        3, ge=1, le=100, description="missed heartbeats before a peer is offline"
    )
    trusted_nodes: list[str] = Field(
        default_factory=list,
        description="public keys (or node ids) allowed on the network; empty = any signed node",
    )
    federated_networks: list[str] = Field(
        default_factory=list, description="other network ids whose agents lookups also search"
    )
    admission: bool = Field(
        True,
        description="apply envelopes only from nodes admitted to the network (bzzz node admit); "
        "off, tokens, nodes, keys and retention still come from admitted nodes only",
    )

    @field_validator("nats_url", "trusted_nodes", "federated_networks", mode="before")
    @classmethod
    def _split_lists(cls, value: object) -> object:
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @field_validator("federated_networks")
    @classmethod
    def _check_networks(cls, value: list[str], info: ValidationInfo) -> list[str]:
        for network in value:
            if not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", network):
                raise ValueError(f"{network!r} is not a network id")
            if network == info.data.get("network_id"):
                raise ValueError(f"{network!r} is this node's own network")
        return value

    @field_validator("nats_creds")
    @classmethod
    def _check_creds(cls, value: Path | None) -> Path | None:
        if value is not None and not value.expanduser().is_file():
            raise ValueError(f"{value} is not a file")
        return value.expanduser() if value is not None else None

    @field_validator("nats_url")
    @classmethod
    def _check_urls(cls, value: list[str]) -> list[str]:
        for url in value:
            if not url.startswith(("nats://", "tls://", "ws://", "wss://")):
                raise ValueError(f"{url!r} is not a nats:// URL")
        return value


class ModelPrice(_Section):
    """USD per million tokens."""

    input: float = Field(ge=0)
    output: float = Field(ge=0)


class CostSettings(_Section):
    """Spending limits for hosted agents (USD; a limit of 0 means no limit)."""

    daily_limit: float = Field(10.0, ge=0)
    monthly_limit: float = Field(200.0, ge=0)
    warning_threshold: float = Field(0.8, ge=0, le=1)
    pricing: dict[str, ModelPrice] = Field(
        default_factory=dict, description="per-model prices overriding the shipped table"
    )
    fallback_price: ModelPrice = Field(
        default_factory=lambda: ModelPrice(input=10.0, output=30.0),
        description="price of a model missing from the table (a warning is logged)",
    )
    token_budget: int = Field(
        32_000, gt=0, description="tokens of context per task; past 80% old messages compress"
    )
    max_messages_before_summary: int = Field(40, gt=1)
    complexity_threshold: float = Field(
        0.3, ge=0, le=1, description="tasks below this go to openai.cheap_model"
    )


class EscalationConditionConfig(_Section):
    """One condition of a rule (the seed's EscalationCondition).

    ``threshold``: seconds for thread_duration, a count for disagreement_count, a failed share
    (0-1) for error_rate, true/false for no_progress and no_resolution. ``timeframe``: the window
    in seconds (0: the whole thread since its last resolution).
    """

    type: Literal[
        "thread_duration", "no_progress", "disagreement_count", "error_rate", "no_resolution"
    ]
    threshold: float | bool
    timeframe: float = Field(0, ge=0)


class EscalationActionConfig(_Section):
    """One action of a rule (the seed's EscalationAction, plus the design's expertise)."""

    type: Literal[
        "notify_human", "request_expert", "escalate_to_architect", "create_decision_thread"
    ]
    target: str | None = None
    priority: str | None = None
    participants: list[str] = Field(default_factory=list)
    expertise: list[str] = Field(default_factory=list)


class EscalationRuleConfig(_Section):
    """A rule: it fires when all its conditions hold, once per thread until resolved."""

    name: str = Field(min_length=1, max_length=128)
    conditions: list[EscalationConditionConfig] = Field(min_length=1)
    actions: list[EscalationActionConfig] = Field(min_length=1)
    priority: int = 0


def default_escalation_rules() -> list[EscalationRuleConfig]:
    """The design's two rules: a long-running thread, and a consensus failure."""
    return [
        EscalationRuleConfig.model_validate(
            {
                "name": "Long Running Thread",
                "priority": 1,
                "conditions": [
                    {"type": "thread_duration", "threshold": 7200},
                    {"type": "no_progress", "threshold": True, "timeframe": 1800},
                ],
                "actions": [
                    {"type": "notify_human", "target": "project_manager"},
                    {"type": "request_expert", "expertise": ["domain_expert"]},
                ],
            }
        ),
        EscalationRuleConfig.model_validate(
            {
                "name": "Consensus Failure",
                "priority": 2,
                "conditions": [
                    {"type": "disagreement_count", "threshold": 3},
                    {"type": "no_resolution", "threshold": True, "timeframe": 3600},
                ],
                "actions": [
                    {"type": "escalate_to_architect", "priority": "high"},
                    {"type": "create_decision_thread", "participants": ["senior_architect"]},
                ],
            }
        ),
    ]


class ConversationSettings(_Section):
    """Threaded conversations."""

    max_active_threads: int = Field(100, gt=0)
    default_timeout: int = Field(3600, gt=0, description="seconds idle before a thread closes")
    escalation_rules: list[EscalationRuleConfig] = Field(default_factory=default_escalation_rules)


class EscalationSettings(_Section):
    """The escalation monitor, its actions' retries and the human channel (a signed webhook)."""

    monitor_interval: float = Field(30.0, gt=0, description="seconds between monitor sweeps")
    initial_backoff: float = Field(5.0, gt=0)
    max_backoff: float = Field(600.0, gt=0)
    human_channel_url: str | None = None
    human_channel_secret: SecretStr | None = None
    timeout: float = Field(10.0, gt=0)

    @field_validator("human_channel_secret")
    @classmethod
    def _secret_with_channel(
        cls, value: SecretStr | None, info: ValidationInfo
    ) -> SecretStr | None:
        # The receiver must be able to check X-Bzzz-Signature: it needs a key it is given.
        if value is None and info.data.get("human_channel_url"):
            raise ValueError(
                "required when escalation.human_channel_url is set "
                "(the human channel checks X-Bzzz-Signature with it)"
            )
        return value


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


class AgentsSettings(_Section):
    """Agents on this network."""

    max_agents: int = Field(100_000, gt=0)
    lease_seconds: float = Field(
        120.0,
        gt=0,
        description="a sessionless agent goes offline this long after its owner's last call",
    )
    default_roles: list[dict[str, Any]] = Field(default_factory=list)
    max_replies_per_thread: int = Field(
        10, ge=1, le=1000, description="messages a hosted agent posts in one thread, at most"
    )
    collaboration_threshold: float = Field(
        0.8, ge=0, le=1, description="a task more complex than this opens a collaborative review"
    )
    collaboration_timeout: float = Field(
        600.0, gt=0, description="seconds a hosted agent waits for its reviewers' answers"
    )
    progress_interval: float = Field(
        1.0, ge=0, description="seconds between task_progress messages of a streaming task"
    )
    stream_progress: bool = Field(True, description="stream tasks and post their partial text")
    knowledge_limit: int = Field(5, ge=0, le=50, description="project knowledge per prompt")


class LoggingSettings(_Section):
    """Where and how much the node logs (always stderr or a file, never stdout)."""

    level: Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"] = "INFO"
    file: str | None = None
    format: Literal["text", "json"] = Field(
        "text", description="json: one JSON object per line, with the request id"
    )
    max_bytes: int = Field(
        10_000_000, ge=0, description="rotate the log file at this size (0: never)"
    )
    backups: int = Field(5, ge=0, description="rotated log files kept")

    @field_validator("level", mode="before")
    @classmethod
    def _upper(cls, value: object) -> object:
        return value.upper() if isinstance(value, str) else value

    @field_validator("format", mode="before")
    @classmethod
    def _lower(cls, value: object) -> object:
        return value.lower() if isinstance(value, str) else value


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


class NodeSettings(_Section):
    """This process: data directory, database, HTTP."""

    data_dir: Path = Field(default_factory=lambda: Path.home() / ".bzzz")
    database_url: str | None = None
    http_host: str = "127.0.0.1"
    http_port: int = Field(7331, ge=0, le=65535)
    auth_tokens: list[str] = Field(default_factory=list)

    @field_validator("auth_tokens", mode="before")
    @classmethod
    def _split_tokens(cls, value: object) -> object:
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @field_validator("database_url")
    @classmethod
    def _check_db(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(
            ("sqlite+aiosqlite://", "postgresql+asyncpg://")
        ):
            raise ValueError("must start with sqlite+aiosqlite:// or postgresql+asyncpg://")
        return value


class Settings(_Section):
    """Every setting of a node."""

    node: NodeSettings = Field(default_factory=NodeSettings)
    openai: OpenAISettings = Field(default_factory=OpenAISettings)
    bzzz: BzzzSettings = Field(default_factory=BzzzSettings)
    cost: CostSettings = Field(default_factory=CostSettings)
    conversation: ConversationSettings = Field(default_factory=ConversationSettings)
    agents: AgentsSettings = Field(default_factory=AgentsSettings)
    logging: LoggingSettings = Field(default_factory=LoggingSettings)
    webhooks: WebhookSettings = Field(default_factory=WebhookSettings)
    escalation: EscalationSettings = Field(default_factory=EscalationSettings)
    slurp: SlurpSettings = Field(default_factory=SlurpSettings)
    whoosh: WhooshSettings = Field(default_factory=WhooshSettings)
    auth: AuthSettings = Field(default_factory=AuthSettings)
    limits: LimitsSettings = Field(default_factory=LimitsSettings)
    privacy: PrivacySettings = Field(default_factory=PrivacySettings)
    encryption: EncryptionSettings = Field(default_factory=EncryptionSettings)
    audit: AuditSettings = Field(default_factory=AuditSettings)

    retention: RetentionSettings = Field(default_factory=RetentionSettings)

    def database_url(self) -> str:
        """The database URL in force: the configured one or SQLite in the data directory."""
        if self.node.database_url:
            return self.node.database_url
        return f"sqlite+aiosqlite:///{self.node.data_dir / 'bzzz.db'}"

    def masked(self) -> dict[str, Any]:
        """The settings as plain data with secrets replaced by '***'."""
        masked: dict[str, Any] = _mask(self.model_dump(mode="json"))
        return masked


def _mask(value: Any, key: str = "") -> Any:
    if isinstance(value, dict):
        return {k: _mask(v, k) for k, v in value.items()}
    if key in URL_KEYS:
        if isinstance(value, list):
            return [_mask_url(v) if isinstance(v, str) else v for v in value]
        return _mask_url(value) if isinstance(value, str) else value
    if key in SECRET_KEYS and value:
        return "***"
    return value


def _mask_url(url: str) -> str:
    """Hide a URL's password (``user:***@``), a bare token (``***@``) and password parameters."""
    url = _PASSWORD_PARAM.sub(r"\1***", url)
    scheme, sep, rest = url.partition("://")
    authority, slash, tail = rest.partition("/")
    creds, at, host = authority.rpartition("@")
    if not at:
        return url
    user, colon, _password = creds.partition(":")
    # Without a password, the user part of a NATS URL is a token: a secret as well.
    shown = f"{user}:***" if colon else "***"
    return f"{scheme}{sep}{shown}@{host}{slash}{tail}"


def _env_overrides(
    environ: Mapping[str, str], origins: dict[tuple[str, str], str]
) -> dict[str, dict[str, Any]]:
    """Settings from BZZZ_* variables; ``origins`` learns which variable set each one."""
    sections = set(Settings.model_fields)
    result: dict[str, dict[str, Any]] = {}
    for name, raw in environ.items():
        if not name.startswith(ENV_PREFIX) or name == "BZZZ_CONFIG":
            continue
        if name in ENV_ALIASES:
            section, key = ENV_ALIASES[name]
        elif "__" in name:
            section, _, key = name[len(ENV_PREFIX) :].lower().partition("__")
            if section not in sections:
                close = difflib.get_close_matches(section, sorted(sections), n=1, cutoff=0.6)
                hint = f"; did you mean {ENV_PREFIX}{close[0].upper()}__…?" if close else ""
                raise ConfigError(f"invalid setting {name}: unknown section {section!r}{hint}")
        else:
            continue
        result.setdefault(section, {})[key] = _env_value(raw)
        origins[(section, key)] = name
    return result


def _env_value(raw: str) -> Any:
    # JSON lets lists and tables come from the environment; anything else stays a string
    # and pydantic converts it to the field's type.
    stripped = raw.strip()
    if stripped[:1] in "[{":
        try:
            return json.loads(stripped)
        except json.JSONDecodeError:
            return raw
    return raw


def _merge(base: dict[str, Any], override: dict[str, dict[str, Any]]) -> dict[str, Any]:
    merged = {k: dict(v) if isinstance(v, dict) else v for k, v in base.items()}
    for section, values in override.items():
        target = merged.setdefault(section, {})
        if not isinstance(target, dict):
            raise ConfigError(f"invalid setting {section}: must be a table")
        target.update(values)
    return merged


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError as exc:
        raise ConfigError(f"config file {path} does not exist") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {path} is not valid TOML: {exc}") from exc


def _file_keys(data: dict[str, Any]) -> set[tuple[str, str]]:
    """The (section, key) pairs a settings file holds; (name, "") for its top-level names."""
    keys = {(name, "") for name in data}
    for section, values in data.items():
        if isinstance(values, dict):
            keys.update((section, key) for key in values)
    return keys


def _env_name(field: tuple[str, str]) -> str:
    """The variable that sets a setting: its short name if it has one."""
    for alias, target in ENV_ALIASES.items():
        if target == field:
            return alias
    return ENV_PREFIX + "__".join(part for part in field if part).upper()


def _source(
    field: tuple[str, str], origins: dict[tuple[str, str], str], source: _FileSource | None
) -> str:
    """Where a setting came from: the variable set, the file and key, or (unset) its variable."""
    if field in origins:
        return origins[field]
    if source is not None and field in source.keys:
        section, key = field
        return f"{source.path}: [{section}] {key}" if key else f"{source.path}: [{section}]"
    return _env_name(field)


def _suggestion(error: Any, field: tuple[str, str]) -> str:
    if error["type"] != "extra_forbidden":
        return ""
    section, key = field
    if key and section in Settings.model_fields:
        model = Settings.model_fields[section].annotation
        known = list(getattr(model, "model_fields", {}))
    else:
        key, known = section, list(Settings.model_fields)
    close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
    return f"; did you mean {close[0]}?" if close else f"; known: {', '.join(sorted(known))}"


class _FileSource:
    """A settings file and the keys it holds, to name it in errors."""

    def __init__(self, path: Path, data: dict[str, Any]) -> None:
        self.path = path
        self.keys = _file_keys(data)


def _describe(
    exc: ValidationError, origins: dict[tuple[str, str], str], source: _FileSource | None = None
) -> str:
    error = exc.errors()[0]
    loc = [str(part) for part in error["loc"]]
    dotted = ".".join(loc)
    field = (loc[0], loc[1]) if len(loc) >= 2 else (loc[0], "")
    # Name what the user set (a variable, or a key of the file); else the variable to set.
    where = _source(field, origins, source)
    return f"invalid setting {dotted} ({where}): {error['msg']}{_suggestion(error, field)}"


def unknown_variables(environ: Mapping[str, str] | None = None) -> list[str]:
    """Warnings for BZZZ_* variables that set nothing but are close to a known short name."""
    env = os.environ if environ is None else environ
    known = [*ENV_ALIASES, "BZZZ_CONFIG"]
    warnings = []
    for name in sorted(env):
        if not name.startswith(ENV_PREFIX) or name in known or "__" in name:
            continue
        close = difflib.get_close_matches(name, known, n=1, cutoff=0.8)
        if close:
            warnings.append(f"{name} is not a setting and is ignored; did you mean {close[0]}?")
    return warnings


def load_settings(
    config_file: str | Path | None = None,
    environ: Mapping[str, str] | None = None,
    overrides: dict[str, dict[str, Any]] | None = None,
) -> Settings:
    """Build the settings from file, environment and explicit overrides (CLI flags)."""
    env = os.environ if environ is None else environ
    path = config_file or env.get("BZZZ_CONFIG")
    data = _read_toml(Path(path).expanduser()) if path else {}
    source = _FileSource(Path(path).expanduser(), data) if path else None
    origins: dict[tuple[str, str], str] = {}
    data = _merge(data, _env_overrides(env, origins))
    for section, values in (overrides or {}).items():
        for key in values:
            origins.pop((section, key), None)
    data = _merge(data, overrides or {})
    try:
        return Settings.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_describe(exc, origins, source)) from exc
