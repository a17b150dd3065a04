"""Which threads a hosted agent may see while it works on one task: only its project's.

A thread carries no project of its own; its project is what its work says — the projects of the
tasks assigned in it, of the memories agents kept of it, of the task a review thread is about.
A thread whose project is not known counts as work outside any project: a task of a named
project never sees it, a task outside any project does. A thread mixing projects is refused
to every task: nothing learned in one project may enter a prompt for another.
"""

from __future__ import annotations

from typing import Any

from bzzz import domain
from bzzz.errors import InvalidParameters
from bzzz.store.database import Database
from bzzz.store.llm_repository import LLMRepository
from bzzz.store.repository import Repository


def declared_projects(thread: domain.Thread) -> set[str]:
    """The projects a thread's own metadata and shared context name."""
    details = thread.shared_context.get("task_details")
    task_data = details.get("data") if isinstance(details, dict) else None
    return {
        holder["project"]
        for holder in (thread.metadata, thread.shared_context, task_data)
        if isinstance(holder, dict) and isinstance(holder.get("project"), str)
    }


class ThreadScope:
    """One task's view of threads: its project's threads are visible, no other."""

    def __init__(self, db: Database, project: str, task_thread: str | None) -> None:
        self._db = db
        self.project = project
        # The task's own thread and the threads it creates are this project's work.
        self.own: set[str] = {task_thread} if task_thread else set()

    async def projects(self, thread_id: str) -> set[str]:
        """The projects a thread's work was for (empty: not known)."""
        async with self._db.session() as session:
            thread = await Repository(session).thread(thread_id)
            found = await LLMRepository(session).thread_projects(thread_id)
        if thread is not None:
            found |= declared_projects(thread)
        if thread_id in self.own:
            found.add(self.project)
        return found

    async def allows(self, thread_id: str) -> bool:
        """Whether the thread is this task's project's work and nothing else's."""
        return (await self.projects(thread_id) or {""}) == {self.project}

    async def check(self, thread_id: str) -> None:
        """Refuse a thread of another (or an unknown) project, whether or not it exists."""
        if await self.allows(thread_id):
            return
        where = f"project '{self.project}'" if self.project else "work outside any project"
        raise InvalidParameters(
            f"thread '{thread_id}' is not part of {where}: a hosted agent sees only the "
            "threads of its task's project",
            details={"thread_id": thread_id, "project": self.project},
        )

    async def keep(self, items: list[dict[str, Any]], key: str) -> list[dict[str, Any]]:
        """The items (threads, messages) whose thread ``key`` is visible, or that have none."""
        thread_ids = {str(item[key]) for item in items if item.get(key)}
        visible = {t for t in thread_ids if await self.allows(t)}
        return [item for item in items if not item.get(key) or str(item[key]) in visible]
