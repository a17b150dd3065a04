"""Every setting of a node (``Settings``: one field per section) and its masked view."""

from __future__ import annotations

import re
from typing import Any

from pydantic import Field

from bzzz.config.agents import AgentsSettings
from bzzz.config.base import _Section
from bzzz.config.conversations import ConversationSettings, EscalationSettings
from bzzz.config.integrations import (
    A2ASettings,
    SlurpSettings,
    WebhookSettings,
    WhooshSettings,
)
from bzzz.config.llm import CostSettings, OpenAISettings
from bzzz.config.network import BzzzSettings, SnapshotSettings
from bzzz.config.node import LoggingSettings, NodeSettings
from bzzz.config.reservations import ReservationSettings
from bzzz.config.security import (
    AuditSettings,
    AuthSettings,
    EncryptionSettings,
    LimitsSettings,
    PrivacySettings,
    RetentionSettings,
)

SECRET_KEYS = frozenset(
    {"api_key", "auth_tokens", "secret", "human_channel_secret", "token", "key"}
)

# Settings holding URLs whose credentials (user info, a password parameter) must not be shown.
URL_KEYS = frozenset(
    {
        "database_url",
        "nats_url",
        "node_url",
        "base_url",
        "url",
        "human_channel_url",
        "webhook_url",
    }
)

_PASSWORD_PARAM = re.compile(r"(?i)([?&](?:password|passwd|pwd|sslpassword)=)[^&#]*")


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
    snapshots: SnapshotSettings = Field(default_factory=SnapshotSettings)
    a2a: A2ASettings = Field(default_factory=A2ASettings)
    reservations: ReservationSettings = Field(default_factory=ReservationSettings)

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
    if isinstance(value, list) and any(isinstance(v, dict) for v in value):
        # A list of sections (a rota's steps): each masked as a section.
        return [_mask(v, key) for v in value]
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
