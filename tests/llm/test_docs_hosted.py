"""The hosted-agent examples of docs/hosted-agents.md run as written, on a scripted model.

The section's settings file (```toml hosted```: a local Ollama model, no API key) starts a
node, pointed at the scripted server instead of Ollama; each ```json hosted``` block is posted
as it stands, and each of its tasks completes. No Authorization header reaches the server, and
the unpriced local model costs nothing and is named once in the log.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from pathlib import Path

import pytest

from bzzz.config import load_settings
from bzzz.eventlog import Caller
from bzzz.llm.testing import ScriptedModelServer
from bzzz.network.memory import InMemoryBus
from bzzz.node.core import Node
from bzzz.schemas import AnnounceInput, PostInput

from .support import TaskWatcher

PAGE = Path(__file__).resolve().parents[2] / "docs" / "hosted-agents.md"
OLLAMA = "http://127.0.0.1:11434/v1"


def hosted_blocks(kind: str) -> list[str]:
    """The bodies of the page's ```<kind> hosted``` blocks, in order."""
    pattern = rf"^```{kind} hosted\n(.*?)^```"
    return re.findall(pattern, PAGE.read_text(), flags=re.MULTILINE | re.DOTALL)


def test_the_section_has_a_settings_file_and_an_example_of_every_task_type() -> None:
    from bzzz.llm.types import TASK_TYPES

    [settings] = hosted_blocks("toml")
    examples = [json.loads(body) for body in hosted_blocks("json")]
    assert OLLAMA in settings and "api_key" not in settings.replace("no api_key", "")
    assert sorted(e["content"]["task_type"] for e in examples) == sorted(TASK_TYPES)


async def test_the_hosted_agent_examples_run_on_a_local_model_without_a_key(
    tmp_path: Path,
    model_server: ScriptedModelServer,
    memory_bus: InMemoryBus,
    caplog: pytest.LogCaptureFixture,
) -> None:
    [toml] = hosted_blocks("toml")
    config = tmp_path / "bzzz.toml"
    config.write_text(toml.replace(OLLAMA, model_server.base_url))
    settings = load_settings(
        config, environ={}, overrides={"node": {"data_dir": str(tmp_path / "node")}}
    )
    assert settings.openai.api_key is None
    assigner = Caller("readme-assigner")
    with caplog.at_level(logging.WARNING, logger="bzzz.llm.pricing"):
        async with Node(settings, bus=memory_bus) as node:
            assert node.llm.enabled, node.llm.disabled_reason
            watcher = TaskWatcher(node)
            await node.agents.announce(assigner, AnnounceInput(agent_id="pm-1", role="pm"))
            ended = {}
            for body in hosted_blocks("json"):
                posted = await node.conversations.post(
                    assigner, PostInput.model_validate_json(body)
                )
                [task_id] = posted["tasks"].values()
                async with asyncio.timeout(30):
                    ended[json.loads(body)["content"]["task_type"]] = await watcher.finished(
                        task_id
                    )
            usage = await node.llm.usage()

    assert set(ended.values()) == {"completed"}, ended
    assert len(model_server.requests) >= 4
    assert {r["model"] for r in model_server.requests} == {"llama3.1"}
    assert set(model_server.authorizations) == {None}
    assert usage["daily"]["totalCost"] == 0
    named = [r for r in caplog.records if "llama3.1" in r.getMessage()]
    assert len(named) == 1 and "cost the fallback price" in named[0].getMessage()
