"""`bzzz hooks claude-code` and `bzzz hooks run EVENT`: the network in a coding agent's turn.

`bzzz hooks claude-code --agent ID` prints (or ``--write``s into ``.claude/settings.json``,
keeping what is there) the Claude Code hooks that run `bzzz hooks run`:

- ``SessionStart`` → ``session-start``: announce the agent, then what ``prompt`` shows;
- ``UserPromptSubmit`` → ``prompt``: its unread messages (marked read once shown), tasks
  assigned to it, escalations waiting on it, its reservations about to end — bounded, newest
  first — added to the model's context;
- ``PreToolUse`` on ``Edit|Write|MultiEdit`` → ``pre-tool``: a file another agent holds is
  refused, naming the holder and how to ask them.

The commands read the hook's JSON on stdin and answer as Claude Code's hooks reference says
(https://code.claude.com/docs/en/hooks): exit 0 with ``hookSpecificOutput.additionalContext``
for context, ``hookSpecificOutput.permissionDecision: "deny"`` with
``permissionDecisionReason`` to refuse a tool call. They are light commands
(``bzzz.light.hooks``, run by ``bzzz.entry`` without the rest of the CLI): a PreToolUse hook
runs before every edit.
Settings never hold a token: the commands take ``BZZZ_TOKEN``, ``--token-file``, or the token
file `bzzz guard install` wrote for the repository.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bzzz.errors import InvalidParameters
from bzzz.light import hooks as light_hooks
from bzzz.light import worktree

if TYPE_CHECKING:
    from bzzz.config import Settings

EVENTS = light_hooks.EVENTS
# Claude Code's event -> our command, and the tools a PreToolUse hook looks at.
CLAUDE_EVENTS = {
    "SessionStart": "session-start",
    "UserPromptSubmit": "prompt",
    "PreToolUse": "pre-tool",
}
EDIT_TOOLS = "Edit|Write|MultiEdit"
# Seconds Claude Code waits for each command (ours answer in about one).
HOOK_TIMEOUT = 30
# A settings file we merge into is a few kilobytes; past this it is not one to rewrite.
MAX_SETTINGS_BYTES = 1_000_000


def add_parser(sub: Any) -> None:
    """The `hooks` command group."""
    hooks = sub.add_parser("hooks", help="hooks for coding agents (Claude Code)")
    actions = hooks.add_subparsers(dest="hooks_command", required=True)
    claude = actions.add_parser(
        "claude-code",
        help="print (or --write) Claude Code settings that bring the network into each turn",
    )
    light_hooks.agent_arguments(claude)
    claude.add_argument(
        "--write",
        action="store_true",
        help="merge into .claude/settings.json of the project (keeping what is there)",
    )
    claude.add_argument(
        "--project-dir", help="the project to write into (default: this repository's top)"
    )
    claude.add_argument(
        "--local",
        action="store_true",
        help="write .claude/settings.local.json (not committed: one agent per clone)",
    )
    run = actions.add_parser("run", help="run one hook (reads the hook's JSON on stdin)")
    light_hooks.add_arguments(run)


def run(args: argparse.Namespace, settings: Settings) -> int:
    """Run `bzzz hooks …`."""
    if args.hooks_command == "run":
        return light_hooks.run(args, data_dir=args.data_dir, config=args.config)
    return claude_code(args)


def hook_command(args: argparse.Namespace, agent: str, event: str) -> str:
    """The shell command of one hook: this bzzz, by absolute path, with the agent's flags."""
    from bzzz.cli.guard import bzzz_command

    words = [*bzzz_command(), "hooks", "run", event, "--agent", agent]
    if event != "pre-tool":
        words += ["--role", args.role, "--capabilities", args.capabilities]
        if args.project:
            words += ["--project", args.project]
    if args.offline != "warn":
        words += ["--offline", args.offline]
    if args.token_file:
        words += ["--token-file", str(Path(args.token_file).expanduser().resolve())]
    if args.url:
        words += ["--url", args.url]
    return shlex.join(words)


def claude_settings(args: argparse.Namespace, agent: str) -> dict[str, Any]:
    """The ``hooks`` part of Claude Code's settings for ``agent``."""
    hooks: dict[str, list[dict[str, Any]]] = {}
    for name, event in CLAUDE_EVENTS.items():
        group: dict[str, Any] = {
            "hooks": [
                {
                    "type": "command",
                    "command": hook_command(args, agent, event),
                    "timeout": HOOK_TIMEOUT,
                }
            ]
        }
        if name == "PreToolUse":
            group = {"matcher": EDIT_TOOLS} | group
        hooks[name] = [group]
    return {"hooks": hooks}


def _ours(group: Any) -> bool:
    """Whether a settings' hook group is one we wrote (its command runs `… hooks run EVENT`)."""
    if not isinstance(group, dict) or not isinstance(group.get("hooks"), list):
        return False
    for hook in group["hooks"]:
        try:
            words = shlex.split(str(hook.get("command", ""))) if isinstance(hook, dict) else []
        except ValueError:
            continue
        for at in range(len(words) - 2):
            if words[at : at + 2] == ["hooks", "run"] and words[at + 2] in EVENTS:
                return True
    return False


def merged(existing: dict[str, Any], ours: dict[str, Any]) -> dict[str, Any]:
    """``existing`` settings with our hooks in place of any we wrote before; the rest kept."""
    hooks = existing.get("hooks")
    if hooks is not None and not isinstance(hooks, dict):
        raise InvalidParameters(
            "the settings' 'hooks' is not an object", details={"field": "hooks"}
        )
    combined = dict(hooks or {})
    for event, groups in ours["hooks"].items():
        kept = combined.get(event) or []
        if not isinstance(kept, list):
            raise InvalidParameters(
                f"the settings' hooks.{event} is not a list", details={"field": event}
            )
        combined[event] = [g for g in kept if not _ours(g)] + groups
    return existing | {"hooks": combined}


def claude_code(args: argparse.Namespace) -> int:
    """Print the settings, or merge them into the project's settings file."""
    agent = args.agent or worktree.configured_agent(Path(args.project_dir or "."))
    if not agent:
        raise InvalidParameters(
            "name the agent: --agent ID (or install the guard first: bzzz guard install "
            "--agent ID)",
            details={"field": "agent"},
        )
    ours = claude_settings(args, agent)
    if not args.write:
        sys.stdout.write(json.dumps(ours, indent=2) + "\n")
        return 0
    # The project Claude Code opens: the repository's top, unless a directory is named.
    project = Path(args.project_dir).expanduser() if args.project_dir else None
    project = (project or light_hooks.repo_root(Path("."))).resolve()
    path = project / ".claude" / ("settings.local.json" if args.local else "settings.json")
    existing = _read_settings(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.bzzz")
    partial.write_text(json.dumps(merged(existing, ours), indent=2) + "\n", encoding="utf-8")
    partial.replace(path)
    sys.stdout.write(f"wrote the hooks of agent {agent} into {path}\n")
    return 0


def _read_settings(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    if path.stat().st_size > MAX_SETTINGS_BYTES:
        raise InvalidParameters(f"{path} is larger than {MAX_SETTINGS_BYTES} bytes")
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise InvalidParameters(f"{path} is not JSON ({exc}); fix it or move it away") from None
    if not isinstance(found, dict):
        raise InvalidParameters(f"{path} does not hold a JSON object")
    return found
