"""What `bzzz guard install` keeps for a work tree: its agent, its token, the node's URL.

They live in the work tree's own git directory (``<git dir>/bzzz/``: ``.git/bzzz`` or the
worktree's under ``.git/worktrees/``), outside the work tree, so each worktree of a repository
has its own agent. Standard library only: the light commands (the Claude Code hooks) read them.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

CONF_DIR = "bzzz"


def git_dir(repo: Path) -> Path | None:
    """The work tree's own git directory, or None outside a repository."""
    try:
        done = subprocess.run(
            ["git", "-C", str(repo), "rev-parse", "--absolute-git-dir"],
            capture_output=True,
            text=True,
            check=False,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    found = done.stdout.strip()
    return Path(found) if done.returncode == 0 and found else None


def kept(repo: Path, name: str) -> str | None:
    """What the guard keeps under ``name`` (agent, token, url) for the work tree at ``repo``."""
    where = git_dir(repo)
    if where is None:
        return None
    try:
        return (where / CONF_DIR / name).read_text(encoding="utf-8").strip() or None
    except OSError:
        return None


def configured_agent(repo: Path) -> str | None:
    """The agent `bzzz guard install` set for the work tree at ``repo``, if any."""
    return kept(repo, "agent")
