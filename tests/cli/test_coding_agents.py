"""A team of coding agents in one repository: the git guard, the Claude Code hooks, the inbox.

One spawned node for the module (agent tokens for agent-a and agent-b of project shop), real
git repositories, and real `bzzz` processes: the hook commands get the JSON a Claude Code
hook gets on stdin and must answer as Claude Code reads it; the guard's hooks are the POSIX
sh scripts git runs. "The node cannot be reached" is a node URL nothing listens on.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from e2e.markdown import caller, new_token, spawned, stateless
from e2e.support import HttpNode, bzzz_executable, kill_orphans, node_env
from ports import free_port

from bzzz.cli.hooks import merged

pytestmark = pytest.mark.integration
SHARED = pytest.mark.asyncio(loop_scope="module")
A, B = "agent-a", "agent-b"


@dataclass
class Team:
    """The node, each agent's token, and an MCP caller acting as agent-a."""

    node: HttpNode
    tokens: dict[str, str]
    home: Path

    def env(self, agent: str, **extra: str) -> dict[str, str]:
        """What an agent's processes run with: the node's URL and the agent's token."""
        base = {k: v for k, v in os.environ.items() if not k.startswith("BZZZ_")}
        return (
            base
            | {
                "BZZZ_URL": self.node.base_url,
                "BZZZ_TOKEN": self.tokens[agent],
                "BZZZ_DATA_DIR": str(self.home / "cli"),
                "HOME": str(self.home),
                "GIT_CONFIG_NOSYSTEM": "1",
            }
            | extra
        )

    async def as_a(self, tool: str, arguments: dict[str, Any], agent: str = A) -> dict[str, Any]:
        """One MCP tool call with agent-a's token (a stateless client)."""
        headers = {"Authorization": f"Bearer {self.tokens[agent]}"}
        async with stateless(self.node.mcp_url, headers) as client:
            answer = await caller(client.call_tool)(tool, arguments)
        assert answer.get("success") is True, answer
        return answer


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def team(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Team]:
    directory = tmp_path_factory.mktemp("coding-agents")
    base = {k: v for k, v in os.environ.items() if not k.startswith("BZZZ_")}
    node = await spawned(directory, node_env(base, directory / "data"))
    try:
        tokens = {
            agent: await new_token(
                node.env, agent, "--agent", agent, "--project", "shop", "--role", "developer"
            )
            for agent in (A, B)
        }
        made = Team(node, tokens, directory)
        for agent in (A, B):  # as their runners do (B's SessionStart hook announces it again)
            announced = {"agent_id": agent, "role": "developer", "project": "shop"}
            await made.as_a("bzzz_announce", announced, agent)
        yield made
    finally:
        await node.kill()
        kill_orphans(node.data_dir)


def bzzz(env: dict[str, str], *args: str, stdin: str = "", cwd: Path | None = None) -> Any:
    """`bzzz ARGS` to completion, with ``stdin``."""
    return subprocess.run(
        [bzzz_executable(), *args],
        input=stdin,
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def hook(team: Team, event: str, payload: dict[str, Any], agent: str = B) -> Any:
    """`bzzz hooks run EVENT --agent AGENT` given Claude Code's hook JSON on stdin."""
    return bzzz(team.env(agent), "hooks", "run", event, "--agent", agent, stdin=json.dumps(payload))


def answer_of(done: Any) -> dict[str, Any]:
    """The one JSON object a hook printed on stdout (exit 0, as Claude Code reads it)."""
    assert done.returncode == 0, done.stderr
    found: dict[str, Any] = json.loads(done.stdout)
    return found


def hook_input(repo: Path, event: str, **fields: Any) -> dict[str, Any]:
    """What Claude Code gives a command hook on stdin."""
    return {
        "session_id": "abc123",
        "transcript_path": str(repo / "transcript.jsonl"),
        "cwd": str(repo),
        "permission_mode": "default",
        "hook_event_name": event,
        **fields,
    }


# --- the Claude Code hooks -------------------------------------------------------------------


@SHARED
async def test_the_prompt_hook_adds_unread_messages_to_the_context_once(
    team: Team, tmp_path: Path
) -> None:
    started = answer_of(hook(team, "session-start", hook_input(tmp_path, "SessionStart")))
    await team.as_a(
        "bzzz_post",
        {"target_address": f"bzzz://{B}", "message_type": "text",
         "content": {"text": "I am changing src/app.py; keep off it until noon"}},
    )  # fmt: skip
    await team.as_a(
        "bzzz_post",
        {"target_address": f"bzzz://{B}", "message_type": "task_assignment",
         "content": {"task_type": "code", "description": "add the refund route"}},
    )  # fmt: skip
    await team.as_a("bzzz_reserve", {"agent_id": B, "paths": ["docs/**"], "ttl": 60}, B)
    prompt = hook_input(tmp_path, "UserPromptSubmit", prompt="go on")

    first = answer_of(hook(team, "prompt", prompt))
    second = hook(team, "prompt", prompt)

    said = started["hookSpecificOutput"]
    assert said["hookEventName"] == "SessionStart"
    assert f"You are agent {B}" in said["additionalContext"]
    context = first["hookSpecificOutput"]
    assert context["hookEventName"] == "UserPromptSubmit"
    assert "from agent-a" in context["additionalContext"]
    assert "keep off it until noon" in context["additionalContext"]
    assert "Tasks assigned to agent-b" in context["additionalContext"]
    assert "add the refund route" in context["additionalContext"]
    assert "docs/** (exclusive" in context["additionalContext"]  # ending within 900 s
    assert second.returncode == 0, second.stderr
    assert "keep off it" not in second.stdout  # marked read once shown


@SHARED
async def test_the_inbox_command_marks_read_with_the_agents_token_on_the_audit_trail(
    team: Team,
) -> None:
    text = {"target_address": f"bzzz://{B}", "message_type": "text",
            "content": {"text": "the refund route is merged"}}  # fmt: skip
    await team.as_a("bzzz_post", text)

    first = bzzz(team.env(B), "inbox", B, "--unread", "--mark-read", "--format", "text")
    again = bzzz(team.env(B), "inbox", B, "--unread", "--format", "json")
    refused = bzzz(team.env(A), "inbox", B, "--mark-read", "--format", "json")
    trail = json.loads(bzzz(team.node.env, "audit", "list", "--json").stdout)

    assert first.returncode == 0, first.stderr
    assert "from agent-a" in first.stdout and "the refund route is merged" in first.stdout
    assert json.loads(again.stdout)["messages"] == []
    assert refused.returncode == 1 and "only the owner" in refused.stderr
    marks = [r for r in trail["records"] if r["action"].endswith(f"/agents/{B}/inbox/read")]
    # This module's prompt hooks marked too: every mark is on the trail, this one last.
    assert marks and {(r["action"], r["outcome"]) for r in marks} == {
        (f"http:POST /api/v1/agents/{B}/inbox/read", "ok")
    }, trail


def test_an_unreachable_node_is_one_line_for_the_person_never_a_traceback(team: Team) -> None:
    env = team.env(B, BZZZ_URL=f"http://127.0.0.1:{free_port()}")
    payload = hook_input(team.home, "PreToolUse", tool_name="Edit",
                         tool_input={"file_path": str(team.home / "x.py")})  # fmt: skip

    allowed = answer_of(bzzz(env, "hooks", "run", "pre-tool", "--agent", B,
                             stdin=json.dumps(payload)))  # fmt: skip
    blocked = answer_of(bzzz(env, "hooks", "run", "pre-tool", "--agent", B, "--offline", "block",
                             stdin=json.dumps(payload)))  # fmt: skip

    assert "hookSpecificOutput" not in allowed
    assert "edit allowed unchecked" in allowed["systemMessage"]
    assert blocked["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert "cannot reach the node" in blocked["systemMessage"]


def test_the_settings_merge_keeps_what_was_there_and_replaces_only_ours() -> None:
    theirs = {"matcher": "Bash", "hooks": [{"type": "command", "command": "lint.sh"}]}
    ours_before = {"hooks": [{"type": "command", "command": "/x/bzzz hooks run prompt --agent b"}]}
    existing = {
        "model": "opus",
        "hooks": {"PreToolUse": [theirs], "UserPromptSubmit": [ours_before]},
    }
    ours = {"hooks": {"UserPromptSubmit": [{"hooks": [{"type": "command", "command": "new"}]}]}}

    result = merged(existing, ours)

    assert result["model"] == "opus"
    assert result["hooks"]["PreToolUse"] == [theirs]
    assert result["hooks"]["UserPromptSubmit"] == ours["hooks"]["UserPromptSubmit"]


def test_hooks_claude_code_writes_the_three_hooks_into_the_project_settings(
    team: Team, tmp_path: Path
) -> None:
    settings = tmp_path / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(json.dumps({"permissions": {"allow": ["Bash(ls)"]}}))

    for _ in range(2):  # twice: the second run replaces the first one's hooks
        done = bzzz(team.env(B), "hooks", "claude-code", "--agent", B, "--write",
                    "--project-dir", str(tmp_path))  # fmt: skip
        assert done.returncode == 0, done.stderr

    written = json.loads(settings.read_text())
    assert written["permissions"] == {"allow": ["Bash(ls)"]}
    hooks = written["hooks"]
    assert [len(hooks[e]) for e in ("SessionStart", "UserPromptSubmit", "PreToolUse")] == [1, 1, 1]
    assert hooks["PreToolUse"][0]["matcher"] == "Edit|Write|MultiEdit"
    command = hooks["PreToolUse"][0]["hooks"][0]["command"]
    assert command.split()[0].endswith("bzzz") and "hooks run pre-tool --agent agent-b" in command
    assert team.tokens[B] not in settings.read_text()


# --- the git guard ---------------------------------------------------------------------------


def git(repo: Path, env: dict[str, str], *args: str) -> Any:
    return subprocess.run(
        ["git", "-C", str(repo), *args], env=env, capture_output=True, text=True,
        timeout=300, check=False,
    )  # fmt: skip


def new_repo(path: Path, env: dict[str, str]) -> Path:
    """A repository with one commit and a pre-commit hook of its own (it logs each run)."""
    path.mkdir()
    for args in (
        ("init", "-q", "-b", "main"),
        ("config", "user.email", "dev@example.org"),
        ("config", "user.name", "dev"),
    ):
        assert git(path, env, *args).returncode == 0
    (path / "src").mkdir()
    (path / "src" / "app.py").write_text("print('hello')\n")
    (path / "README.md").write_text("# shop\n")
    assert git(path, env, "add", ".").returncode == 0
    assert git(path, env, "commit", "-q", "-m", "first").returncode == 0
    own = path / ".git" / "hooks" / "pre-commit"
    own.write_text('#!/bin/sh\necho ran >> "$(git rev-parse --git-common-dir)/own-hook.log"\n')
    own.chmod(0o755)
    return path


def guard_install(team: Team, repo: Path, agent: str, *options: str, **env: str) -> None:
    done = subprocess.run(
        [bzzz_executable(real=True), "guard", "install", "--repo", str(repo), "--agent", agent,
         *options],
        env=team.env(agent, **env), capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr


def commit(repo: Path, env: dict[str, str], path: str, text: str) -> Any:
    (repo / path).write_text(text)
    assert git(repo, env, "add", path).returncode == 0
    return git(repo, env, "commit", "-q", "-m", f"change {path}")


def guard_lines(done: Any) -> list[str]:
    return [line for line in done.stderr.splitlines() if line.startswith("bzzz guard")]


@SHARED
async def test_the_guard_holds_a_commit_to_the_reservations_of_other_agents(
    team: Team, tmp_path: Path
) -> None:
    b_env = {k: v for k, v in team.env(B).items() if k != "BZZZ_TOKEN"}  # its file is used
    repo = new_repo(tmp_path / "repo", b_env)
    guard_install(team, repo, B)
    a_tree = tmp_path / "a-tree"
    assert git(repo, b_env, "worktree", "add", "-q", str(a_tree)).returncode == 0
    guard_install(team, a_tree, A)
    held = await team.as_a("bzzz_reserve", {"agent_id": A, "paths": ["src/app.py"]})

    refused = commit(repo, b_env, "src/app.py", "print('b was here')\n")
    by_holder = commit(a_tree, b_env, "src/app.py", "print('a was here')\n")
    await team.as_a("bzzz_reserve", {"agent_id": A, "action": "release"})
    after = git(repo, b_env, "commit", "-q", "-m", "change src/app.py")

    assert refused.returncode == 1, refused.stderr
    assert A in refused.stderr and held["reservation"]["expires_at"][:16] in refused.stderr
    assert by_holder.returncode == 0, by_holder.stderr
    assert after.returncode == 0, after.stderr
    ran = (repo / ".git" / "own-hook.log").read_text().split()
    assert ran == ["ran"] * 3  # the repository's own hook still runs, first


def test_with_the_node_away_the_guard_warns_or_blocks_in_one_line(
    team: Team, tmp_path: Path
) -> None:
    away = f"http://127.0.0.1:{free_port()}"
    env = {k: v for k, v in team.env(B).items() if k not in ("BZZZ_TOKEN", "BZZZ_URL")}
    repo = new_repo(tmp_path / "repo", env)
    own = (repo / ".git" / "hooks" / "pre-commit").read_bytes()
    guard_install(team, repo, B, "--url", away)

    warned = commit(repo, env, "README.md", "# shop, warned\n")
    git(repo, env, "config", "bzzz.offline", "block")
    blocked = commit(repo, env, "README.md", "# shop, blocked\n")
    uninstalled = bzzz(env, "guard", "uninstall", "--repo", str(repo))

    assert warned.returncode == 0, warned.stderr
    [line] = guard_lines(warned)
    assert "allowed unchecked (bzzz.offline=warn)" in line and "Traceback" not in warned.stderr
    assert blocked.returncode == 1
    [line] = guard_lines(blocked)
    assert "refused (bzzz.offline=block)" in line and "Traceback" not in blocked.stderr
    assert uninstalled.returncode == 0, uninstalled.stderr
    hooks = repo / ".git" / "hooks"
    assert (hooks / "pre-commit").read_bytes() == own
    assert not (hooks / "pre-push").exists() and not (repo / ".git" / "bzzz").exists()


def test_a_node_that_says_no_stops_the_commit_and_the_edit_whatever_the_offline_setting(
    team: Team, tmp_path: Path
) -> None:
    """A's token checking as B is refused by the node (there, answering): the guard refuses the
    commit and the hook the edit, with bzzz.offline / --offline at warn, the default."""
    wrong = team.env(B, BZZZ_TOKEN=team.tokens[A])
    repo = new_repo(tmp_path / "repo", wrong)
    guard_install(team, repo, B)
    edit = hook_input(
        repo, "PreToolUse", tool_name="Write", tool_use_id="toolu_02",
        tool_input={"file_path": str(repo / "README.md"), "content": "x"},
    )  # fmt: skip

    committed = commit(repo, wrong, "README.md", "# shop, with the wrong token\n")
    edited = bzzz(wrong, "hooks", "run", "pre-tool", "--agent", B, stdin=json.dumps(edit))

    assert committed.returncode == 1, committed.stderr
    [line] = guard_lines(committed)
    assert "would not check" in line and "refused" in line and "Traceback" not in committed.stderr
    decision = answer_of(edited)["hookSpecificOutput"]
    assert decision["permissionDecision"] == "deny", edited.stdout


@SHARED
async def test_the_pre_tool_hook_refuses_an_edit_of_a_held_path_naming_the_holder(
    team: Team, tmp_path: Path
) -> None:
    repo = new_repo(tmp_path / "repo", team.env(B))
    held = await team.as_a("bzzz_reserve", {"agent_id": A, "paths": ["src/pay.py"]})
    edit = hook_input(
        repo, "PreToolUse", tool_name="Edit", tool_use_id="toolu_01",
        tool_input={"file_path": str(repo / "src" / "pay.py"), "old_string": "a",
                    "new_string": "b", "replace_all": False},
    )  # fmt: skip
    other = edit | {"tool_input": {"file_path": str(repo / "src" / "app.py"), "content": "x"}}
    try:
        refused = answer_of(hook(team, "pre-tool", edit))
        allowed = hook(team, "pre-tool", other | {"tool_name": "Write"})
        by_holder = hook(team, "pre-tool", edit, agent=A)
    finally:
        await team.as_a("bzzz_reserve", {"agent_id": A, "action": "release"})

    decision = refused["hookSpecificOutput"]
    assert decision["hookEventName"] == "PreToolUse"
    assert decision["permissionDecision"] == "deny"
    reason = decision["permissionDecisionReason"]
    assert "agent agent-a" in reason and held["reservation"]["expires_at"] in reason
    assert "bzzz_post to bzzz://agent-a" in reason
    for done in (allowed, by_holder):  # nothing said: Claude Code's normal flow goes on
        assert (done.returncode, done.stdout) == (0, ""), done.stderr
