"""The guard's hooks hand the check every path of a commit or a push in a spelling it takes.

git quotes a path holding '"', '\\' or a control character (``"a\\"b.py"``) even with
core.quotePath=false; the check refuses such a spelling as bad input, and a guard that cannot
check lets the commit through (bzzz.offline=warn): one oddly named file carried every held
path of the commit past the guard. A stand-in ``bzzz`` records what the hook asks.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from bzzz.cli.guard import hook_script
from bzzz.reservations.check import normalize_path

ODD = ['src/a"b.py', "src/c\\d.py", "src/e\tf.py", "src/g\nh.py"]


def _git(repo: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BZZZ_", "GIT_"))}
    env |= {"HOME": str(repo.parent), "GIT_CONFIG_NOSYSTEM": "1"}
    return subprocess.run(
        ["git", "-C", str(repo), *args], input=stdin, capture_output=True, text=True,
        env=env, timeout=60, check=False,
    )  # fmt: skip


def _repo(tmp_path: Path) -> tuple[Path, Path]:
    repo, asked = tmp_path / "repo", tmp_path / "asked"
    repo.mkdir()
    for args in (("init", "-q"), ("config", "user.email", "d@e.org"), ("config", "user.name", "d")):
        assert _git(repo, *args).returncode == 0
    fake = tmp_path / "bzzz"
    fake.write_text(f"#!/bin/sh\nprintf '%s\\0' \"$@\" > '{asked}'\nexit 0\n")
    fake.chmod(0o755)
    for name in ("pre-commit", "pre-push"):
        hook = repo / ".git" / "hooks" / name
        hook.write_text(hook_script(name, [str(fake)]))
        hook.chmod(0o755)
    (repo / ".git" / "bzzz").mkdir()
    (repo / ".git" / "bzzz" / "agent").write_text("agent-b\n")
    (repo / "src").mkdir()
    for name in [*ODD, "src/held.py"]:
        (repo / name).write_text("x\n")
    return repo, asked


def _paths(asked: Path) -> list[str]:
    words = asked.read_bytes().decode().split("\0")[:-1]
    return words[words.index("--") + 1 :]


def test_a_commit_with_oddly_named_files_still_checks_every_path(tmp_path: Path) -> None:
    repo, asked = _repo(tmp_path)
    assert _git(repo, "add", ".").returncode == 0

    done = _git(repo, "commit", "-q", "-m", "odd names")
    paths = _paths(asked)

    assert done.returncode == 0, done.stderr
    assert "src/held.py" in paths and len(paths) == len(ODD) + 1
    assert [normalize_path(p) for p in paths] == paths  # every spelling is one the check takes


def test_a_push_with_oddly_named_files_still_checks_every_path(tmp_path: Path) -> None:
    repo, asked = _repo(tmp_path)
    assert _git(repo, "add", ".").returncode == 0
    assert _git(repo, "commit", "-q", "--no-verify", "-m", "odd names").returncode == 0
    head = _git(repo, "rev-parse", "HEAD").stdout.strip()
    refs = f"refs/heads/main {head} refs/heads/main {'0' * 40}\n"

    done = subprocess.run(
        ["sh", str(repo / ".git" / "hooks" / "pre-push"), "origin", "x"], cwd=repo,
        input=refs, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    paths = _paths(asked)

    assert done.returncode == 0, done.stderr
    assert "src/held.py" in paths and len(paths) == len(ODD) + 1
    assert [normalize_path(p) for p in paths] == paths
