"""Agent roles: built-in templates (architect, reviewer, documentation) and custom roles.

The agents a node hosts come from ``[agents] default_roles`` (the seed's AgentRoleConfig list),
one table per agent kind, for example::

    [[agents.default_roles]]
    role = "reviewer"            # a template: capabilities and prompts come with it
    count = 2                    # reviewer-<node>-1, reviewer-<node>-2
    project = "shop"

    [[agents.default_roles]]
    role = "security"            # a custom role: give it a system prompt
    system_prompt = "You audit code for security flaws..."
    capabilities = ["threat_modeling"]
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from bzzz.errors import ConfigError


@dataclass(frozen=True, slots=True)
class RoleTemplate:
    """What an agent of a role can do and how it thinks (the design's agent definitions)."""

    role: str
    capabilities: list[str]
    system_prompt: str
    prompts: dict[str, str] = field(default_factory=dict)
    interaction_patterns: dict[str, str] = field(default_factory=dict)
    specialization: str | None = None


TEMPLATES: dict[str, RoleTemplate] = {
    "architect": RoleTemplate(
        role="architect",
        capabilities=[
            "system_design",
            "architecture_review",
            "technology_selection",
            "scalability_analysis",
        ],
        system_prompt=(
            "You are a senior software architect specializing in distributed systems. You weigh "
            "trade-offs explicitly, name risks, and give concrete, actionable recommendations."
        ),
        prompts={
            "task_analysis": "Analyze this task from an architectural perspective.",
            "collaboration": (
                "Coordinate with other architects and provide technical guidance to the team."
            ),
        },
        interaction_patterns={
            "peer_architects": "collaborative_review",
            "developers": "guidance_provision",
            "reviewers": "design_validation",
        },
        specialization="distributed_systems",
    ),
    "reviewer": RoleTemplate(
        role="reviewer",
        capabilities=[
            "code_review",
            "security_analysis",
            "performance_optimization",
            "best_practices_enforcement",
        ],
        system_prompt=(
            "You are a senior code reviewer focused on quality and security. You point to exact "
            "lines, explain why something is a problem, and propose a fix."
        ),
        prompts={
            "review_criteria": (
                "Evaluate the code for correctness, security, performance, readability and tests."
            ),
            "feedback_delivery": "Provide constructive feedback to developers.",
        },
        interaction_patterns={
            "developers": "constructive_feedback",
            "architects": "design_validation",
        },
        specialization="code_quality",
    ),
    "documentation": RoleTemplate(
        role="documentation",
        capabilities=[
            "technical_writing",
            "api_documentation",
            "user_guides",
            "knowledge_synthesis",
        ],
        system_prompt=(
            "You specialize in creating clear, comprehensive technical documentation. You write "
            "for the stated audience, with examples, and never invent behaviour."
        ),
        prompts={
            "content_analysis": (
                "Analyze technical content and identify documentation needs before writing."
            ),
            "audience_adaptation": "Adapt documentation for different audience levels.",
        },
        interaction_patterns={
            "developers": "knowledge_capture",
            "architects": "design_documentation",
        },
        specialization="technical_writing",
    ),
}
# The design addresses documentation agents as bzzz://docs@*.
ALIASES = {"docs": "documentation"}

GENERIC_PROMPT = "You are a helpful agent on the BZZZ coordination network, acting as a {role}."


class RoleConfig(BaseModel):
    """One ``[[agents.default_roles]]`` entry."""

    model_config = ConfigDict(extra="forbid")

    role: str = Field(pattern=r"^[A-Za-z0-9._-]{1,128}$")
    agent_id: str | None = Field(None, pattern=r"^[A-Za-z0-9._-]{1,120}$")
    count: int = Field(1, ge=1, le=100)
    project: str | None = Field(None, pattern=r"^[A-Za-z0-9._-]{1,128}$")
    max_tasks: int = Field(3, ge=1, le=100)
    model: str | None = None
    system_prompt: str | None = None
    capabilities: list[str] | None = None
    specialization: str | None = None


@dataclass(frozen=True, slots=True)
class HostedAgentSpec:
    """One agent this node hosts."""

    agent_id: str
    template: RoleTemplate
    project: str | None
    max_tasks: int
    model: str | None


def template_for(config: RoleConfig) -> RoleTemplate:
    """The role's template with the entry's own prompt and capabilities laid over it."""
    base = TEMPLATES.get(ALIASES.get(config.role, config.role))
    if base is None:
        base = RoleTemplate(
            role=config.role,
            capabilities=[],
            system_prompt=GENERIC_PROMPT.format(role=config.role),
        )
    return RoleTemplate(
        role=base.role,
        capabilities=config.capabilities if config.capabilities is not None else base.capabilities,
        system_prompt=config.system_prompt or base.system_prompt,
        prompts=base.prompts,
        interaction_patterns=base.interaction_patterns,
        specialization=config.specialization or base.specialization,
    )


def hosted_agents(default_roles: list[dict[str, Any]], node_id: str) -> list[HostedAgentSpec]:
    """The agents the settings ask this node to host (ConfigError on a bad entry)."""
    specs: list[HostedAgentSpec] = []
    for index, raw in enumerate(default_roles):
        try:
            config = RoleConfig.model_validate(raw)
        except ValidationError as exc:
            error = exc.errors()[0]
            where = ".".join(str(p) for p in error["loc"])
            raise ConfigError(
                f"invalid setting agents.default_roles[{index}].{where}: {error['msg']}"
            ) from None
        template = template_for(config)
        stem = config.agent_id or f"{template.role}-{node_id[:8]}"
        for n in range(1, config.count + 1):
            agent_id = stem if config.count == 1 and config.agent_id else f"{stem}-{n}"
            specs.append(
                HostedAgentSpec(agent_id, template, config.project, config.max_tasks, config.model)
            )
    ids = [s.agent_id for s in specs]
    if len(set(ids)) != len(ids):
        raise ConfigError("invalid setting agents.default_roles: agent ids repeat")
    return specs
