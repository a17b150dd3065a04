"""`bzzz reservations check` against a running node: the real executable (its light entry),
exit statuses 0/1/2, --json, the agent's own token, paths of a git work tree."""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from access.support import bzzz_cli, cli_env, create_token
from e2e.support import HttpNode, call, http_session, node_env
from launch import real_bzzz
from ports import free_port

pytestmark = pytest.mark.integration
ADMIN = "admin-secret-for-tests-only"


@pytest.fixture
async def served(
    data_dir: Path, tmp_path: Path, clean_env: dict[str, str]
) -> AsyncIterator[tuple[HttpNode, dict[str, str], dict[str, str]]]:
    """A node that requires tokens, where alice holds src/** and bob holds nothing."""
    node = HttpNode(data_dir, node_env(clean_env, data_dir, BZZZ_AUTH_TOKENS=ADMIN),
                    tmp_path / "logs")  # fmt: skip
    await node.start()
    env = cli_env(clean_env, data_dir)
    tokens = {
        name: create_token(env, name, "--agent", name, "--project", "shop")["token"]
        for name in ("alice", "bob")
    }
    try:
        for name, token in tokens.items():
            headers = {"Authorization": f"Bearer {token}"}
            async with http_session(node.mcp_url, headers=headers) as session:
                await call(session, "bzzz_announce", {"agent_id": name, "role": "dev"})
                if name == "alice":
                    await call(session, "bzzz_reserve", {"paths": ["src/**"], "ttl": 600})
        yield node, env, tokens
    finally:
        await node.kill()


def _check(
    env: dict[str, str], *args: str, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [real_bzzz(), "reservations", "check", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


async def test_the_check_exits_0_allowed_1_refused_2_unreachable_3_the_node_said_no(
    served: tuple[HttpNode, dict[str, str], dict[str, str]], tmp_path: Path
) -> None:
    node, env, tokens = served
    bob = ["--agent", "bob", "--token", tokens["bob"]]
    repo = tmp_path / "repo"
    (repo / "src").mkdir(parents=True)
    (repo / ".git").mkdir()  # what the check looks for: the work tree's root

    refused, allowed, shown, from_repo, alices, bad, closed, wrong, whole = await asyncio.gather(
        asyncio.to_thread(_check, env, "src/a.py", *bob),
        asyncio.to_thread(_check, env, "docs/x.md", *bob),
        asyncio.to_thread(_check, env, "src/a.py", "docs/x.md", *bob, "--json"),
        asyncio.to_thread(_check, env, str(repo / "src" / "b.py"), *bob, cwd=repo / "src"),
        asyncio.to_thread(_check, env, "src/a.py", "--agent", "alice", "--token", tokens["alice"]),
        asyncio.to_thread(_check, env, "../x", *bob),
        asyncio.to_thread(
            _check, env, "src/a.py", *bob, "--url", f"http://127.0.0.1:{free_port()}", "--json"
        ),
        asyncio.to_thread(_check, env, "src/a.py", "--agent", "alice", "--token", tokens["bob"]),
        # The whole CLI's parser runs the same check (`bzzz.cli.main`).
        asyncio.to_thread(bzzz_cli, env, "reservations", "check", "src/a.py", *bob),
    )

    assert refused.returncode == 1, refused.stderr
    assert "REFUSED src/a.py" in refused.stdout and "'alice'" in refused.stdout
    assert allowed.returncode == 0, allowed.stderr
    assert "ok docs/x.md" in allowed.stdout
    assert shown.returncode == 1, shown.stderr
    answer = json.loads(shown.stdout)
    assert answer["allowed"] is False
    assert [(p["path"], p["allowed"]) for p in answer["paths"]] == [
        ("src/a.py", False),
        ("docs/x.md", True),
    ]
    assert answer["paths"][0]["holder"]["agent"] == "alice"
    assert from_repo.returncode == 1 and "REFUSED src/b.py" in from_repo.stdout
    assert alices.returncode == 0, alices.stderr
    assert "fencing token" in alices.stdout
    assert bad.returncode == 3 and "'..'" in bad.stderr  # the node refused the path
    assert closed.returncode == 2 and "no node answered" in closed.stderr
    assert json.loads(closed.stdout)["code"] == "NETWORK_ERROR"
    # The node said no (bob's token checking as alice): 3, which a guard refuses on.
    assert wrong.returncode == 3 and "agent" in wrong.stderr
    assert whole.returncode == 1, whole.stderr
    assert "REFUSED src/a.py" in whole.stdout
    assert node.proc is not None and node.proc.returncode is None
