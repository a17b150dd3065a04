"""Where envelopes live on the log: projects are the partition of its subjects.

A project's content is published on ``bzzz.<network>.p.<project token>.<kind>.<key>`` (the
token is ``bzzz.projects.subject_token``; an agent that declared no project is in
``NO_PROJECT``, ``_``). These kinds belong to one project:

- ``agent`` (announced, offline: the agent's project), ``msg`` (a post: its thread's project,
  else its recipients' one project, else its sender's), ``thread`` (created, joined, status,
  summarized, escalated, escalation actions: the thread's project), ``slurp`` (a thread's
  consensus events), ``memory`` (the agent's project), ``knowledge`` (its record's project),
  ``reservation`` (requested, renewed, released: the agent's project), ``fact`` (stated,
  agreed: the fact's project, keyed by its author). Tasks are messages.

Everything else is network-wide and keeps ``bzzz.<network>.<kind>.<key>``: ``node``,
``admission``, ``token``, ``keys``, ``retention``, ``tomb`` (stand-ins), ``cost``, ``audit``
(heads), ``sub`` (subscriptions span projects), and ``sweep`` (``reservation.swept``: each node
sweeps the reservations it holds).

Older logs hold project content on the network-wide layout. A node serving ``*`` consumes
``bzzz.<network>.>`` and reads both layouts; readers by kind (retention, erasure, replay,
federation) match both. A node serving named projects cannot tell such an envelope's project:
it does not consume them (``legacy_filters`` finds them, to warn once).
"""

from __future__ import annotations

from bzzz.projects import NO_PROJECT, ProjectSet, subject_token

PROJECT = "p"  # the token after the network that marks a project's subject
PROJECT_KINDS = frozenset(
    {"agent", "msg", "thread", "slurp", "memory", "knowledge", "reservation", "fact"}
)
NETWORK_KINDS = frozenset(
    {
        "node",
        "admission",
        "token",
        "keys",
        "retention",
        "tomb",
        "cost",
        "audit",
        "sub",
        "sweep",
    }
)


def subject(network: str, kind: str, key: str, project: str | None = None) -> str:
    """The subject of one envelope: a project's (``project`` given) or network-wide (None).

    Content of a project kind given no project is NO_PROJECT's, which every node serves.
    """
    if project is None and kind in PROJECT_KINDS:
        project = NO_PROJECT
    if project is None:
        return f"bzzz.{network}.{kind}.{key}"
    return f"bzzz.{network}.{PROJECT}.{subject_token(project)}.{kind}.{key}"


def kind_filters(network: str, kind: str, key: str | None = None) -> list[str]:
    """The filters of every envelope of ``kind`` (and ``key``): both layouts, every project."""
    tail = f"{kind}.{key if key is not None else '>'}"
    return [f"bzzz.{network}.{tail}", f"bzzz.{network}.{PROJECT}.*.{tail}"]


def consumer_filters(network: str, projects: ProjectSet) -> list[str]:
    """What a node serving ``projects`` consumes: network-wide kinds and its projects."""
    if projects.every:
        return [f"bzzz.{network}.>"]
    wide = [f"bzzz.{network}.{kind}.>" for kind in sorted(NETWORK_KINDS)]
    served = sorted({subject_token(name) for name in projects.names} | {NO_PROJECT})
    return [*wide, *(f"bzzz.{network}.{PROJECT}.{token}.>" for token in served)]


def legacy_filters(network: str) -> list[str]:
    """Project content on the older, network-wide layout (no project in the subject)."""
    return [f"bzzz.{network}.{kind}.>" for kind in sorted(PROJECT_KINDS)]


def project_token(network: str, subject_: str) -> str | None:
    """The project token of a project subject; None for a network-wide one."""
    parts = subject_.split(".", 4)
    if len(parts) == 5 and parts[:3] == ["bzzz", network, PROJECT]:
        return parts[3]
    return None


def on_project(network: str, subject_: str, project: str | None) -> bool:
    """Whether ``subject_`` is a subject of ``project`` (None or "": agents without one).

    An applier checks it where the payload names a project (or a row the payload names
    belongs to one): an envelope on another project's subject, from a node serving that
    project or a partition holding it, changes nothing of this one.
    """
    return project_token(network, subject_) == subject_token(project)


def kind_and_key(subject_: str) -> tuple[str, str] | None:
    """(kind, key) of a subject of either layout; None for one that is neither."""
    parts = subject_.split(".", 3)
    if len(parts) < 4:
        return None
    if parts[2] == PROJECT:
        rest = parts[3].split(".", 2)
        return (rest[1], rest[2]) if len(rest) == 3 else None
    return parts[2], parts[3]


def served_tokens(projects: ProjectSet) -> frozenset[str] | None:
    """The project tokens a node consumes; None for every project."""
    if projects.every:
        return None
    return frozenset({subject_token(name) for name in projects.names} | {NO_PROJECT})


def serves_subject(network: str, subject_: str, tokens: frozenset[str] | None) -> bool:
    """Whether a node consuming ``tokens`` (None: every project) applies this subject."""
    if tokens is None:
        return True
    token = project_token(network, subject_)
    if token is not None:
        return token in tokens
    parsed = kind_and_key(subject_)
    return parsed is not None and parsed[0] in NETWORK_KINDS
