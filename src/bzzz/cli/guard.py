"""`bzzz guard install|uninstall`: git hooks that hold an agent to the path reservations.

`bzzz guard install --agent ID` puts a ``pre-commit`` and a ``pre-push`` hook in the
repository's hooks directory (``core.hooksPath`` when set): each gathers the paths of the
commit (the staged ones) or of the push (those the pushed commits change) and runs
``bzzz reservations check PATH… --agent ID --enforce --source guard``. A path another agent
holds exclusively refuses the commit, and the check names the holder and when its hold ends;
the holder commits freely.

- The hooks are small POSIX ``sh`` scripts calling this ``bzzz`` by absolute path: whatever
  Python the repository's own tools run, the guard runs the one it was installed with.
- A hook that was there is kept beside ours (``pre-commit.bzzz-chained``) and run first; its
  refusal stands. `bzzz guard uninstall` puts it back as it was.
- The agent, and its token (``--token`` or ``BZZZ_TOKEN`` at install; mode 0600), are kept in
  ``<git dir>/bzzz/``: outside the work tree, and per work tree (``git worktree``), so agents
  in worktrees of one repository share the hooks but not their identity. ``BZZZ_TOKEN`` set
  when git runs wins.
- When the node cannot be reached (or the check cannot run), git config ``bzzz.offline``
  decides: ``warn`` (the default) lets the commit through, ``block`` refuses it; either way
  the hook prints one line saying which applied.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bzzz.errors import InvalidParameters
from bzzz.light.worktree import CONF_DIR

if TYPE_CHECKING:
    from bzzz.config import Settings

HOOKS = ("pre-commit", "pre-push")
MARKER = "# bzzz-guard: "
CHAINED = ".bzzz-chained"
OFFLINE_KEY = "bzzz.offline"


def add_parser(sub: Any) -> None:
    """The `guard` command group."""
    guard = sub.add_parser("guard", help="git hooks that refuse commits touching held paths")
    actions = guard.add_subparsers(dest="guard_command", required=True)
    install = actions.add_parser(
        "install", help="install the pre-commit and pre-push hooks for an agent"
    )
    install.add_argument("--repo", help="the repository (default: the one here)")
    install.add_argument("--agent", required=True, help="the agent committing in this work tree")
    install.add_argument(
        "--offline",
        choices=("warn", "block"),
        help="when the node cannot be reached: warn and commit (default) or block",
    )
    install.add_argument(
        "--token", help="the agent's token, kept in <git dir>/bzzz/token (or BZZZ_TOKEN)"
    )
    install.add_argument("--url", help="the node's base URL, kept for the hooks (or BZZZ_URL)")
    uninstall = actions.add_parser("uninstall", help="remove the hooks, restore those chained")
    uninstall.add_argument("--repo", help="the repository (default: the one here)")


def run(args: argparse.Namespace, settings: Settings) -> int:
    """Run `bzzz guard …`."""
    repo = Path(args.repo or ".").expanduser()
    if args.guard_command == "install":
        return install(repo, args)
    return uninstall(repo)


def bzzz_command() -> list[str]:
    """This `bzzz`, by absolute path (its script runs the Python it was installed with)."""
    called = Path(sys.argv[0])
    if called.name == "bzzz" and called.is_file() and os.access(called, os.X_OK):
        return [str(called.absolute())]
    beside = Path(sysconfig.get_path("scripts")) / "bzzz"
    if beside.is_file() and os.access(beside, os.X_OK):
        return [str(beside)]
    return [sys.executable, "-m", "bzzz.cli"]


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=False, timeout=30
    )
    if done.returncode != 0:
        reason = done.stderr.strip().splitlines()[-1:] or [f"exit {done.returncode}"]
        raise InvalidParameters(
            f"git {' '.join(args)} failed in {repo}: {reason[0]}", details={"field": "repo"}
        )
    return done.stdout.strip()


def git_dir(repo: Path) -> Path:
    """The work tree's own git directory (``.git``, or the worktree's under it)."""
    return Path(_git(repo, "rev-parse", "--absolute-git-dir"))


def hooks_dir(repo: Path) -> Path:
    """Where git looks for hooks (``core.hooksPath`` when set)."""
    found = Path(_git(repo, "rev-parse", "--git-path", "hooks"))
    return found if found.is_absolute() else (repo / found).resolve()


def _ours(path: Path) -> bool:
    try:
        with path.open(encoding="utf-8", errors="replace") as hook:
            return MARKER in hook.read(4096)
    except OSError:
        return False


def _write_private(path: Path, text: str) -> None:
    partial = path.with_name(f".{path.name}.partial")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(text + "\n")
    partial.replace(path)


def install(repo: Path, args: argparse.Namespace) -> int:
    """Install both hooks (chaining what was there) and keep the agent's identity."""
    agent = args.agent.strip()
    if not agent or "\n" in agent:
        raise InvalidParameters("--agent needs an agent id", details={"field": "agent"})
    hooks = hooks_dir(repo)
    conf = git_dir(repo) / CONF_DIR
    hooks.mkdir(parents=True, exist_ok=True)
    command = bzzz_command()
    chained = []
    for name in HOOKS:
        path = hooks / name
        if (path.exists() or path.is_symlink()) and not _ours(path):
            kept = path.with_name(name + CHAINED)
            if kept.exists() or kept.is_symlink():
                raise InvalidParameters(
                    f"{path} is not ours and {kept.name} is taken: move one of them away",
                    details={"field": "repo"},
                )
            path.rename(kept)
            chained.append(name)
        partial = path.with_name(f".{name}.bzzz")
        partial.write_text(hook_script(name, command), encoding="utf-8")
        partial.chmod(0o755)
        partial.replace(path)
    conf.mkdir(mode=0o700, exist_ok=True)
    _write_private(conf / "agent", agent)
    token = args.token or os.environ.get("BZZZ_TOKEN")
    if token:
        _write_private(conf / "token", token.strip())
    url = args.url or os.environ.get("BZZZ_URL")
    if url:
        _write_private(conf / "url", url.strip())
    if args.offline:
        _git(repo, "config", OFFLINE_KEY, args.offline)
    offline = _offline(repo)
    kept_note = f"; kept and chained: {', '.join(chained)}" if chained else ""
    sys.stdout.write(
        f"bzzz guard installed in {hooks} (pre-commit, pre-push) for agent {agent}; "
        f"when the node cannot be reached: {offline} ({OFFLINE_KEY}){kept_note}\n"
    )
    return 0


def _offline(repo: Path) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), "config", "--get", OFFLINE_KEY],
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout.strip() or "warn"


def uninstall(repo: Path) -> int:
    """Remove our hooks, put the chained ones back, forget the agent's identity here."""
    hooks = hooks_dir(repo)
    restored = []
    for name in HOOKS:
        path = hooks / name
        if _ours(path):
            path.unlink()
        kept = path.with_name(name + CHAINED)
        if (kept.exists() or kept.is_symlink()) and not (path.exists() or path.is_symlink()):
            kept.rename(path)
            restored.append(name)
    conf = git_dir(repo) / CONF_DIR
    for name in ("agent", "token", "url"):
        (conf / name).unlink(missing_ok=True)
    if conf.is_dir() and not any(conf.iterdir()):
        conf.rmdir()
    subprocess.run(
        ["git", "-C", str(repo), "config", "--unset", OFFLINE_KEY],
        capture_output=True,
        check=False,
    )
    note = f"; restored: {', '.join(restored)}" if restored else ""
    sys.stdout.write(f"bzzz guard removed from {hooks}{note}\n")
    return 0


def hook_script(name: str, command: list[str]) -> str:
    """The POSIX sh hook ``name`` calling ``command`` (this bzzz)."""
    return _SCRIPT.format(
        marker=MARKER,
        hook=name,
        bzzz=" ".join(shlex.quote(word) for word in command),
        chained=CHAINED,
        paths=_PUSH_PATHS if name == "pre-push" else _COMMIT_PATHS,
        run_chained=_RUN_CHAINED_PUSH if name == "pre-push" else _RUN_CHAINED,
        read_refs="refs=$(cat)\n" if name == "pre-push" else "",
    )


# Paths as git stores them (-z: never quoted), one a line: a control character or a '\\' in
# a name (which no reservation can name) becomes '?', so the check takes every path and a
# held one is never carried past it by an oddly named neighbour.
_ONE_A_LINE = "tr '\\001-\\037\\\\' '[?*]' | tr '\\000' '\\n'"
_COMMIT_PATHS = f"files=$(git diff --cached --name-only --no-renames -z | {_ONE_A_LINE})"
# Every path a pushed commit changes: since the remote's commit, or those on no remote yet.
_PUSH_PATHS = """files=$(printf '%s\\n' "$refs" | while read -r lref lsha rref rsha; do
  case $lsha in *[!0]*) ;; *) continue ;; esac
  case $rsha in
    *[!0]*) if git cat-file -e "$rsha^{commit}" 2>/dev/null; then
              git log -z --name-only --format= --no-renames "$rsha..$lsha"
            else
              git log -z --name-only --format= --no-renames "$lsha" --not --remotes
            fi ;;
    *) git log -z --name-only --format= --no-renames "$lsha" --not --remotes ;;
  esac
done | ONE_A_LINE | sort -u)""".replace("ONE_A_LINE", _ONE_A_LINE)
_RUN_CHAINED = """if [ -e "$chained" ]; then
  "$chained" "$@" || exit $?
fi"""
_RUN_CHAINED_PUSH = """if [ -e "$chained" ]; then
  printf '%s\\n' "$refs" | "$chained" "$@" || exit $?
fi"""

_SCRIPT = """#!/bin/sh
{marker}{hook} (installed by `bzzz guard install`; `bzzz guard uninstall` removes it)
# Refuses a {hook} touching a path another agent holds exclusively (bzzz reservations).
hook={hook}
chained="$(dirname "$0")/{hook}{chained}"
{read_refs}{run_chained}

conf="$(git rev-parse --absolute-git-dir)/bzzz"
agent=$(cat "$conf/agent" 2>/dev/null)
if [ -z "$agent" ]; then
  echo "bzzz guard: no agent set for this work tree" \
    "(bzzz guard install --agent ID); $hook not checked" >&2
  exit 0
fi
if [ -z "$BZZZ_TOKEN" ] && [ -r "$conf/token" ]; then
  BZZZ_TOKEN=$(cat "$conf/token"); export BZZZ_TOKEN
fi
if [ -z "$BZZZ_URL" ] && [ -r "$conf/url" ]; then
  BZZZ_URL=$(cat "$conf/url"); export BZZZ_URL
fi
offline=$(git config --get bzzz.offline || echo warn)

{paths}
[ -n "$files" ] || exit 0

old_ifs=$IFS
IFS='
'
set -f
set -- $files
set +f
IFS=$old_ifs
out=$({bzzz} reservations check --agent "$agent" --enforce --source guard -- "$@" 2>&1)
status=$?
case $status in
  0) exit 0 ;;
  1) case $out in
       *Traceback*) ;;
       *) printf '%s\\n' "$out" >&2
          echo "bzzz guard: $hook refused for agent $agent: ask the holder to release" \
            "the path, or wait until its reservation ends" >&2
          exit 1 ;;
     esac ;;
esac
reason=$(printf '%s\\n' "$out" | grep -v '^ ' | tail -n 1)
reason=${{reason#bzzz: }}
if [ "$status" = 3 ]; then
  echo "bzzz guard: the node would not check the reservations (${{reason}});" \
    "$hook refused: fix the agent's token or id (bzzz guard install --agent ID)" >&2
  exit 1
fi
if [ "$offline" = block ]; then
  echo "bzzz guard: could not check the reservations (${{reason:-exit $status}});" \
    "$hook refused (bzzz.offline=block)" >&2
  exit 1
fi
echo "bzzz guard: could not check the reservations (${{reason:-exit $status}});" \
  "$hook allowed unchecked (bzzz.offline=warn)" >&2
exit 0
"""
