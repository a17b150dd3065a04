"""A2A shapes of BZZZ things: an agent's card, a task as an A2A task, a message's text.

Wire shapes only (the ``a2a-sdk``'s protobuf types); the A2A routes (``bzzz.api.a2a``) serve
them. Every agent of the network is an A2A agent at ``/a2a/<agent_id>``: its card at
``/a2a/<agent_id>/.well-known/agent-card.json``, its JSON-RPC endpoint at ``/a2a/<agent_id>``.
"""

from __future__ import annotations

from typing import Any

from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentProvider,
    AgentSkill,
    Artifact,
    HTTPAuthSecurityScheme,
    Message,
    OAuth2SecurityScheme,
    Part,
    Role,
    SecurityRequirement,
    SecurityScheme,
    StringList,
    Task,
    TaskState,
    TaskStatus,
)
from google.protobuf.json_format import ParseDict
from google.protobuf.struct_pb2 import Struct, Value

from bzzz import __version__, domain
from bzzz.config.security import AuthSettings

A2A_PREFIX = "/a2a"
CARD_PATH = "/.well-known/agent-card.json"
PROTOCOL_VERSION = "1.0"

# A BZZZ task's status, and what marks it as more: a failed one its assigner canceled.
_STATES = {
    domain.TaskStatus.PENDING.value: TaskState.TASK_STATE_SUBMITTED,
    domain.TaskStatus.IN_PROGRESS.value: TaskState.TASK_STATE_WORKING,
    domain.TaskStatus.COMPLETED.value: TaskState.TASK_STATE_COMPLETED,
    domain.TaskStatus.FAILED.value: TaskState.TASK_STATE_FAILED,
}
FINAL_STATES = frozenset(
    {
        TaskState.TASK_STATE_COMPLETED,
        TaskState.TASK_STATE_FAILED,
        TaskState.TASK_STATE_CANCELED,
        TaskState.TASK_STATE_REJECTED,
    }
)


def agent_url(base: str, agent_id: str) -> str:
    """The JSON-RPC endpoint of one agent."""
    return f"{base.rstrip('/')}{A2A_PREFIX}/{agent_id}"


def agent_card(agent: domain.Agent, base: str, auth: AuthSettings, required: bool) -> AgentCard:
    """The A2A card of one BZZZ agent: skills from its role and capabilities, this node's
    URL, and the schemes this node accepts (bearer tokens; OAuth when an issuer is set)."""
    skills = [
        AgentSkill(
            id=capability,
            name=capability.replace("_", " "),
            description=f"{capability} by a {agent.role}",
            tags=[agent.role, capability],
        )
        for capability in agent.capabilities
    ] or [AgentSkill(id=agent.role, name=agent.role, description=agent.role, tags=[agent.role])]
    what = f"{agent.role} on BZZZ"
    if agent.specialization:
        what += f" ({agent.specialization})"
    if agent.project:
        what += f", project {agent.project}"
    card = AgentCard(
        name=agent.id,
        description=what,
        supported_interfaces=[
            AgentInterface(
                url=agent_url(base, agent.id),
                protocol_binding="JSONRPC",
                protocol_version=PROTOCOL_VERSION,
            ),
            # The same endpoint answers the 0.3 method names (message/send, tasks/get …).
            AgentInterface(
                url=agent_url(base, agent.id), protocol_binding="JSONRPC", protocol_version="0.3"
            ),
        ],
        provider=AgentProvider(organization="BZZZ", url=base),
        version=__version__,
        capabilities=AgentCapabilities(streaming=True, push_notifications=False),
        default_input_modes=["text/plain", "application/json"],
        default_output_modes=["text/plain", "application/json"],
        skills=skills,
    )
    _secure(card, auth, required)
    return card


def _secure(card: AgentCard, auth: AuthSettings, required: bool) -> None:
    """The card's security schemes: what the node's Authenticate middleware takes."""
    if not required and not auth.issuer:
        return
    card.security_schemes["bearer"].CopyFrom(
        SecurityScheme(
            http_auth_security_scheme=HTTPAuthSecurityScheme(
                scheme="Bearer",
                bearer_format="bzzz_ token or JWT",
                description="a network token (`bzzz token create`) or an admin token",
            )
        )
    )
    card.security_requirements.append(SecurityRequirement(schemes={"bearer": StringList()}))
    if auth.issuer:
        metadata = f"{auth.issuer.rstrip('/')}/.well-known/oauth-authorization-server"
        card.security_schemes["oauth"].CopyFrom(
            SecurityScheme(
                oauth2_security_scheme=OAuth2SecurityScheme(
                    description="JWT access tokens of the node's issuer (bzzz:* scopes)",
                    oauth2_metadata_url=metadata,
                )
            )
        )
        card.security_requirements.append(SecurityRequirement(schemes={"oauth": StringList()}))


def _struct(data: dict[str, Any]) -> Struct:
    return ParseDict(data, Struct())


def text_of(message: Message) -> str:
    """The text parts of a message, joined."""
    return "\n".join(part.text for part in message.parts if part.text)


def data_of(message: Message) -> dict[str, Any]:
    """The data parts of a message, merged (the last wins)."""
    from google.protobuf.json_format import MessageToDict

    merged: dict[str, Any] = {}
    for part in message.parts:
        if part.HasField("data"):
            value = MessageToDict(part.data)
            if isinstance(value, dict):
                merged.update(value)
    return merged


def result_parts(result: Any) -> list[Part]:
    """A task's result as A2A parts: its text, and its data when it is structured."""
    if result is None:
        return []
    if isinstance(result, str):
        return [Part(text=result)]
    parts = []
    if isinstance(result, dict):
        text = result.get("text") or result.get("content") or result.get("answer")
        if isinstance(text, str):
            parts.append(Part(text=text))
    value = Value()
    value.CopyFrom(ParseDict(result, Value()))
    parts.append(Part(data=value, media_type="application/json"))
    return parts


def a2a_state(task: domain.Task, input_required: bool) -> int:
    """The A2A state of a BZZZ task (an escalated thread asks for input)."""
    if task.status == domain.TaskStatus.FAILED.value and is_canceled(task):
        return int(TaskState.TASK_STATE_CANCELED)
    if input_required and task.status in domain.ACTIVE_TASK_STATUSES:
        return int(TaskState.TASK_STATE_INPUT_REQUIRED)
    return int(_STATES.get(task.status, TaskState.TASK_STATE_SUBMITTED))


def is_canceled(task: domain.Task) -> bool:
    """Whether a failed task ended because its assigner canceled it."""
    return bool(task.error and task.error.startswith("canceled"))


def a2a_task(task: domain.Task, *, input_required: bool = False) -> Task:
    """A BZZZ task as the A2A task of the same id."""
    found_a2a = task.data.get("a2a")
    a2a: dict[str, Any] = found_a2a if isinstance(found_a2a, dict) else {}
    context_id = str(a2a.get("context_id") or task.thread_id or task.id)
    state = a2a_state(task, input_required)
    status = TaskStatus(state=state)  # type: ignore[arg-type]  # the enum's int value
    status.timestamp.FromDatetime(task.end_time or task.start_time)
    note = _status_note(task, state)
    if note is not None:
        status.message.CopyFrom(
            Message(
                message_id=f"{task.id}-status",
                context_id=context_id,
                task_id=task.id,
                role=Role.ROLE_AGENT,
                parts=[Part(text=note)],
            )
        )
    found = Task(id=task.id, context_id=context_id, status=status)
    found.metadata.CopyFrom(
        _struct({"bzzz_agent_id": task.agent_id, "bzzz_status": task.status, "type": task.type})
    )
    asked = a2a.get("text")
    if isinstance(asked, str):
        found.history.append(
            Message(
                message_id=str(a2a.get("message_id") or task.message_id),
                context_id=context_id,
                task_id=task.id,
                role=Role.ROLE_USER,
                parts=[Part(text=asked)],
            )
        )
    if task.status == domain.TaskStatus.COMPLETED.value:
        found.artifacts.append(
            Artifact(artifact_id="result", name="result", parts=result_parts(task.result))
        )
    return found


def _status_note(task: domain.Task, state: int) -> str | None:
    if state == TaskState.TASK_STATE_INPUT_REQUIRED:
        return f"thread {task.thread_id} escalated: it waits for a person's answer"
    if task.status == domain.TaskStatus.FAILED.value:
        return task.error or "failed"
    if task.progress:
        shown = task.progress.get("text") or task.progress.get("percent")
        return None if shown is None else str(shown)
    return None
