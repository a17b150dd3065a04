"""The bzzz_* tools as a model sees them, run through the same services as MCP clients' calls.

A hosted agent gets lookup, get, post and thread. Announce and subscribe stay with the runtime:
the agent already is announced, and a subscription made by a model would outlive its task.
Changing a thread's status (pause, resume, resolve, close) and opening reviews stay with the
agents that lead threads; a model sees and touches only the threads of its task's project.
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
from bzzz.llm.scope import ThreadScope
from bzzz.llm.types import ToolCall
from bzzz.schemas import GetInput, LookupInput, PostInput, ThreadInput, validate_input
from bzzz.store.database import Database

MAX_RESULT_CHARS = 16_000
# The bzzz_thread actions a model may take; the others change a thread for all its members.
THREAD_ACTIONS = ("create", "join", "leave", "list", "summarize")

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
                        "enum": list(THREAD_ACTIONS),
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


def _declared_project(item: dict[str, Any]) -> str | None:
    """The project a task or message names in its data, if it names one."""
    for holder in (
        item.get("data"),
        item.get("content"),
        (item.get("content") or {}).get("task_data"),
    ):
        if isinstance(holder, dict) and isinstance(holder.get("project"), str):
            return str(holder["project"])
    return None


class ToolBox:
    """Runs a model's tool calls as one hosted agent's session, within one task's project."""

    def __init__(
        self,
        agents: AgentService,
        conversations: ConversationService,
        caller: Caller,
        *,
        db: Database,
        agent_id: str,
        project: str,
        agent_project: str | None,
        thread_id: str | None = None,
    ) -> None:
        self._caller = caller
        self._agent_id = agent_id
        self._project = project
        self._agent_project = agent_project or ""
        self._agents = agents
        self._conversations = conversations
        self.scope = ThreadScope(db, project, thread_id)
        self._handlers: dict[str, Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]] = {
            "bzzz_lookup": lambda a: agents.lookup(caller, validate_input(LookupInput, a)),
            "bzzz_get": self._get,
            "bzzz_post": self._post,
            "bzzz_thread": self._thread,
        }
        self.calls = 0

    async def _get(self, arguments: dict[str, Any]) -> dict[str, Any]:
        params = validate_input(GetInput, arguments)
        address = parse_address(params.address)
        path = address.path or ""
        if path.startswith("/threads/"):
            await self.scope.check(path.removeprefix("/threads/").strip("/"))
        answer = await self._agents.get(self._caller, params)
        content = answer.get("content") or {}
        if isinstance(content.get("threads"), list):
            content["threads"] = await self.scope.keep(content["threads"], "id")
        if address.agent is not None:
            # An agent's history is memory, and memory never crosses projects: what this agent
            # (or another one, whose inbox may hold another project's work) did for another
            # project stays out of this task's prompts.
            if address.agent == self._agent_id:
                owner_project = self._agent_project
            else:
                owner_project = str((content.get("agent_info") or {}).get("project") or "")
            await self._keep_this_project(content, owner_project)
        return answer

    async def _keep_this_project(self, content: dict[str, Any], owner_project: str) -> None:
        content.pop("recent_activity", None)
        for key in ("current_tasks", "tasks", "messages"):
            if isinstance(content.get(key), list):
                kept = [item for item in content[key] if self._in_project(item, owner_project)]
                content[key] = await self.scope.keep(kept, "thread_id")

    def _in_project(self, item: dict[str, Any], owner_project: str) -> bool:
        declared = _declared_project(item)
        if item.get("thread_id"):
            # Most thread messages name no project: their thread's project decides (in keep).
            return declared in (None, self._project)
        # Work that names no project belongs to its owner's project.
        return (declared or owner_project) == self._project

    async def _post(self, arguments: dict[str, Any]) -> dict[str, Any]:
        params = validate_input(PostInput, arguments)
        if params.thread_id is not None:
            await self.scope.check(params.thread_id)
        return await self._conversations.post(self._caller, params)

    async def _thread(self, arguments: dict[str, Any]) -> dict[str, Any]:
        params = validate_input(ThreadInput, arguments)
        if params.action not in THREAD_ACTIONS:
            raise InvalidParameters(
                f"a hosted agent cannot '{params.action}' a thread; its actions are "
                f"{', '.join(THREAD_ACTIONS)}",
                details={"field": "action", "allowed": list(THREAD_ACTIONS)},
            )
        if params.thread_id is not None and params.action != "create":
            await self.scope.check(params.thread_id)
        answer = await self._conversations.thread(self._caller, params)
        if params.action == "create" and answer.get("thread_id"):
            self.scope.own.add(str(answer["thread_id"]))
        if params.action == "list":
            answer["result"] = await self.scope.keep(answer["result"], "id")
        return answer

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
