"""Threads (``[conversation]``), their escalation rules and the monitor that runs them
(``[escalation]``): the rules' conditions and actions, and the design's two default rules.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, SecretStr, ValidationInfo, field_validator, model_validator

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


class RotaStepConfig(_Section):
    """One step of a rota: a person's signed webhook, or the console."""

    name: str = Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9][A-Za-z0-9 ._@-]*$")
    webhook_url: str | None = Field(None, pattern=r"^https?://[^\s]+$", max_length=2048)
    secret: SecretStr | None = Field(None, description="the receiver checks X-Bzzz-Signature")
    console: bool = False

    @model_validator(mode="after")
    def _one_channel(self) -> RotaStepConfig:
        # A step pages one way: a webhook the receiver can verify, or the console.
        if self.console and self.webhook_url:
            raise ValueError(f"step '{self.name}': either webhook_url or console = true, not both")
        if not self.console and not self.webhook_url:
            raise ValueError(
                f"step '{self.name}': needs webhook_url (with secret) or console = true"
            )
        if self.webhook_url and (self.secret is None or not self.secret.get_secret_value()):
            raise ValueError(
                f"step '{self.name}': secret is required with webhook_url "
                "(the receiver checks X-Bzzz-Signature with it)"
            )
        if self.console and self.secret is not None:
            raise ValueError(f"step '{self.name}': a console step takes no secret")
        return self


class RotaConfig(_Section):
    """Who is paged, in order, for an escalation of one project addressed to humans."""

    steps: list[RotaStepConfig] = Field(min_length=1, max_length=20)

    @field_validator("steps")
    @classmethod
    def _unique_names(cls, steps: list[RotaStepConfig]) -> list[RotaStepConfig]:
        names = [s.name for s in steps]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"step names must be unique in a rota: {', '.join(twice)}")
        return steps


class EscalationSettings(_Section):
    """The escalation monitor, its actions' retries, the human channel (a signed webhook) and
    the rotas that page people until one acknowledges."""

    monitor_interval: float = Field(30.0, gt=0, description="seconds between monitor sweeps")
    initial_backoff: float = Field(5.0, gt=0)
    max_backoff: float = Field(600.0, gt=0)
    human_channel_url: str | None = None
    human_channel_secret: SecretStr | None = None
    timeout: float = Field(10.0, gt=0)
    ack_timeout: float = Field(
        900.0, ge=1, le=7 * 86400, description="seconds a page waits for an ack before the next"
    )
    link_ttl: float = Field(
        86400.0, ge=60, le=30 * 86400, description="seconds a signed ack/resolve link is valid"
    )
    rota: dict[str, RotaConfig] = Field(
        default_factory=dict, description="per project: who is paged, in order"
    )

    @field_validator("rota")
    @classmethod
    def _project_names(cls, rota: dict[str, RotaConfig]) -> dict[str, RotaConfig]:
        bad = [p for p in rota if not re.fullmatch(r"[A-Za-z0-9._-]{1,128}", p)]
        if bad:
            raise ValueError(f"not a project name: {bad[0][:130]!r} (letters, digits, . _ -)")
        return rota

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
