"""`bzzz retention run|status` and `bzzz forget` as a user runs them (real processes, real NATS)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from e2e.support import bzzz_executable, kill_orphans

pytestmark = pytest.mark.integration


def _bzzz(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [bzzz_executable(), *args], env=env, capture_output=True, text=True, timeout=60
    )


@pytest.fixture
def cli_env(tmp_path: Path, clean_env: dict[str, str], nats_url: str) -> dict[str, str]:
    data_dir = tmp_path / "cli"
    env = dict(clean_env, BZZZ_DATA_DIR=str(data_dir), BZZZ_NATS_URL=nats_url)
    env["BZZZ_RETENTION__MESSAGES_DAYS"] = "0.5"
    yield env
    kill_orphans(data_dir)


def test_retention_run_prints_what_it_removed_and_is_on_the_audit_trail(
    cli_env: dict[str, str],
) -> None:
    done = _bzzz(cli_env, "retention", "run", "--json")
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)
    assert shown["cutoffs"]["messages"] is not None and shown["cutoffs"]["audit"] is None
    assert shown["store"] == {"messages": 0, "events": 0, "memory": 0}
    plain = _bzzz(cli_env, "retention", "run")
    assert plain.returncode == 0, plain.stderr
    assert "retention applied on every node: messages 0.5 days" in plain.stdout
    status = json.loads(_bzzz(cli_env, "retention", "status", "--json").stdout)
    assert [run["kind"] for run in status["runs"]] == ["retention", "retention"]
    assert {run["principal"] for run in status["runs"]} == {"local"}
    trail = json.loads(_bzzz(cli_env, "audit", "list", "--json").stdout)["records"]
    runs = [r for r in trail if r["action"] == "cli:retention run"]
    assert [r["outcome"] for r in runs] == ["ok", "ok"]
    assert {r["principal"] for r in runs} == {"local"}


def test_forget_refuses_an_unknown_agent_and_a_bad_id_and_records_the_refusal(
    cli_env: dict[str, str],
) -> None:
    unknown = _bzzz(cli_env, "forget", "--agent", "nobody-here")
    assert unknown.returncode == 1
    assert "no agent 'nobody-here'" in unknown.stderr
    bad = _bzzz(cli_env, "forget", "--agent", "not an id!")
    assert bad.returncode == 1
    assert "is not an agent id" in bad.stderr
    trail = json.loads(_bzzz(cli_env, "audit", "list", "--json").stdout)["records"]
    forgets = [r for r in trail if r["action"] == "cli:forget"]
    assert [(r["target"], r["outcome"]) for r in forgets] == [
        ("nobody-here", "AGENT_NOT_FOUND"),
        ("not an id!", "INVALID_PARAMETERS"),
    ]


def test_a_bad_retention_setting_stops_with_one_line(cli_env: dict[str, str]) -> None:
    done = _bzzz(dict(cli_env, BZZZ_RETENTION__MEMORY_DAYS="-2"), "retention", "run")
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "bzzz: invalid setting retention.memory_days (BZZZ_RETENTION__MEMORY_DAYS): "
        "Input should be greater than or equal to 0"
    )
