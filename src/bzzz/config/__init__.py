"""Settings: the seed's BzzzMcpConfig sections plus the node's own, from a TOML file and BZZZ_*.

Precedence (highest first): environment variables, the TOML file (``--config`` / ``BZZZ_CONFIG``),
defaults. Every setting can be set from the environment as ``BZZZ_<SECTION>__<KEY>`` (for example
``BZZZ_COST__DAILY_LIMIT=5``); the common ones also have short names (``BZZZ_DATA_DIR``,
``BZZZ_NATS_URL``, ``BZZZ_DATABASE_URL``, ``BZZZ_NETWORK_ID``, ``BZZZ_HTTP_PORT`` …).

Each section sits with its defaults beside the sections of the same part of the node:
``network.py`` (``[bzzz]``, ``[snapshots]``), ``node.py`` (``[node]``, ``[logging]``),
``llm.py`` (``[openai]``, ``[cost]``), ``agents.py``, ``conversations.py`` (``[conversation]``,
``[escalation]`` and the rules), ``integrations.py`` (``[webhooks]``, ``[slurp]``,
``[whoosh]``, ``[a2a]``), ``security.py`` (``[auth]``, ``[limits]``, ``[privacy]``,
``[encryption]``, ``[audit]``, ``[retention]``), ``reservations.py`` (``[reservations]``).
``settings.py`` gathers them in ``Settings``; ``loading.py`` reads the file and the environment.
Import them from ``bzzz.config``.
"""

from bzzz.config.agents import AgentsSettings
from bzzz.config.conversations import (
    ConversationSettings,
    EscalationActionConfig,
    EscalationConditionConfig,
    EscalationRuleConfig,
    EscalationSettings,
    default_escalation_rules,
)
from bzzz.config.integrations import (
    A2ASettings,
    SlurpSettings,
    WebhookSettings,
    WhooshSettings,
)
from bzzz.config.llm import CostSettings, ModelPrice, OpenAISettings
from bzzz.config.loading import ENV_ALIASES, ENV_PREFIX, load_settings, unknown_variables
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
from bzzz.config.settings import SECRET_KEYS, URL_KEYS, Settings

__all__ = [
    "ENV_ALIASES",
    "ENV_PREFIX",
    "SECRET_KEYS",
    "URL_KEYS",
    "A2ASettings",
    "AgentsSettings",
    "AuditSettings",
    "AuthSettings",
    "BzzzSettings",
    "ConversationSettings",
    "CostSettings",
    "EncryptionSettings",
    "EscalationActionConfig",
    "EscalationConditionConfig",
    "EscalationRuleConfig",
    "EscalationSettings",
    "LimitsSettings",
    "LoggingSettings",
    "ModelPrice",
    "NodeSettings",
    "OpenAISettings",
    "PrivacySettings",
    "ReservationSettings",
    "RetentionSettings",
    "Settings",
    "SlurpSettings",
    "SnapshotSettings",
    "WebhookSettings",
    "WhooshSettings",
    "default_escalation_rules",
    "load_settings",
    "unknown_variables",
]
