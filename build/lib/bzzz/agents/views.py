"""How the tools show agents, tasks, messages and threads (the reference's shapes)."""

from __future__ import annotations

from typing import Any

from bzzz import domain
from bzzz.address import agent_address
from bzzz.domain import iso


def agent_info(agent: domain.Agent) -> dict[str, Any]:
    """The agent as the tools show it."""
    return {
        "id": agent.id,
        "role": agent.role,
        "capabilities": agent.capabilities,
        "specialization": agent.specialization,
        "status": agent.status,
        "available": agent.available,
        "performance": agent.performance,
        "max_tasks": agent.max_tasks,
        "active_tasks": agent.active_tasks,
        "project": agent.project,
        "task": agent.task,
        "address": agent_address(agent.id, agent.role, agent.project, agent.task),
        "node_id": agent.node_id,
        "created_at": iso(agent.created_at),
        "last_activity": iso(agent.last_activity),
    }


def task_info(task: domain.Task) -> dict[str, Any]:
    """A task as the tools show it (the reference's AgentTask plus who assigned it)."""
    return {
        "id": task.id,
        "type": task.type,
        "description": task.description,
        "status": task.status,
        "priority": task.priority,
        "assigner": task.assigner,
        "data": task.data,
        "thread_id": task.thread_id,
        "progress": task.progress,
        "result": task.result,
        "error": task.error,
        "startTime": iso(task.start_time),
        "endTime": iso(task.end_time),
    }


def message_info(message: domain.Message) -> dict[str, Any]:
    """A message as the tools show it."""
    return {
        "id": message.id,
        "sender": message.sender,
        "message_type": message.message_type,
        "content": message.content,
        "priority": message.priority,
        "thread_id": message.thread_id,
        "reply_to": message.reply_to,
        "recipients": message.recipients,
        "target_address": message.target_address,
        "timestamp": iso(message.posted_at),
    }


def thread_info(
    thread: domain.Thread,
    messages: list[domain.Message] | None = None,
    reactions: list[domain.Reaction] | None = None,
) -> dict[str, Any]:
    """A thread as the tools show it (the reference's ConversationThread, with the design's
    shared context, decision log and consensus)."""
    info: dict[str, Any] = {
        "id": thread.id,
        "topic": thread.topic,
        "participants": thread.active_participants,
        "former_participants": [p.agent_id for p in thread.participants if not p.active],
        "creator": thread.creator,
        "status": thread.status,
        "created_at": iso(thread.created_at),
        "last_activity": iso(thread.last_activity),
        "message_count": thread.message_count,
        "summary": thread.summary,
        "metadata": thread.metadata,
        "escalation_history": thread.escalation_history,
        "shared_context": thread.shared_context,
        "decision_log": thread.decision_log,
        "consensus": thread.consensus,
    }
    if messages is not None:
        # Grouped once: a message's own stance, and the stances taken on it.
        stance_of: dict[str, domain.Reaction] = {}
        taken_on: dict[str, list[domain.Reaction]] = {}
        for r in reactions or []:
            stance_of.setdefault(r.message_id, r)
            taken_on.setdefault(r.target_id, []).append(r)
        info["messages"] = [
            _thread_message(m, stance_of.get(m.id), taken_on.get(m.id, [])) for m in messages
        ]
    return info


def _thread_message(
    message: domain.Message, own: domain.Reaction | None, on_it: list[domain.Reaction]
) -> dict[str, Any]:
    return {
        "id": message.id,
        "threadId": message.thread_id,
        "sender": message.sender,
        "content": message.content.get("text", message.content) if message.content else "",
        "messageType": message.message_type,
        "timestamp": iso(message.posted_at),
        "replyTo": message.reply_to,
        "stance": own.stance if own else None,
        "reactions": [
            {
                "agent_id": r.agent_id,
                "stance": r.stance,
                "source": r.source,
                "message_id": r.message_id,
                "timestamp": iso(r.at),
            }
            for r in on_it
        ],
        "metadata": {k: v for k, v in message.content.items() if k != "text"},
    }
