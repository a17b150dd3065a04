"""`bzzz hooks run session-start|prompt|pre-tool`: one Claude Code hook, answered.

Each reads the JSON Claude Code gives a command hook on stdin (``session_id``, ``cwd``,
``hook_event_name``; ``prompt`` for UserPromptSubmit; ``tool_name`` and ``tool_input`` —
``file_path`` — for PreToolUse), calls the node over HTTP with the agent's token, and answers
as the hooks reference says (https://code.claude.com/docs/en/hooks):

- context: exit 0 and ``{"hookSpecificOutput": {"hookEventName": …, "additionalContext":
  TEXT}}`` on stdout (nothing when there is nothing to say);
- a refused edit: exit 0 and ``{"hookSpecificOutput": {"hookEventName": "PreToolUse",
  "permissionDecision": "deny", "permissionDecisionReason": TEXT}}`` (the model reads the
  reason);
- the node out of reach: one line in ``systemMessage`` (shown to the person); a PreToolUse
  hook then lets the edit through (``--offline warn``, the default) or denies it (``block``).

A light command (``bzzz.light``): the standard library only, since a PreToolUse hook runs
before every edit. Nothing here raises past :func:`run`: a hook never answers with a traceback.
The node and token: ``--url``/``BZZZ_URL`` (else the running node), ``--token``/``BZZZ_TOKEN``,
``--token-file``, or the token file `bzzz guard install` keeps for the work tree.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bzzz.light import http as node_http
from bzzz.light import worktree

EVENTS = ("session-start", "prompt", "pre-tool")
DEFAULT_ROLE = "developer"
DEFAULT_CAPABILITIES = "code"
# The hook's JSON is small (a prompt, a tool's input); past this it is not read.
MAX_INPUT_BYTES = 2_000_000
# What one hook adds to the model's context at most, and one message's text at most.
MAX_CONTEXT_CHARS = 8000
MAX_MESSAGE_CHARS = 600


class Trouble(Exception):
    """The node could not be asked, or refused: one line says why."""

    def __init__(self, message: str, *, unreachable: bool = False, said_no: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.unreachable = unreachable
        # The node answered and refused the request (a 4xx): no offline setting lets it pass.
        self.said_no = said_no


def _bounded(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 1 <= value <= 50:
        raise argparse.ArgumentTypeError(f"{value} is not between 1 and 50")
    return value


def agent_arguments(parser: argparse.ArgumentParser) -> None:
    """The agent's flags, shared by `bzzz hooks claude-code` and `bzzz hooks run`."""
    parser.add_argument(
        "--agent", help="the agent's id (default: the one `bzzz guard install` set here)"
    )
    parser.add_argument("--role", default=DEFAULT_ROLE, help=f"its role (default {DEFAULT_ROLE})")
    parser.add_argument(
        "--capabilities",
        default=DEFAULT_CAPABILITIES,
        help=f"comma-separated (default {DEFAULT_CAPABILITIES})",
    )
    parser.add_argument("--project", help="its project (default: its token's one project)")
    parser.add_argument(
        "--offline",
        choices=("warn", "block"),
        default="warn",
        help="when the node cannot be reached: warn and let edits through (default), or block",
    )
    parser.add_argument("--token-file", help="a file holding the agent's token (mode 0600)")
    parser.add_argument("--url", help="the node's base URL (or BZZZ_URL; default: local node)")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of `bzzz hooks run` (the light entry's and the CLI's parser)."""
    parser.add_argument("event", choices=EVENTS, help="the hook: " + ", ".join(EVENTS))
    agent_arguments(parser)
    parser.add_argument("--token", help="the agent's bearer token (or BZZZ_TOKEN)")
    parser.add_argument(
        "--limit", type=_bounded, default=10, help="at most N items a section (1-50, default 10)"
    )
    parser.add_argument(
        "--expiring",
        type=int,
        default=900,
        help="show reservations ending within this many seconds (default 900)",
    )


def main(argv: list[str], *, data_dir: str | None = None, config: str | None = None) -> int:
    """`bzzz hooks run …` from the command line's words (the light entry's path)."""
    parser = argparse.ArgumentParser(
        prog="bzzz hooks run", description="Run one Claude Code hook (its JSON on stdin)."
    )
    add_arguments(parser)
    args = parser.parse_args(argv)
    return run(args, data_dir=data_dir, config=config)


@dataclass(frozen=True, slots=True)
class Node:
    """One node, asked with one token (``http.client``: no web library to import)."""

    url: str
    token: str | None
    timeout: float = node_http.TIMEOUT

    def call(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, str] | None = None,
        body: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """One request under /api/v1; the JSON answer, or Trouble."""
        if params:
            from urllib.parse import urlencode

            path += f"?{urlencode(params)}"
        full = "/api/v1" + path
        try:
            if method == "POST":
                return node_http.post_json(self.url, full, body or {}, self.token, self.timeout)
            return _get_json(self.url, full, self.token, self.timeout)
        except node_http.Unreachable as exc:
            raise Trouble(f"cannot reach the node: {exc}", unreachable=True) from None
        except node_http.Refused as exc:
            raise Trouble(f"the node refused: {exc}", said_no=exc.status < 500) from None


def _get_json(base: str, path: str, token: str | None, timeout: float) -> dict[str, Any]:
    """GET ``base + path``: as ``node_http.post_json`` does a POST (its errors, its bounds).
    Only the prompt hooks read; the PreToolUse hook (a POST) never imports ``http.client``."""
    import http.client

    scheme, host, port, prefix = node_http.split_url(base)
    kind = http.client.HTTPSConnection if scheme == "https" else http.client.HTTPConnection
    headers = {"Accept": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    connection = kind(host, port, timeout=timeout)
    try:
        connection.request("GET", prefix.rstrip("/") + path, headers=headers)
        response = connection.getresponse()
        raw = response.read(node_http.MAX_ANSWER_BYTES + 1)
        status = response.status
    except (OSError, http.client.HTTPException) as exc:
        reason = exc or type(exc).__name__
        raise node_http.Unreachable(f"no node answered at {base} ({reason})") from None
    finally:
        connection.close()
    try:
        answer = json.loads(raw) if len(raw) <= node_http.MAX_ANSWER_BYTES else None
    except ValueError:
        answer = None
    if not isinstance(answer, dict):
        raise node_http.Unreachable(f"{base} did not answer as a BZZZ node (HTTP {status})")
    if status >= 400:
        raise node_http.Refused(status, answer)
    return answer


def run(args: argparse.Namespace, *, data_dir: str | None, config: str | None) -> int:
    """Run one hook; every failure becomes the answer the offline setting says."""
    event = read_event(sys.stdin.buffer)
    name = {"session-start": "SessionStart", "prompt": "UserPromptSubmit"}.get(
        args.event, "PreToolUse"
    )
    try:
        agent = args.agent or worktree.configured_agent(_root(event))
        if not agent:
            raise Trouble("no agent: give --agent ID (or install the guard here)")
        url = args.url or worktree.kept(_root(event), "url")
        node = Node(_url(url, data_dir, config), _token(args, event))
        if args.event == "pre-tool":
            return pre_tool(node, agent, event)
        text = briefing(node, agent, args, announce=args.event == "session-start")
    except Trouble as exc:
        return _trouble(name, exc, args)
    except Exception as exc:  # the hook's boundary: an answer it did not expect is one line
        return _trouble(name, Trouble(f"unexpected ({type(exc).__name__}: {exc})"), args)
    if text:
        _answer({"hookSpecificOutput": {"hookEventName": name, "additionalContext": text}})
    return 0


def _url(url: str | None, data_dir: str | None, config: str | None) -> str:
    try:
        return node_http.node_url(url, data_dir, config)
    except Exception as exc:  # a settings file that does not load: say so, never a traceback
        raise Trouble(f"cannot tell where the node is ({exc})") from None


def read_event(stream: Any) -> dict[str, Any]:
    """The hook's JSON object (an empty one when there is none or it is not JSON)."""
    raw = stream.read(MAX_INPUT_BYTES + 1)
    if len(raw) > MAX_INPUT_BYTES:
        return {}
    try:
        found = json.loads(raw or b"{}")
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


def _answer(data: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(data) + "\n")


def _trouble(name: str, exc: Trouble, args: argparse.Namespace) -> int:
    """One line for the person; the edit let through or refused as ``--offline`` says."""
    what = "the node away" if exc.unreachable else "the check failed"
    line = f"bzzz: {exc.message}"
    if name != "PreToolUse":
        _answer({"systemMessage": line})
        return 0
    if exc.said_no:
        reason = f"{line}; edits are refused until the hook's token and agent are right"
        _answer(_deny(reason) | {"systemMessage": f"{line}; edit refused"})
        return 0
    if args.offline == "block":
        reason = f"{line}; edits are refused until it answers (bzzz hooks --offline block)"
        _answer(_deny(reason) | {"systemMessage": f"{line}; edit refused (--offline block)"})
        return 0
    _answer({"systemMessage": f"{line}; edit allowed unchecked ({what}, --offline warn)"})
    return 0


def _deny(reason: str) -> dict[str, Any]:
    return {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": reason,
        }
    }


def _token(args: argparse.Namespace, event: dict[str, Any]) -> str | None:
    """``--token``, ``BZZZ_TOKEN``, ``--token-file``, or the guard's token file here."""
    if args.token or os.environ.get("BZZZ_TOKEN"):
        return str(args.token or os.environ["BZZZ_TOKEN"]).strip()
    if not args.token_file:
        return worktree.kept(_root(event), "token")
    path = Path(args.token_file).expanduser()
    try:
        return path.read_text(encoding="utf-8").strip() or None
    except OSError as exc:
        raise Trouble(f"cannot read the token file {path} ({exc.strerror})") from None


def _root(event: dict[str, Any]) -> Path:
    """The project: ``CLAUDE_PROJECT_DIR``, else the hook's ``cwd``, else here."""
    where = os.environ.get("CLAUDE_PROJECT_DIR") or event.get("cwd") or "."
    return Path(str(where)).expanduser()


# --- session-start, prompt -----------------------------------------------------------------------


def briefing(node: Node, agent: str, args: argparse.Namespace, *, announce: bool) -> str:
    """What the agent should know now; at session start, who it is first."""
    parts: list[str] = []
    if announce:
        parts.append(_announce(node, agent, args))
    news, status = _news(node, agent, args)
    parts += news
    if not announce and status == "offline":
        # Its lease ran out while the person was away: it comes back as it was announced.
        _announce(node, agent, args)
    text = "\n\n".join(p for p in parts if p)
    return text[:MAX_CONTEXT_CHARS]


def _announce(node: Node, agent: str, args: argparse.Namespace) -> str:
    capabilities = [c.strip() for c in args.capabilities.split(",") if c.strip()]
    body: dict[str, Any] = {"agent_id": agent, "role": args.role, "capabilities": capabilities}
    if args.project:
        body["project"] = args.project
    shown = node.call("POST", "/agents", body=body)["agent"]
    project = shown.get("project") or "no project"
    return (
        f"You are agent {agent} (role {shown.get('role')}, project {project}) on the BZZZ "
        f"network ({node.url}). Other agents work in this repository: before you change "
        "files, reserve them (bzzz_reserve), and release them when you are done. Messages "
        f"for you arrive in this context; answer with bzzz_post (from {agent})."
    )


def _news(node: Node, agent: str, args: argparse.Namespace) -> tuple[list[str], str]:
    """Unread messages (then marked read), tasks, escalations, reservations ending soon; and
    the agent's status."""
    from urllib.parse import quote

    messages, status = _messages(node, agent, quote(agent, safe=""), args.limit)
    return [
        messages,
        _tasks(node, agent, args.limit),
        _escalations(node, agent, args.limit),
        _expiring(node, agent, args.expiring, args.limit),
    ], status


def _content(content: Any) -> str:
    text = content.get("text") if isinstance(content, dict) else None
    shown = text if isinstance(text, str) else json.dumps(content, ensure_ascii=False)
    return shown if len(shown) <= MAX_MESSAGE_CHARS else shown[:MAX_MESSAGE_CHARS] + " […]"


def _messages(node: Node, agent: str, who: str, limit: int) -> tuple[str, str]:
    path = f"/agents/{who}/inbox"
    inbox = node.call("GET", path, params={"unread": "true", "limit": str(limit)})
    messages, status = inbox["messages"], str(inbox.get("status"))
    if not messages:
        return "", status
    lines = [f"Unread messages for {agent} ({len(messages)} of {inbox['unread']}, newest first):"]
    for m in messages:
        thread = f", thread {m['thread_id']}" if m.get("thread_id") else ""
        lines.append(
            f"- [{m.get('timestamp')}] from {m['sender']} ({m['message_type']}, "
            f"{m['priority']}{thread}): {_content(m.get('content'))}"
        )
    left = int(inbox["unread"]) - len(messages)
    if left > 0:
        lines.append(f"({left} older unread: bzzz inbox {agent} --unread)")
    lines.append(f"Reply with bzzz_post to bzzz://<sender> (as {agent}).")
    node.call("POST", f"{path}/read", body={"message_ids": [m["id"] for m in messages]})
    return "\n".join(lines), status


def _tasks(node: Node, agent: str, limit: int) -> str:
    listed = node.call("GET", "/tasks", params={"agent_id": agent, "limit": "100"})
    active = [t for t in listed["tasks"] if t.get("status") in ("pending", "in_progress")]
    if not active:
        return ""
    lines = [f"Tasks assigned to {agent} ({len(active)} open, newest first):"]
    for t in active[:limit]:
        lines.append(
            f"- {t['id']} [{t['status']}, {t['priority']}] from {t.get('assigner')}: "
            f"{_content({'text': t.get('description') or ''})}"
        )
    return "\n".join(lines)


def _escalations(node: Node, agent: str, limit: int) -> str:
    threads = node.call("GET", "/threads", params={"agent_id": agent, "limit": "100"})
    mine = {t["id"]: t for t in threads["threads"] if agent in (t.get("participants") or [])}
    if not mine:
        return ""
    found = node.call("GET", "/escalations", params={"open": "true", "limit": "100"})
    waiting = [
        e
        for e in found["escalations"]
        if (e.get("threadId") or e.get("thread_id")) in mine and not e.get("resolved")
    ]
    if not waiting:
        return ""
    lines = [f"Escalations waiting on {agent} ({len(waiting)}):"]
    for e in waiting[:limit]:
        thread = e.get("threadId") or e.get("thread_id")
        topic = mine[thread].get("topic")
        lines.append(
            f"- thread {thread} ({topic}): {_content({'text': e.get('reason') or ''})} "
            f"(since {e.get('triggeredAt') or e.get('triggered_at')})"
        )
    return "\n".join(lines)


def _expiring(node: Node, agent: str, within: int, limit: int) -> str:
    held = node.call("GET", "/reservations", params={"agent_id": agent})
    now = datetime.now(UTC)
    soon = []
    for r in held["reservations"]:
        ends = _when(r.get("expires_at"))
        if ends is not None and 0 <= (ends - now).total_seconds() <= within:
            soon.append((ends, r))
    if not soon:
        return ""
    soon.sort(key=lambda pair: pair[0])
    lines = [f"Reservations of {agent} ending soon (renew with bzzz_reserve action=renew):"]
    for ends, r in soon[:limit]:
        minutes = max(0, int((ends - now).total_seconds() // 60))
        lines.append(
            f"- {', '.join(r['paths'])} ({r['mode']}, {r['id']}) ends {r['expires_at']} "
            f"(in {minutes} min)"
        )
    return "\n".join(lines)


def _when(stamp: Any) -> datetime | None:
    if not isinstance(stamp, str):
        return None
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return None


# --- pre-tool ------------------------------------------------------------------------------------


def repo_root(start: Path) -> Path:
    """The repository's top (reservations name paths from it), else ``start``."""
    try:
        done = subprocess.run(
            ["git", "-C", str(start), "rev-parse", "--show-toplevel"],
            capture_output=True,
            text=True,
            check=False,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return start
    return Path(done.stdout.strip()) if done.returncode == 0 and done.stdout.strip() else start


def relative_path(file_path: str, event: dict[str, Any]) -> str | None:
    """The edited file as the project names it (``src/x.py``); None outside the project."""
    root = repo_root(_root(event)).resolve()
    target = Path(file_path).expanduser()
    if not target.is_absolute():
        target = Path(str(event.get("cwd") or root)) / target
    try:
        return target.resolve().relative_to(root).as_posix()
    except ValueError:
        return None


def pre_tool(node: Node, agent: str, event: dict[str, Any]) -> int:
    """Deny an edit of a file another agent holds; say nothing otherwise."""
    tool_input = event.get("tool_input")
    if not isinstance(tool_input, dict):
        return 0
    file_path = tool_input.get("file_path") or tool_input.get("notebook_path")
    if not isinstance(file_path, str) or not file_path:
        return 0
    path = relative_path(file_path, event)
    if path is None:
        return 0
    body = {"agent": agent, "paths": [path], "enforce": True, "source": "hook"}
    checked = node.call("POST", "/reservations/check", body=body)
    if checked.get("allowed"):
        return 0
    _answer(_deny(refusal(agent, path, checked)))
    return 0


def refusal(agent: str, path: str, checked: dict[str, Any]) -> str:
    """Why the edit is refused, who holds the path and how to ask them."""
    refused: Any = next((p for p in checked.get("paths") or [] if not p.get("allowed")), {})
    holder = refused.get("holder") if isinstance(refused, dict) else None
    if not isinstance(holder, dict):
        return (
            f"{path} may not be written by {agent} now (its reservation ended or was taken). "
            "Reserve it again with bzzz_reserve before you edit it."
        )
    other = holder.get("agent")
    held = ", ".join(holder.get("paths") or []) or path
    return (
        f"{path} is reserved exclusively by agent {other} ({held}, reservation "
        f"{holder.get('reservation_id')}, until {holder.get('expires_at')}). Do not edit it "
        f"now. Ask {other} to release it: bzzz_post to bzzz://{other} with message_type "
        f'"request" and content {{"text": "please release {path}"}}; or work on something '
        "else until the reservation ends."
    )
