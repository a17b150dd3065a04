"""The design's WHOOSH endpoints (§4.2): an agent's status, task assignment, collaboration.

Assignment and collaboration are also served under /api/v1 (``/api/v1/agents/{id}/tasks``,
``/api/v1/agents/{id}/collaborate``), the same handlers, for REST clients that are not WHOOSH.

WHOOSH calls them at the paths its ``AgentEndpoints`` name. Assigning a task or inviting an
agent is sending a message: as one of the caller's agents when it acts as one (a credential's
agents, ``agent_id`` to pick one, the one its ``agent_handle`` names), else as the principal
itself, an orchestrator or a person that holds no agent (the sender and the task's assigner
are then ``token:<id>``, ``jwt:…`` or ``principal:anonymous``).

``collaborate`` has two forms, both built from the services MCP tools use:

* without ``thread_id``: the caller's agent opens a thread with the agent on ``topic``
  (``bzzz_thread create``): the agent is in the thread at once, as the design's
  ``initiateCollaboration`` puts collaborators into a conversation (a principal that opens it
  is not in it: it reads the thread as its creator);
* with ``thread_id``: the caller's agent, which must read the thread, sends the agent an
  invitation (a ``question`` naming the thread); the agent joins it with ``bzzz_thread join``
  (nobody joins a thread on another agent's behalf).
"""

from __future__ import annotations

from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field
from starlette.requests import Request

from bzzz.api import answers as a
from bzzz.api.handlers import API, Operation, body_of, caller_of
from bzzz.conversations.placement import require_of_project
from bzzz.errors import InvalidParameters
from bzzz.llm.types import TASK_TYPES
from bzzz.node.core import Node
from bzzz.schemas import GetInput, Identifier, PostInput, Priority, ThreadInput, validate_input

TaskType = Literal["chat_completion", "code_review", "documentation", "architecture_analysis"]
assert set(get_args(TaskType)) == set(TASK_TYPES)  # one list of task types


class _AgentPath(BaseModel):
    id: Identifier  # the same rules as every agent_id parameter


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")

    agent_id: Identifier | None = Field(None, description="which of your agents sends")
    agent_handle: str | None = Field(
        None, max_length=512, description="the handle bzzz_announce returned (or the header)"
    )


class TaskBody(_Body):
    """POST /agents/{id}/tasks: a task of one of the seed's task types."""

    type: TaskType
    description: str = Field(min_length=1, max_length=4000)
    data: dict[str, Any] = Field(default_factory=dict, description="the task type's task data")
    priority: Priority = "medium"
    thread_id: Identifier | None = Field(None, description="assign it inside this thread")


class CollaborateBody(_Body):
    """POST /agents/{id}/collaborate: open a thread with the agent, or invite it into one."""

    topic: str | None = Field(None, min_length=1, max_length=512)
    thread_id: Identifier | None = None
    message: str | None = Field(None, min_length=1, max_length=4000)


def agent_address(agent_id: str) -> str:
    """The address of one agent, after checking the id is one."""
    return f"bzzz://{validate_input(_AgentPath, {'id': agent_id}).id}"


def operations(node: Node) -> list[Operation]:
    """The three WHOOSH routes, and assignment and collaboration under /api/v1 too."""

    async def agent_status(request: Request) -> dict[str, Any]:
        agent_id = request.path_params["agent_id"]
        got = await node.front.get(
            caller_of(request), GetInput(address=agent_address(agent_id), include_metadata=False)
        )
        content = got["content"]
        info = content["agent_info"]
        return {
            "success": True,
            "agent_id": agent_id,
            "status": info["status"],
            "available": info["available"],
            "agent": info,
            "current_tasks": content.get("current_tasks"),
            "checked_at": got["retrieved_at"],
        }

    async def assign_task(request: Request) -> dict[str, Any]:
        target = agent_address(request.path_params["agent_id"])
        body = await body_of(request, TaskBody)
        content = {"type": body.type, "description": body.description, "data": body.data}
        post = {
            "target_address": target,
            "message_type": "task_assignment",
            "content": content,
            "priority": body.priority,
            "thread_id": body.thread_id,
            "agent_id": body.agent_id,
        }
        params = validate_input(PostInput, {k: v for k, v in post.items() if v is not None})
        caller = caller_of(request, body.agent_handle)
        return await node.front.post(caller, params, as_principal=True)

    async def collaborate(request: Request) -> dict[str, Any]:
        agent_id = request.path_params["agent_id"]
        target = agent_address(agent_id)
        body = await body_of(request, CollaborateBody)
        caller = caller_of(request, body.agent_handle)
        if body.thread_id is None:
            if body.topic is None:
                raise InvalidParameters(
                    "topic is needed to open a thread (or name thread_id to invite into one)",
                    details={"field": "topic"},
                )
            created = await node.conversations.thread(
                caller,
                ThreadInput(
                    action="create",
                    participants=[agent_id],
                    topic=body.topic,
                    agent_id=body.agent_id,
                ),
                as_principal=True,
            )
            return {"success": True, "mode": "thread_created", "thread": created["result"]}
        # Only a reader of the thread invites into it: THREAD_NOT_FOUND / PERMISSION_DENIED.
        got = await node.agents.get(
            caller, GetInput(address=f"bzzz://*/threads/{body.thread_id}", max_history=0)
        )
        thread = got["content"]["thread"]
        topic = thread["topic"]
        project = (thread.get("metadata") or {}).get("project")
        invited = node.agents.visible_agent(caller.principal, agent_id)
        if invited is not None:
            # A thread's invitations stay in its project, as its participants do.
            require_of_project(project, [invited])
        invitation = {
            "text": body.message or f"Please join thread '{topic}' ({body.thread_id})",
            "invitation": {"thread_id": body.thread_id, "topic": topic, "join": "bzzz_thread"},
        }
        post = {"target_address": target, "message_type": "question", "content": invitation}
        if body.agent_id is not None:
            post["agent_id"] = body.agent_id
        sent = await node.conversations.post(
            caller, validate_input(PostInput, post), as_principal=True
        )
        return {"success": True, "mode": "invited", "thread_id": body.thread_id, "post": sent}

    def acting(prefix: str, tag: str, how: str) -> list[Operation]:
        """Assigning a task and collaborating, at WHOOSH's paths or under /api/v1."""
        return [
            Operation(
                "POST",
                f"{prefix}/agents/{{agent_id}}/tasks",
                f"Assign a task to an agent ({how} task_assign; a task_assignment post)",
                assign_task,
                tag,
                answer=a.PostOutput,
                body=TaskBody,
                status=201,
                errors=(400, 403, 404, 429, 503),
                name=f"{tag}_assign_task",
            ),
            Operation(
                "POST",
                f"{prefix}/agents/{{agent_id}}/collaborate",
                f"Open a thread with an agent, or invite it into one ({how} collaborate)",
                collaborate,
                tag,
                answer=a.CollaborateAnswer,
                body=CollaborateBody,
                status=201,
                errors=(400, 403, 404, 429, 503),
                name=f"{tag}_collaborate",
            ),
        ]

    return [
        Operation(
            "GET",
            "/agents/{agent_id}/status",
            "An agent's status (WHOOSH status_check)",
            agent_status,
            "whoosh",
            answer=a.AgentStatusAnswer,
            errors=(400, 403, 404),
        ),
        *acting("", "whoosh", "WHOOSH"),
        # The same two for clients of the REST API that are not WHOOSH.
        *acting(API, "agents", "as WHOOSH's"),
    ]
