"""Which project a post belongs to: the partition of the log it is published in.

A post into a thread is its thread's project's (``agents.service.thread_project_in``). Any
other post is its address's project's when the address names one, else its recipients' when
they are all of one project, else its sender's: a post to agents of several projects lives in
the sender's project (nodes serving only the others' projects do not see it).

A thread's participants are of one project (agents without a project go with any): one of
another project could not read the thread, nor be served by the nodes of its project.
"""

from __future__ import annotations

from collections.abc import Iterable

from bzzz.address import Address
from bzzz.domain import Agent
from bzzz.errors import InvalidParameters
from bzzz.projects import NO_PROJECT
from bzzz.store.directory import AgentDirectory


def message_project(
    directory: AgentDirectory, address: Address | None, sender: str, recipients: list[str]
) -> str:
    """The project of a post outside a thread (NO_PROJECT for none)."""
    if address is not None and address.project is not None:
        return address.project
    found = {
        agent.project or NO_PROJECT
        for agent in (directory.get(r) for r in recipients)
        if agent is not None
    }
    if len(found) == 1:
        return found.pop()
    agent = directory.get(sender)
    return (agent.project if agent is not None else None) or NO_PROJECT


def require_of_project(project: str | None, agents: Iterable[Agent]) -> None:
    """Refuse participants of another project than the thread's: a thread's participants
    are of one project (agents without one, as they match any project, go with any)."""
    joining = list(agents)
    named = {a.project for a in joining if a.project} | ({project} if project else set())
    if len(named) <= 1:
        return
    others = [a.id for a in joining if a.project and a.project != project]
    raise InvalidParameters(
        f"participants of a thread are of one project ({project or 'none'}): "
        f"{', '.join(others)} {'is' if len(others) == 1 else 'are'} of another",
        details={"field": "participants", "project": project, "others": others},
    )
