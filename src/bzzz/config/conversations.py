"""Threads (``[conversation]``), their escalation rules and the monitor that runs them
(``[escalation]``): the rules' conditions and actions, and the design's two default rules.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr, ValidationInfo, field_validator

from bzzz.config.base import _Section


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
