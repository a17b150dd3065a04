"""The design's collaborative review: one call opens a review thread with the right people.

For each required role it invites up to two of the best available agents (availability,
performance, capability match, load), sets the shared context (task, review criteria, deadline)
and posts the opening message. A role with nobody available fails the whole call, before
anything is created.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from ulid import ULID

from bzzz import domain
from bzzz.clock import Clock
from bzzz.conversations.candidates import best_available
from bzzz.domain import iso
from bzzz.errors import AgentNotFound, InvalidParameters
from bzzz.store.directory import AgentDirectory

PER_ROLE = 2
# Review deadlines by task priority (the design's calculateReviewDeadline).
DEADLINES = {"urgent": 4, "high": 24, "medium": 72, "low": 168}
CRITERIA = {
    "code_review": ["correctness", "security", "performance", "maintainability", "tests"],
    "architecture_review": ["requirements fit", "scalability", "failure modes", "operability"],
    "design_review": ["requirements fit", "simplicity", "risks", "alternatives"],
}
DEFAULT_CRITERIA = ["correctness", "completeness", "risks"]


def review_criteria(task: dict[str, Any], asked: list[str] | None) -> list[str]:
    """The criteria asked for, else those of the task's type, else general ones."""
    if asked:
        return asked
    return list(CRITERIA.get(str(task.get("type")), DEFAULT_CRITERIA))


def task_details(task: domain.Task | None, topic: str | None) -> dict[str, Any]:
    """What is under review: a task of the network, or a titled piece of work."""
    if task is None:
        return {"title": topic, "type": "review", "priority": "medium"}
    return {
        "task_id": task.id,
        "title": topic or task.description[:200] or task.type,
        "type": task.type,
        "description": task.description,
        "priority": task.priority,
        "assignee": task.agent_id,
        "data": task.data,
        "status": task.status,
    }


def choose_reviewers(
    directory: AgentDirectory,
    roles: list[str],
    creator: str,
    expertise: list[str],
    project: str | None,
) -> dict[str, list[str]]:
    """Up to two of the best available agents of ``project`` per role; AgentNotFound names
    empty roles."""
    chosen: dict[str, list[str]] = {}
    taken = {creator}
    missing = []
    for role in dict.fromkeys(roles):
        found = best_available(
            directory,
            role=role,
            expertise=expertise,
            exclude=taken,
            limit=PER_ROLE,
            project=project,
        )
        if not found:
            missing.append(role)
            continue
        chosen[role] = [a.id for a in found]
        taken.update(chosen[role])
    if missing:
        raise AgentNotFound(
            f"no available agent with role {', '.join(repr(r) for r in missing)} for the review",
            details={"roles_without_agents": missing, "roles": roles},
        )
    return chosen


def opening_message(topic: str, context: dict[str, Any], reviewers: dict[str, list[str]]) -> str:
    """The design's collaborative review prompt, in plain words."""
    who = "; ".join(f"{role}: {', '.join(ids)}" for role, ids in reviewers.items())
    criteria = ", ".join(context["review_criteria"])
    return (
        f"Collaborative review: {topic}. Reviewers ({who}), please review against: {criteria}. "
        f"Deadline: {context['deadline']}. Post findings here; reply with a stance (agree / "
        "disagree) to proposals, and post a decision when you converge."
    )


class ReviewDesk:
    """Builds review threads (the thread itself goes through ConversationService)."""

    def __init__(self, directory: AgentDirectory, clock: Clock) -> None:
        self._directory = directory
        self._clock = clock

    def plan(
        self,
        creator: domain.Agent,
        roles: list[str] | None,
        task: domain.Task | None,
        topic: str | None,
        criteria: list[str] | None,
    ) -> dict[str, Any]:
        """The thread.created payload and opening text of a review (raises before any write)."""
        if not roles:
            raise InvalidParameters(
                "action 'review' requires roles (the roles whose agents review)",
                details={"missing": ["roles"], "action": "review"},
            )
        if task is None and not topic:
            raise InvalidParameters(
                "action 'review' requires task_id or topic (what is reviewed)",
                details={"missing": ["task_id", "topic"], "action": "review"},
            )
        details = task_details(task, topic)
        expertise = [str(details["type"])]
        # The review thread is the creator's project's: so are its reviewers.
        reviewers = choose_reviewers(self._directory, roles, creator.id, expertise, creator.project)
        hours = DEADLINES.get(str(details.get("priority")), DEADLINES["medium"])
        context = {
            "task_details": details,
            "review_criteria": review_criteria(details, criteria),
            "deadline": iso(self._clock.now() + timedelta(hours=hours)),
        }
        title = str(details["title"])
        participants = [creator.id] + [a for ids in reviewers.values() for a in ids]
        return {
            "payload": {
                "thread_id": f"thread-review-{ULID()}",
                "topic": f"Collaborative Review: {title}"[:512],
                "creator": creator.id,
                "participants": participants,
                "metadata": {
                    "kind": "review",
                    "project": creator.project,
                    "reviewers": reviewers,
                    "task_id": details.get("task_id"),
                },
                "shared_context": context,
            },
            "opening": opening_message(title, context, reviewers),
        }
