"""Principals: whoever calls, with the grants that decide what it may see and do.

A principal holds projects (``*`` = all), roles it may announce agents as (``*`` = all) and a
scope: ``read`` changes nothing, ``write`` posts, assigns tasks and creates threads, ``admin``
also manages tokens and reads every agent of its projects. An agent token's principal is one
agent (``agent``): it announces that id alone, and every call with it acts as that agent.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from enum import IntEnum

from bzzz.domain import HUMAN_ROLE
from bzzz.errors import PermissionDenied

ALL = "*"
ACTOR_LENGTH = 128  # as long as an agent id: a sender or assigner column holds either


class Scope(IntEnum):
    """How much a principal may do; each scope includes the ones below it."""

    READ = 1
    WRITE = 2
    ADMIN = 3

    @classmethod
    def parse(cls, name: str) -> Scope:
        """``read`` / ``write`` / ``admin``; ValueError otherwise."""
        try:
            return cls[name.strip().upper()]
        except KeyError:
            raise ValueError(f"scope must be read, write or admin, not {name!r}") from None

    @property
    def label(self) -> str:
        """The scope's name as users write it."""
        return self.name.lower()


@dataclass(frozen=True, slots=True)
class Principal:
    """Who calls a service, and what it was granted."""

    id: str
    kind: str  # anonymous | local | node | admin-token | token | jwt
    projects: frozenset[str]
    roles: frozenset[str]
    scope: Scope
    name: str = ""
    # The one agent an agent token is (None: a principal that may announce any agent id).
    agent: str | None = None

    @property
    def all_projects(self) -> bool:
        """Granted every project."""
        return ALL in self.projects

    @property
    def authenticated(self) -> bool:
        """Someone named: a token or JWT holder, the node itself. Not the anonymous caller."""
        return self.kind not in ("anonymous", "local")

    def may_see_project(self, project: str | None) -> bool:
        """Whether the principal sees what belongs to ``project`` (None: no project)."""
        if self.all_projects:
            return True
        return project is not None and project in self.projects

    @property
    def actor(self) -> str:
        """How the principal is named where it acts itself, without an agent (a message's
        sender, a task's assigner): ``token:<id>``, ``jwt:…``, ``principal:anonymous``.

        Always with a ':', which no agent id holds (see :func:`bzzz.domain.names_an_agent`),
        and at most 128 characters (a long JWT subject keeps a digest of the rest).
        """
        name = self.id if ":" in self.id else f"principal:{self.id}"
        if len(name) <= ACTOR_LENGTH:
            return name
        return name[: ACTOR_LENGTH - 33] + "#" + hashlib.sha256(name.encode()).hexdigest()[:32]

    @property
    def is_human(self) -> bool:
        """A person: granted the role ``human`` by name (a ``*`` role grant is not enough)."""
        return HUMAN_ROLE in self.roles

    def may_role(self, role: str) -> bool:
        """Whether the principal may announce agents as ``role``."""
        return ALL in self.roles or role in self.roles

    def is_admin_of(self, project: str | None) -> bool:
        """Admin scope over ``project``."""
        return self.scope >= Scope.ADMIN and self.may_see_project(project)

    def require_agent(self, agent_id: str) -> None:
        """PERMISSION_DENIED when an agent token names another agent than its own."""
        if self.agent is None or agent_id == self.agent:
            return
        raise PermissionDenied(
            f"this token is agent '{self.agent}' and announces that id only, not "
            f"'{agent_id}'; announce '{self.agent}', or use a token made for '{agent_id}' "
            f"(bzzz token create NAME --agent {agent_id[:128]} --project P)",
            details={"missing": f"agent:{agent_id[:128]}", "token_agent": self.agent},
        )

    def require(self, scope: Scope, action: str) -> None:
        """PERMISSION_DENIED unless the principal holds ``scope``."""
        if self.scope < scope:
            raise PermissionDenied(
                f"{action} needs the '{scope.label}' scope; this credential has "
                f"'{self.scope.label}'",
                details={"missing": f"scope:{scope.label}", "principal": self.name or self.id},
            )

    def require_project(self, project: str | None, action: str) -> None:
        """PERMISSION_DENIED unless the principal is granted ``project``."""
        if not self.may_see_project(project):
            shown = project or "(none)"
            raise PermissionDenied(
                f"{action} needs project '{shown}'; this credential is granted "
                f"{', '.join(sorted(self.projects)) or 'no project'}",
                details={"missing": f"project:{shown}", "principal": self.name or self.id},
            )

    def to_json(self) -> dict[str, object]:
        """The principal as `whoami`-style answers show it (no secret in it)."""
        shown: dict[str, object] = {
            "id": self.id,
            "name": self.name,
            "kind": self.kind,
            "projects": sorted(self.projects),
            "roles": sorted(self.roles),
            "scope": self.scope.label,
        }
        if self.agent is not None:
            shown["agent"] = self.agent
        return shown


def principal(
    id_: str,
    kind: str,
    projects: Iterable[str],
    roles: Iterable[str],
    scope: Scope,
    name: str = "",
    agent: str | None = None,
) -> Principal:
    """A principal from plain lists."""
    return Principal(id_, kind, frozenset(projects), frozenset(roles), scope, name or id_, agent)


# Without auth (a loopback node with no credential) every caller is this one principal.
ANONYMOUS = principal("anonymous", "anonymous", [ALL], [ALL], Scope.ADMIN)
# The user of a stdio process: the machine's own user, trusted like the data directory.
LOCAL = principal("local", "local", [ALL], [ALL], Scope.ADMIN)


def node_principal(node_id: str, projects: Iterable[str] = (ALL,)) -> Principal:
    """The node itself (its hosted agents, its own upkeep), limited to ``projects``."""
    return principal(f"node:{node_id}", "node", projects, [ALL], Scope.WRITE, f"node {node_id}")
