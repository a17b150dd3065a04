"""Prompts as the design builds them (ProcessCollaborativeTask, buildSystemPrompt).

System prompt: the role's prompt and the prompt it keeps for this kind of work, then the
collaboration context (the other participants with their roles, the thread's id and topic, this
agent's role in it), then the BZZZ tools the agent may call. Then the facts its project agreed
(bounded, each with its source), what the agent remembers and what its project knows, the
thread's history as ``[sender]: content`` messages oldest first, and last the task or the
message to answer. The cost optimizer compresses past its budget.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from bzzz import domain
from bzzz.conversations.summary import message_text
from bzzz.llm.facts import facts_message
from bzzz.llm.roles import RoleTemplate
from bzzz.llm.tools import TOOL_SPECS
from bzzz.llm.types import ChatMessage
from bzzz.store.directory import AgentDirectory
from bzzz.store.llm_repository import Knowledge, Memory

HISTORY_CHARS = 8_000
# Answers open with one of these words so the runtime knows what to post.
ANSWER_RULES = (
    "Answer as yourself, in plain text, for the thread. When the message is a decision, start "
    "your answer with AGREE or DISAGREE and say why. To propose a decision of your own, start "
    "with DECISION: followed by the decision."
)


def tools_context(specs: Iterable[dict[str, object]] = TOOL_SPECS) -> str:
    """The tools the agent may call, one line each."""
    lines = []
    for spec in specs:
        function = spec.get("function")
        if isinstance(function, dict):
            lines.append(f"- {function.get('name')}: {function.get('description')}")
    return "Available BZZZ tools:\n" + "\n".join(lines)


def collaboration_context(
    thread: domain.Thread, directory: AgentDirectory, agent_id: str, role: str
) -> str:
    """Who else is in the thread, what it is about, and this agent's part in it."""
    others = [p for p in thread.active_participants if p != agent_id]
    listed = ", ".join(f"{p} ({_role(directory, p)})" for p in others) or "nobody yet"
    return (
        f"You are collaborating with {len(others)} other agents in thread '{thread.id}'.\n"
        f"Current participants: {listed}\n"
        f"Thread topic: {thread.topic}\n"
        f"Your role in this collaboration: {role}"
    )


def _role(directory: AgentDirectory, agent_id: str) -> str:
    agent = directory.get(agent_id)
    return agent.role if agent is not None else "unknown"


def system_prompt(template: RoleTemplate, task_type: str | None, collaboration: str | None) -> str:
    """Role prompt, the role's prompt for this work, collaboration context, tools."""
    extra = {
        "code_review": template.prompts.get("review_criteria"),
        "documentation": template.prompts.get("audience_adaptation"),
        "architecture_analysis": template.prompts.get("task_analysis"),
        "thread": template.prompts.get("collaboration")
        or template.prompts.get("feedback_delivery"),
    }.get(task_type or "")
    parts = (template.system_prompt, extra, collaboration, tools_context())
    return "\n\n".join(part for part in parts if part)


def shared_context(thread: domain.Thread) -> ChatMessage | None:
    """What the thread works on (a review's task and criteria), as the thread shares it."""
    context = thread.shared_context
    details = context.get("task_details")
    if not isinstance(details, dict):
        return None
    lines = [f"Under review: {details.get('title') or details.get('type')}"]
    if details.get("description"):
        lines.append(f"Description: {details['description']}")
    data = details.get("data")
    if isinstance(data, dict):
        for key, value in data.items():
            if isinstance(value, str) and key != "project":
                lines.append(f"{key}: {value[:HISTORY_CHARS]}")
    criteria = context.get("review_criteria")
    if isinstance(criteria, list) and criteria:
        lines.append("Review criteria: " + ", ".join(str(c) for c in criteria))
    if context.get("deadline"):
        lines.append(f"Deadline: {context['deadline']}")
    return {"role": "system", "content": "\n".join(lines)}


def history(messages: Iterable[domain.Message]) -> list[ChatMessage]:
    """A thread's messages as the design gives them to the model: ``[sender]: content``."""
    return [
        {"role": "user", "content": f"[{m.sender}]: {message_text(m)[:HISTORY_CHARS]}"}
        for m in messages
        if m.message_type not in domain.TASK_UPDATE_TYPES
    ]


def context_message(
    memories: list[Memory],
    knowledge: list[Knowledge],
    facts: Sequence[dict[str, Any]] = (),
) -> ChatMessage | None:
    """What the project agreed, what the agent remembers of it and what the project knows,
    as one message (the facts first: they are what the team settled)."""
    lines = []
    for memory in memories:
        kind = "thread" if memory.kind == "thread" else "earlier task"
        lines.append(
            f"- [{kind}] {memory.topic} (with {', '.join(memory.participants) or 'nobody'}; "
            f"outcome: {memory.outcome}): {memory.summary}"
        )
    remembered = {m.id for m in memories}
    known = [k for k in knowledge if k.kind != "episode" or k.source not in remembered]
    parts = []
    agreed = facts_message(list(facts))
    if agreed is not None:
        parts.append(str(agreed["content"]))
    if lines:
        parts.append("What you remember from this project:\n" + "\n".join(lines))
    if known:
        parts.append(
            "What this project knows (most relevant first):\n"
            + "\n".join(f"- [{k.kind}] {k.text}" for k in known)
        )
    return {"role": "system", "content": "\n\n".join(parts)} if parts else None


def answer_request(message: domain.Message | None, reason: str) -> ChatMessage:
    """The last message of a thread reply's prompt: what to answer and how."""
    if message is None:
        asked = f"You were asked into this thread ({reason}). Give your view on where it stands."
    else:
        asked = (
            f"Answer this {message.message_type} from {message.sender} ({reason}):\n"
            f"{message_text(message)[:HISTORY_CHARS]}"
        )
    return {"role": "user", "content": f"{asked}\n\n{ANSWER_RULES}"}
