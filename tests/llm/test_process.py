"""A spawned `bzzz serve --stdio` hosts an agent that works for a client of that process."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from e2e.support import call, eventually, node_env, stdio_session

from bzzz.llm.testing import ScriptedModelServer, Step

from .support import RESULT, Panel

pytestmark = pytest.mark.integration


async def test_a_hosted_agent_in_a_stdio_node_does_a_task_and_books_its_cost(
    data_dir: Path,
    model_server: ScriptedModelServer,
    clean_env: dict[str, str],
    tmp_path: Path,
) -> None:
    model_server.push(Step(content="Subtraction where addition was meant.", usage=(90, 9)))
    roles = [{"role": "reviewer", "agent_id": "rev-1"}]
    env = node_env(
        clean_env,
        data_dir,
        BZZZ_OPENAI_API_KEY="test-key",
        BZZZ_OPENAI_BASE_URL=model_server.base_url,
        BZZZ_AGENTS__DEFAULT_ROLES=json.dumps(roles),
    )
    with (tmp_path / "stderr.log").open("w") as errlog:
        async with stdio_session(env, errlog) as session:
            await call(session, "bzzz_announce", {"agent_id": "boss", "role": "lead"})
            posted = await call(
                session,
                "bzzz_post",
                {
                    "target_address": "bzzz://rev-1",
                    "message_type": "task_assignment",
                    "content": {
                        "task_type": "code_review",
                        "task_data": {"code": "a - b", "language": "python"},
                    },
                },
            )
            task_id = posted["tasks"]["rev-1"]

            async def tasks() -> list[dict[str, Any]]:
                got = await call(session, "bzzz_get", {"address": "bzzz://rev-1/tasks"})
                found: list[dict[str, Any]] = got["content"]["tasks"]
                return found

            [task] = await eventually(
                tasks, lambda ts: any(t["status"] == "completed" for t in ts), within=20
            )
            costs = await session.read_resource("bzzz://costs")

    assert task["id"] == task_id
    assert task["result"]["content"] == "Subtraction where addition was meant."
    usage = json.loads(costs.contents[0].text)  # type: ignore[union-attr]
    assert usage["daily"]["apiCalls"] == 1
    assert usage["daily"]["tokens"]["total"] == 99


async def test_hosted_agents_of_a_stdio_node_collaborate_to_consensus_for_its_client(
    data_dir: Path,
    model_server: ScriptedModelServer,
    clean_env: dict[str, str],
    tmp_path: Path,
) -> None:
    model_server.responder = Panel()
    roles = [
        {"role": "architect", "agent_id": "arch-1"},
        {"role": "reviewer", "agent_id": "rev-1"},
        {"role": "documentation", "agent_id": "docs-1"},
    ]
    env = node_env(
        clean_env,
        data_dir,
        BZZZ_OPENAI_API_KEY="test-key",
        BZZZ_OPENAI_BASE_URL=model_server.base_url,
        BZZZ_AGENTS__DEFAULT_ROLES=json.dumps(roles),
    )
    with (tmp_path / "stderr.log").open("w") as errlog:
        async with stdio_session(env, errlog) as session:
            await call(session, "bzzz_announce", {"agent_id": "boss", "role": "lead"})
            data = {
                "systemDescription": "three nodes share one event log",
                "required_roles": ["reviewer", "documentation"],
            }
            posted = await call(
                session,
                "bzzz_post",
                {
                    "target_address": "bzzz://arch-1",
                    "message_type": "task_assignment",
                    "content": {"task_type": "architecture_analysis", "task_data": data},
                },
            )
            task_id = posted["tasks"]["arch-1"]

            async def tasks() -> list[dict[str, Any]]:
                got = await call(session, "bzzz_get", {"address": "bzzz://arch-1/tasks"})
                found: list[dict[str, Any]] = got["content"]["tasks"]
                return found

            [task] = await eventually(
                tasks, lambda ts: any(t["status"] in ("completed", "failed") for t in ts), within=30
            )
            thread_id = task["result"]["thread_id"]
            thread = await call(
                session, "bzzz_get", {"address": f"bzzz://arch-1/threads/{thread_id}"}
            )

    assert (task["id"], task["status"]) == (task_id, "completed")
    assert task["result"]["content"] == RESULT
    info = thread["content"]["thread"]
    assert (info["status"], info["consensus"]["decisions"]) == ("completed", [RESULT])
    assert {"rev-1", "docs-1"} <= {m["sender"] for m in info["messages"]}
    assert model_server.refused == []
