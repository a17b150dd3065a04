"""What the git guard and the Claude Code hooks cost an agent's turn (issue 35).

Starts `bzzz serve` on a temporary data directory (embedded nats-server, SQLite), makes agent
tokens for agent-a and agent-b (project shop), announces both, has agent-a reserve
``src/held.py``, and times, as a fresh process each (the `bzzz` console script beside this
Python, as a hook runs it):

- ``check``: `bzzz reservations check src/held.py --agent agent-b` (refused, exit 1);
- ``pre_tool_refused`` / ``pre_tool_allowed``: `bzzz hooks run pre-tool` given a PreToolUse
  Edit of the held file / of a free one (Claude Code's hook JSON on stdin);
- ``prompt``: `bzzz hooks run prompt` after agent-a posted 3 messages (shown, marked read);
- ``commit_guarded`` / ``commit_unguarded``: `git commit` of a free file in a repository with
  the guard installed for agent-b, and the same with ``--no-verify``.

Figures: wall-clock milliseconds per run (median, p90) and the CPU milliseconds of the
processes it started (user + system, median). The machine is shared: the CPU figure moves
less with the load than the wall clock.

    .venv/bin/python bench/coding_agent_hooks.py [--runs 7] \
        [--json bench/results/coding_agent_hooks.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from benchutil import code_version, machine, report

BZZZ = str(Path(sysconfig.get_path("scripts")) / "bzzz")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run(argv: list[str], env: dict[str, str], stdin: str = "", cwd: Path | None = None) -> Any:
    return subprocess.run(
        argv, input=stdin, env=env, cwd=cwd, capture_output=True, text=True, timeout=120
    )


def _timed(work: Callable[[], Any], runs: int) -> dict[str, float]:
    walls, cpus = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        work()
        walls.append((time.perf_counter() - start) * 1000)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append((after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000)
    walls.sort()
    return {
        "wall_ms_median": round(statistics.median(walls), 1),
        "wall_ms_p90": round(walls[min(len(walls) - 1, int(len(walls) * 0.9))], 1),
        "cpu_ms_median": round(statistics.median(cpus), 1),
        "runs": runs,
    }


async def _tool(url: str, token: str, tool: str, arguments: dict[str, Any]) -> None:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30)
    async with http, Client(streamable_http_client(url, http_client=http)) as client:
        result = await client.call_tool(tool, arguments)
    assert (result.structured_content or {}).get("success") is True, result


def _serve(base: Path) -> tuple[subprocess.Popen[bytes], str, dict[str, str]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BZZZ_")}
    env["BZZZ_DATA_DIR"] = str(base / "data")
    port = _free_port()
    node = subprocess.Popen(
        [BZZZ, "serve", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=(base / "node.err").open("wb"),
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                return node, url, env
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    node.kill()
    raise SystemExit("bzzz serve did not answer /healthz within 120 s")


def _repo(path: Path, env: dict[str, str]) -> None:
    path.mkdir()
    for args in (["init", "-q", "-b", "main"], ["config", "user.email", "b@example.org"],
                 ["config", "user.name", "b"]):  # fmt: skip
        _run(["git", "-C", str(path), *args], env)
    (path / "src").mkdir()
    (path / "src" / "held.py").write_text("x = 1\n")
    _run(["git", "-C", str(path), "add", "."], env)
    _run(["git", "-C", str(path), "commit", "-q", "-m", "first"], env)


def measure(runs: int) -> dict[str, Any]:
    """Every figure of the module docstring."""
    with tempfile.TemporaryDirectory(prefix="bzzz-hooks-bench-") as tmp:
        base = Path(tmp)
        node, url, env = _serve(base)
        try:
            tokens = {}
            for agent in ("agent-a", "agent-b"):
                made = _run([BZZZ, "token", "create", agent, "--agent", agent, "--project",
                             "shop", "--role", "developer", "--json"], env)  # fmt: skip
                tokens[agent] = json.loads(made.stdout.strip().splitlines()[-1])["token"]
                body = {"agent_id": agent, "role": "developer", "project": "shop"}
                headers = {"Authorization": f"Bearer {tokens[agent]}"}
                httpx.post(f"{url}/api/v1/agents", json=body, headers=headers, timeout=30)
            a = tokens["agent-a"]
            reserve = {"agent_id": "agent-a", "paths": ["src/held.py"], "ttl": 3600}
            asyncio.run(_tool(f"{url}/mcp", a, "bzzz_reserve", reserve))
            repo = base / "repo"
            b_env = env | {"BZZZ_URL": url, "BZZZ_TOKEN": tokens["agent-b"]}
            _repo(repo, b_env)
            _run([BZZZ, "guard", "install", "--repo", str(repo), "--agent", "agent-b"], b_env)
            return _figures(url, a, b_env, repo, runs)
        finally:
            node.terminate()
            node.wait(timeout=60)


def _figures(url: str, a: str, env: dict[str, str], repo: Path, runs: int) -> dict[str, Any]:
    def edit(path: str) -> str:
        event = {"session_id": "s", "cwd": str(repo), "hook_event_name": "PreToolUse"}
        return json.dumps(
            event | {"tool_name": "Edit", "tool_input": {"file_path": str(repo / path)}}
        )

    def hook(event: str, stdin: str) -> Callable[[], Any]:
        return lambda: _run([BZZZ, "hooks", "run", event, "--agent", "agent-b"], env, stdin)

    def posted() -> None:
        for n in range(3):
            message = {"target_address": "bzzz://agent-b", "message_type": "text",
                       "content": {"text": f"note {n}"}}  # fmt: skip
            asyncio.run(_tool(f"{url}/mcp", a, "bzzz_post", message))

    def prompt() -> Any:
        done = hook("prompt", '{"hook_event_name": "UserPromptSubmit", "prompt": "go"}')()
        assert "note 2" in done.stdout, done.stdout + done.stderr
        return done

    counter = iter(range(10_000))

    def commit(*options: str) -> Callable[[], Any]:
        def work() -> None:
            n = next(counter)
            (repo / f"free-{n}.txt").write_text(f"{n}\n")
            _run(["git", "-C", str(repo), "add", f"free-{n}.txt"], env)
            done = _run(["git", "-C", str(repo), "commit", "-q", "-m", f"{n}", *options], env)
            assert done.returncode == 0, done.stderr

        return work

    check = [BZZZ, "reservations", "check", "src/held.py", "--agent", "agent-b"]
    results = {
        "check": _timed(lambda: _run(check, env, cwd=repo), runs),
        "pre_tool_refused": _timed(hook("pre-tool", edit("src/held.py")), runs),
        "pre_tool_allowed": _timed(hook("pre-tool", edit("src/free.py")), runs),
        "commit_guarded": _timed(commit(), runs),
        "commit_unguarded": _timed(commit("--no-verify"), runs),
    }
    prompts = []
    for _ in range(runs):
        posted()
        prompts.append(_timed(prompt, 1))
    results["prompt"] = {
        "wall_ms_median": statistics.median(p["wall_ms_median"] for p in prompts),
        "cpu_ms_median": statistics.median(p["cpu_ms_median"] for p in prompts),
        "runs": runs,
    }
    return results


def main() -> None:
    """Run the bench and print its figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args()
    results = measure(args.runs)
    shown = {"bench": "coding_agent_hooks", "machine": machine(), "code": code_version(),
             "results": results}  # fmt: skip
    report(shown, Path(args.json) if args.json else None)


if __name__ == "__main__":
    sys.exit(main())
