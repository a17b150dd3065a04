"""The bzzz_* tools as a model sees them, run through the same services as MCP clients' calls.

A hosted agent gets lookup, get, post and thread. Announce and subscribe stay with the runtime:
the agent already is announced, and a subscription made by a model would outlive its task.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from bzzz.address import parse_address
from bzzz.agents.service import AgentService
from bzzz.conversations.service import ConversationService
from bzzz.errors import BzzzError, InvalidParameters
from bzzz.eventlog import Caller
from bzzz.llm.types import ToolCall
from bzzz.schemas import GetInput, LookupInput, PostInput, ThreadInput, validate_input

MAX_RESULT_CHARS = 16_000

_STRING = {"type": "string"}
TOOL_SPECS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "bzzz_lookup",
            "description": "Find agents by semantic address bzzz://agent:role@project:task "
            "('*' = any), best first.",
            "parameters": {
                "type": "object",
                "properties": {
                    "semantic_address": _STRING,
                    "filter_criteria": {
                        "type": "object",
                        "properties": {
                            "expertise": {"type": "array", "items": _STRING},
                            "availability": {"type": "boolean"},
                            "performance_threshold": {"type": "number"},
                        },
                    },
                },
                "required": ["semantic_address"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "bzzz_get",
            "description": "Read an address: bzzz://agent-id[/inbox|/tasks|/threads/<id>].",
            "parameters": {
                "type": "object",
                "properties": {"address": _STRING, "max_history": {"type": "integer"}},
                "required": ["address"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "bzzz_post",
            "description": 'Post a message (content is a JSON object, e.g. {"text": ...}) to '
            "an agent address or into a thread.",
            "parameters": {
                "type": "object",
                "properties": {
                    "target_address": _STRING,
                    "message_type": _STRING,
                    "content": {"type": "object"},
                    "priority": {"type": "string", "enum": ["low", "medium", "high", "urgent"]},
                    "thread_id": _STRING,
                },
                "required": ["target_address", "message_type", "content"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "bzzz_thread",
            "description": "Threads: create (participants, topic), join, leave, list, "
            "summarize (thread_id).",
            "parameters": {
                "type": "object",
                "properties": {
                    "action": {
                        "type": "string",
                        "enum": ["create", "join", "leave", "list", "summarize"],
                    },
                    "thread_id": _STRING,
                    "participants": {"type": "array", "items": _STRING},
                    "topic": _STRING,
                },
                "required": ["action"],
            },
        },
    },
]
TOOL_NAMES = frozenset(spec["function"]["name"] for spec in TOOL_SPECS)


def parse_arguments(call: ToolCall) -> dict[str, Any]:
    """A tool call's arguments; a model that sent no JSON object is told so."""
    try:
        value = json.loads(call.arguments or "{}")
    except json.JSONDecodeError:
        value = None
    if not isinstance(value, dict):
        raise InvalidParameters(f"the arguments of {call.name[:64]} must be a JSON object")
    return value


def _project_of(item: dict[str, Any], default: str) -> str:
    """The project a task or message belongs to, as far as its data says."""
    for holder in (
        item.get("data"),
        item.get("content"),
        (item.get("content") or {}).get("task_data"),
    ):
        if isinstance(holder, dict) and isinstance(holder.get("project"), str):
            return str(holder["project"])
    return default


class ToolBox:
    """Runs a model's tool calls as one hosted agent's session, within one task's project."""

    def __init__(
        self,
        agents: AgentService,
        conversations: ConversationService,
        caller: Caller,
        *,
        agent_id: str,
        project: str,
        agent_project: str | None,
    ) -> None:
        self._caller = caller
        self._agent_id = agent_id
        self._project = project
        self._agent_project = agent_project or ""
        self._agents = agents
        self._handlers: dict[str, Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]] = {
            "bzzz_lookup": lambda a: agents.lookup(validate_input(LookupInput, a)),
            "bzzz_get": self._get,
            "bzzz_post": lambda a: conversations.post(caller, validate_input(PostInput, a)),
            "bzzz_thread": lambda a: conversations.thread(caller, validate_input(ThreadInput, a)),
        }
        self.calls = 0

    async def _get(self, arguments: dict[str, Any]) -> dict[str, Any]:
        params = validate_input(GetInput, arguments)
        answer = await self._agents.get(params)
        if parse_address(params.address).agent == self._agent_id:
            # The agent's own history is its memory, and memory never crosses projects: what it
            # did for another project stays out of this task's prompts.
            self._keep_own_project(answer.get("content") or {})
        return answer

    def _keep_own_project(self, content: dict[str, Any]) -> None:
        content.pop("recent_activity", None)
        for key in ("current_tasks", "tasks", "messages"):
            if isinstance(content.get(key), list):
                content[key] = [
                    item
                    for item in content[key]
                    if _project_of(item, self._agent_project) == self._project
                ]

    @property
    def specs(self) -> list[dict[str, Any]]:
        """The tools in the chat completions ``tools`` format."""
        return TOOL_SPECS

    async def run(self, call: ToolCall) -> str:
        """The tool's JSON answer, or the reference's ErrorResponse when it failed."""
        self.calls += 1
        handler = self._handlers.get(call.name)
        try:
            if handler is None:
                raise InvalidParameters(
                    f"unknown tool '{call.name[:64]}'; available: {', '.join(sorted(TOOL_NAMES))}"
                )
            arguments = parse_arguments(call)
            # The agent acts as itself: a model cannot pick another session's agent.
            arguments.pop("agent_id", None)
            answer = await handler(arguments)
        except BzzzError as exc:
            answer = exc.to_response()
        text = json.dumps(answer, separators=(",", ":"), default=str)
        if len(text) > MAX_RESULT_CHARS:
            text = text[:MAX_RESULT_CHARS] + "...(truncated)"
        return text
