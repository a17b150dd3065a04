"""The projects a node serves (``bzzz.projects``), and how a project is named on the log.

Projects are the network's partition: a node stores, consumes and answers for the projects it
serves and reaches the others through the directory and other nodes. ``*`` serves every
project (the default). Content of an agent that declared no project lives in ``NO_PROJECT``,
which every node serves: such an agent is reachable from any project.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

EVERY = "*"
# The partition of agents (and their content) that declared no project.
NO_PROJECT = "_"


@dataclass(frozen=True, slots=True)
class ProjectSet:
    """A node's served projects: ``every`` (``*``) or the named ones."""

    names: frozenset[str]
    every: bool = False

    @classmethod
    def of(cls, projects: Iterable[str]) -> ProjectSet:
        """From the setting's list; ``*`` anywhere in it means every project."""
        names = frozenset(projects)
        return cls(names - {EVERY}, every=EVERY in names)

    def serves(self, project: str | None) -> bool:
        """True when this node holds ``project`` (None and NO_PROJECT: always)."""
        if self.every or project is None or project == NO_PROJECT:
            return True
        return project in self.names

    def __str__(self) -> str:
        return EVERY if self.every else ",".join(sorted(self.names))


ALL_PROJECTS = ProjectSet(frozenset(), every=True)


def subject_token(project: str | None) -> str:
    """The project as one NATS subject token: ``.`` (legal in a project id) is escaped."""
    if project is None or project == "":
        return NO_PROJECT
    return project.replace("%", "%25").replace(".", "%2E")


class AgentProjects(Protocol):
    """Where an agent lives when this node does not hold it: the network's agent directory."""

    async def project_of(self, agent_id: str) -> str | None:
        """The project of ``agent_id`` (NO_PROJECT for none declared); None if unknown."""
        ...
