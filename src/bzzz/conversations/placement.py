"""Which project a post belongs to: the partition of the log it is published in.

A post into a thread is its thread's project's (``agents.service.thread_project_in``). Any
other post is its address's project's when the address names one, else its recipients' when
they are all of one project, else its sender's: a post to agents of several projects lives in
the sender's project (nodes serving only the others' projects do not see it).
"""

from __future__ import annotations

from bzzz.address import Address
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
