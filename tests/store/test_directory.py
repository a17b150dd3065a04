"""The agent directory ranks as the definition does: score each match, best first, ties by id."""

from __future__ import annotations

import dataclasses
import random
from datetime import UTC, datetime

import pytest

from bzzz import domain
from bzzz.store.directory import AgentDirectory

ROLES = ["architect", "reviewer", "docs"]
CAPS = ["python", "go", "security", "api", "testing"]
NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _agent(rng: random.Random, n: int) -> domain.Agent:
    max_tasks = rng.randint(1, 3)
    return domain.Agent(
        id=f"agent-{n:04d}",
        role=rng.choice(ROLES),
        capabilities=rng.sample(CAPS, rng.randint(0, 3)),
        specialization=rng.choice([None, "distributed_systems", "API design"]),
        max_tasks=max_tasks,
        project=rng.choice([None, "p1", "p2"]),
        task=rng.choice([None, "t1"]),
        status=rng.choice(["idle", "busy", "offline"]),
        active_tasks=rng.randint(0, max_tasks),
        tasks_completed=0,
        tasks_failed=0,
        performance=round(rng.random(), 2),
        node_id="node-a",
        session_id=f"s-{n}",
        created_at=NOW,
        last_activity=NOW,
    )


def _reference(
    agents: list[domain.Agent], query: dict[str, object]
) -> tuple[int, list[tuple[int, str]]]:
    expertise = query["expertise"]
    assert isinstance(expertise, list)
    found = []
    for a in agents:
        if query["role"] is not None and a.role != query["role"]:
            continue
        if query["project"] is not None and a.project not in (None, query["project"]):
            continue
        if query["task"] is not None and a.task not in (None, query["task"]):
            continue
        if query["available_only"] and not a.available:
            continue
        threshold = query["min_performance"]
        if isinstance(threshold, float) and a.performance < threshold:
            continue
        if domain.expertise_fraction(a, expertise) < 1:
            continue
        found.append((domain.score_agent(a, expertise), a.id))
    found.sort(key=lambda pair: (-pair[0], pair[1]))
    limit = query["limit"]
    assert isinstance(limit, int)
    return len(found), found[:limit]


@pytest.mark.parametrize("seed", range(40))
def test_ranking_equals_scoring_every_match_and_sorting(seed: int) -> None:
    rng = random.Random(seed)
    agents = [_agent(rng, n) for n in range(rng.randint(50, 600))]
    directory = AgentDirectory()
    directory.load(agents)
    # Replacing agents (status changes, new capabilities) must keep every index right.
    for n in rng.sample(range(len(agents)), len(agents) // 4):
        agents[n] = _agent(rng, n)
        directory.put(agents[n])
    query: dict[str, object] = {
        "role": rng.choice([None, *ROLES]),
        "project": rng.choice([None, "p1", "p2"]),
        "task": rng.choice([None, "t1"]),
        "available_only": rng.random() < 0.5,
        "min_performance": rng.choice([None, 0.3, 0.8]),
        "expertise": rng.sample(["python", "security", "api", "distributed"], rng.randint(0, 2)),
        "limit": rng.choice([1, 5, 100]),
    }

    total, best = directory.ranked(agent_id=None, **query)  # type: ignore[arg-type]

    assert (total, [(score, agent.id) for score, agent in best]) == _reference(agents, query)


def test_online_count_follows_status_changes() -> None:
    rng = random.Random(7)
    directory = AgentDirectory()
    agents = [_agent(rng, n) for n in range(100)]
    directory.load(agents)
    agents[0] = dataclasses.replace(agents[0], status="offline" if agents[0].online else "idle")
    directory.put(agents[0])

    assert directory.online_count == sum(1 for a in agents if a.online)


@pytest.mark.parametrize("seed", range(10))
def test_a_nodes_and_an_owners_agents_equal_a_scan_of_every_agent(seed: int) -> None:
    rng = random.Random(seed)
    nodes, owners = ["node-a", "node-b", "node-c"], ["token:x", "token:y", None]

    def placed(agent: domain.Agent) -> domain.Agent:
        owner = rng.choice(owners)
        metadata = {"owner": owner} if owner is not None else {}
        return dataclasses.replace(agent, node_id=rng.choice(nodes), metadata=metadata)

    agents = {n: placed(_agent(rng, n)) for n in range(rng.randint(50, 300))}
    directory = AgentDirectory()
    directory.load(agents.values())
    # Agents move between nodes and owners, change status, leave the copy of the directory.
    for n in rng.sample(sorted(agents), len(agents) // 3):
        agents[n] = placed(_agent(rng, n))
        directory.put(agents[n])
    for n in rng.sample(sorted(agents), len(agents) // 10):
        directory.remove(agents.pop(n).id)

    for node in nodes:
        scanned = sorted(a.id for a in agents.values() if a.node_id == node and a.online)
        assert [a.id for a in directory.online_of_node(node)] == scanned
    for owner in owners[:2]:
        held = [a for a in agents.values() if a.owner == owner]
        assert directory.owned_by(owner) == sorted(a.id for a in held)
        assert directory.count_owned(owner) == sum(1 for a in held if a.online)
