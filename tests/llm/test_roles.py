"""Roles from the settings: built-in templates and custom roles."""

from __future__ import annotations

import pytest

from bzzz.errors import ConfigError
from bzzz.llm.roles import TEMPLATES, hosted_agents


def test_the_three_templates_carry_the_designs_capabilities_and_prompts() -> None:
    assert set(TEMPLATES) == {"architect", "reviewer", "documentation"}
    assert "system_design" in TEMPLATES["architect"].capabilities
    assert "security_analysis" in TEMPLATES["reviewer"].capabilities
    assert "technical_writing" in TEMPLATES["documentation"].capabilities
    assert TEMPLATES["architect"].interaction_patterns["reviewers"] == "design_validation"
    assert "code reviewer" in TEMPLATES["reviewer"].system_prompt


def test_a_template_entry_with_a_count_makes_numbered_agents() -> None:
    specs = hosted_agents([{"role": "reviewer", "count": 2, "project": "shop"}], "node1234abcd")

    assert [s.agent_id for s in specs] == ["reviewer-node1234-1", "reviewer-node1234-2"]
    assert all(s.project == "shop" and s.template.role == "reviewer" for s in specs)


def test_docs_is_the_documentation_template() -> None:
    [spec] = hosted_agents([{"role": "docs", "agent_id": "d"}], "n")

    assert spec.template.role == "documentation"
    assert spec.agent_id == "d"


def test_a_custom_role_keeps_its_own_prompt_and_capabilities() -> None:
    [spec] = hosted_agents(
        [
            {
                "role": "security",
                "agent_id": "sec",
                "system_prompt": "You audit code.",
                "capabilities": ["threat_modeling"],
                "model": "gpt-4o",
            }
        ],
        "n",
    )

    assert (spec.template.role, spec.template.system_prompt) == ("security", "You audit code.")
    assert spec.template.capabilities == ["threat_modeling"]
    assert spec.model == "gpt-4o"


@pytest.mark.parametrize(
    "entry",
    [{"role": "x", "unknown": 1}, {"role": "bad role"}, {"role": "x", "max_tasks": 0}, {}],
)
def test_a_bad_entry_is_a_config_error_naming_it(entry: dict[str, object]) -> None:
    with pytest.raises(ConfigError) as refused:
        hosted_agents([entry], "n")

    assert "agents.default_roles[0]" in refused.value.message


def test_repeated_agent_ids_are_refused() -> None:
    with pytest.raises(ConfigError):
        hosted_agents([{"role": "a", "agent_id": "x"}, {"role": "b", "agent_id": "x"}], "n")
