"""The agent page's pieces that need no node: performance by day, a lease's time left."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from bzzz import domain
from bzzz.agents.leases import Leases
from bzzz.agents.page import PERFORMANCE_DAYS, performance_days, task_row

NOW = datetime(2026, 12, 6, 10, 0, tzinfo=UTC)


def _task(status: str, ended: datetime | None, started: datetime | None = None) -> domain.Task:
    return domain.Task(
        id=f"task-{status}-{ended}", agent_id="dev", assigner="lead", type="build",
        description="", status=status, priority="medium", data={}, thread_id=None,
        message_id="m", progress=None, result=None, error=None,
        start_time=started or (ended or NOW) - timedelta(minutes=5), end_time=ended,
    )  # fmt: skip


def _agent(session_id: str) -> domain.Agent:
    return domain.Agent(
        id="dev", role="developer", capabilities=[], specialization=None, max_tasks=3,
        project="alpha", task=None, status="idle", active_tasks=0, tasks_completed=0,
        tasks_failed=0, performance=1.0, node_id="n", session_id=session_id,
        created_at=NOW, last_activity=NOW,
    )  # fmt: skip


def test_finished_tasks_are_counted_on_the_day_they_ended_within_the_last_fortnight() -> None:
    tasks = [
        _task("completed", NOW - timedelta(hours=1)),
        _task("failed", NOW - timedelta(hours=2)),
        _task("completed", NOW - timedelta(days=2)),
        _task("completed", NOW - timedelta(days=PERFORMANCE_DAYS)),  # before the first day
        _task("in_progress", None),  # not finished: not counted
    ]

    days = performance_days(tasks, NOW)

    assert len(days) == PERFORMANCE_DAYS and days[-1]["day"] == "2026-12-06"
    assert days[-1] == {"day": "2026-12-06", "completed": 1, "failed": 1, "ratio": 0.5}
    assert days[-3]["completed"] == 1 and days[-3]["ratio"] == 1.0
    assert sum(d["completed"] + d["failed"] for d in days) == 3
    assert days[0]["ratio"] is None


def test_a_tasks_duration_is_its_run_so_far_until_it_ends() -> None:
    running = task_row(_task("in_progress", None, NOW - timedelta(seconds=30)), NOW)
    done = task_row(_task("completed", NOW - timedelta(seconds=10)), NOW)

    assert (running["duration_seconds"], running["finished"]) == (30, False)
    assert (done["duration_seconds"], done["finished"]) == (300, True)


def test_a_lease_counts_down_from_the_last_use_and_a_session_agent_has_none() -> None:
    now = [100.0]
    leases = Leases(120, clock=lambda: now[0])
    leased, sessioned = _agent("principal-abc"), _agent("mcp-123")
    leases.renew("dev")
    now[0] += 45

    assert leases.remaining(leased) == 75
    assert leases.remaining(sessioned) is None
    now[0] += 500
    assert leases.remaining(leased) == 0
