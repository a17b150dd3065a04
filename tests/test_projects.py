"""The projects a node serves: the setting, the predicate and the subject token."""

from __future__ import annotations

import pytest

from bzzz.config import load_settings
from bzzz.errors import ConfigError
from bzzz.projects import ALL_PROJECTS, NO_PROJECT, ProjectSet, subject_token


def test_a_node_serves_every_project_by_default() -> None:
    settings = load_settings(environ={})
    assert settings.bzzz.projects == ["*"]
    served = ProjectSet.of(settings.bzzz.projects)
    assert served == ALL_PROJECTS
    assert served.serves("shop") and served.serves(None)


def test_bzzz_projects_names_the_served_projects() -> None:
    settings = load_settings(environ={"BZZZ_PROJECTS": "shop, ops"})
    served = ProjectSet.of(settings.bzzz.projects)
    assert (served.serves("shop"), served.serves("ops"), served.serves("lab")) == (
        True,
        True,
        False,
    )
    # An agent that declared no project is reachable from every project: every node holds it.
    assert served.serves(None) and served.serves(NO_PROJECT)
    assert str(served) == "ops,shop"


@pytest.mark.parametrize("value", ["", "shop,a b", "x>y"])
def test_a_bad_project_list_is_refused(value: str) -> None:
    with pytest.raises(ConfigError, match="BZZZ_PROJECTS"):
        load_settings(environ={"BZZZ_PROJECTS": value})


def test_a_project_is_one_subject_token() -> None:
    assert subject_token("shop") == "shop"
    assert subject_token("a.b") == "a%2Eb"
    assert subject_token("a%2Eb") == "a%252Eb"  # the escape cannot collide with a real id
    assert subject_token(None) == NO_PROJECT
