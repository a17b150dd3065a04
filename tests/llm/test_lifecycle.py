"""The hosted agent lifecycle: the design's transitions, and nothing else."""

from __future__ import annotations

import pytest

from bzzz.errors import ErrorCode, IllegalTransition
from bzzz.llm.lifecycle import TRANSITIONS, AgentState, Lifecycle

S = AgentState


def test_the_design_path_is_allowed() -> None:
    life = Lifecycle("a")
    for state in (S.IDLE, S.ACTIVE, S.COLLABORATING, S.ACTIVE, S.ESCALATING, S.ACTIVE, S.IDLE):
        life.move(state)
    life.move(S.TERMINATING)

    assert life.state is S.TERMINATING
    assert life.history[0] is S.INITIALIZING and len(life.history) == 9


@pytest.mark.parametrize(
    ("path", "illegal"),
    [
        ((), S.ACTIVE),
        ((S.IDLE,), S.COLLABORATING),
        ((S.IDLE,), S.ESCALATING),
        ((S.IDLE, S.ACTIVE), S.TERMINATING),
        ((S.IDLE, S.ACTIVE, S.COLLABORATING), S.IDLE),
        ((S.IDLE, S.TERMINATING), S.IDLE),
    ],
)
def test_an_illegal_transition_is_refused_and_the_state_kept(
    path: tuple[AgentState, ...], illegal: AgentState
) -> None:
    life = Lifecycle("a")
    for state in path:
        life.move(state)
    before = life.state

    with pytest.raises(IllegalTransition) as refused:
        life.move(illegal)

    assert life.state is before
    assert refused.value.code is ErrorCode.INVALID_PARAMETERS
    assert refused.value.details == {"from": str(before), "to": str(illegal)}


def test_terminating_is_final() -> None:
    assert TRANSITIONS[S.TERMINATING] == frozenset()
