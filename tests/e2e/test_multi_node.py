"""Several `bzzz serve` processes on one NATS server form one network."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import subprocess
from pathlib import Path
from typing import Any

import nats
import pytest
from mcp import ClientSession
from nats.js import JetStreamContext

from bzzz.network.envelope import seal
from bzzz.network.identity import NodeIdentity

from .conftest import NodeFactory
from .support import (
    admit,
    bzzz_executable,
    call,
    call_error,
    eventually,
    http_session,
    start_network,
)

pytestmark = pytest.mark.integration


async def _agent(session: ClientSession, agent_id: str) -> dict[str, Any] | None:
    found = await call(session, "bzzz_lookup", {"semantic_address": f"bzzz://{agent_id}"})
    matches = found["matches"]
    return matches[0] if matches else None


async def _thread_messages(session: ClientSession, thread_id: str) -> list[str] | None:
    """The thread's message texts, None while this node does not know the thread yet."""
    address = f"bzzz://arch-a/threads/{thread_id}"
    result = await session.call_tool("bzzz_get", {"address": address})
    if result.is_error:
        return None
    body = result.structured_content or {}
    return [m["content"] for m in body["content"]["thread"]["messages"]]


async def _resource(session: ClientSession, uri: str) -> Any:
    result = await session.read_resource(uri)
    return json.loads(result.contents[0].text)  # type: ignore[union-attr]


def _known(messages: list[str] | None) -> bool:
    return messages is not None


def _peers_cli(env: dict[str, str]) -> str:
    done = subprocess.run(
        [bzzz_executable(), "peers"], env=env, capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


async def test_three_nodes_share_agents_messages_threads_tasks_and_events(
    make_node: NodeFactory,
) -> None:
    a, b, c = make_node("a"), make_node("b"), make_node("c")
    await start_network(a, b, c)
    async with (
        http_session(a.mcp_url) as sa,
        http_session(b.mcp_url) as sb,
        http_session(c.mcp_url) as sc,
    ):
        watched = await call(
            sc,
            "bzzz_subscribe",
            {"event_types": ["agent_announcement", "task_assignment", "network_status"]},
        )
        await call(sa, "bzzz_announce", {"agent_id": "arch-a", "role": "architect"})
        await call(sb, "bzzz_announce", {"agent_id": "rev-b", "role": "reviewer"})
        await call(sc, "bzzz_announce", {"agent_id": "doc-c", "role": "documentation"})

        # An agent announced on A is found on B and C.
        for session in (sb, sc):
            found = await eventually(lambda s=session: _agent(s, "arch-a"), bool)
            assert found is not None and found["role"] == "architect"

        # A direct message from A reaches B's agent.
        await eventually(lambda: _agent(sa, "rev-b"), bool)
        await call(
            sa,
            "bzzz_post",
            {"target_address": "bzzz://rev-b", "message_type": "question",
             "content": {"text": "ready?"}},
        )  # fmt: skip
        inbox = await eventually(
            lambda: call(sb, "bzzz_get", {"address": "bzzz://rev-b/inbox"}),
            lambda got: len(got["content"]["messages"]) == 1,
        )
        assert inbox["content"]["messages"][0]["sender"] == "arch-a"

        # A thread with a participant on each node: each node sees the whole of it.
        await eventually(lambda: _agent(sa, "doc-c"), bool)
        thread = await call(
            sa,
            "bzzz_thread",
            {"action": "create", "participants": ["rev-b", "doc-c"], "topic": "API"},
        )
        thread_id = thread["thread_id"]
        for session, sender, text in ((sa, "arch-a", "one"), (sb, "rev-b", "two"),
                                      (sc, "doc-c", "three")):  # fmt: skip
            await eventually(lambda s=session: _thread_messages(s, thread_id), _known)
            await call(
                session,
                "bzzz_post",
                {"target_address": f"bzzz://{sender}", "message_type": "text",
                 "content": {"text": text}, "thread_id": thread_id},
            )  # fmt: skip
        for session in (sa, sb, sc):
            messages = await eventually(
                lambda s=session: _thread_messages(s, thread_id),
                lambda got: got is not None and len(got) == 3,
            )
            assert messages == ["one", "two", "three"]

        # A task assigned on A and completed on B is completed everywhere.
        assigned = await call(
            sa,
            "bzzz_post",
            {"target_address": "bzzz://rev-b", "message_type": "task_assignment",
             "content": {"type": "code_review", "description": "review the API"}},
        )  # fmt: skip
        task_id = assigned["tasks"]["rev-b"]
        await eventually(
            lambda: call(sb, "bzzz_get", {"address": "bzzz://rev-b/tasks"}),
            lambda got: any(t["id"] == task_id for t in got["content"]["tasks"]),
        )
        await call(
            sb,
            "bzzz_post",
            {"target_address": "bzzz://arch-a", "message_type": "task_complete",
             "content": {"task_id": task_id, "result": "looks good"}},
        )  # fmt: skip
        for session in (sa, sb, sc):
            tasks = await eventually(
                lambda s=session: call(s, "bzzz_get", {"address": "bzzz://rev-b/tasks"}),
                lambda got: [t["status"] for t in got["content"]["tasks"]] == ["completed"],
            )
            assert tasks["content"]["tasks"][0]["id"] == task_id

        # C's subscription heard events that happened on A and B.
        uri = f"bzzz://subscriptions/{watched['subscription_id']}"
        events = await eventually(
            lambda: _resource(sc, uri),
            lambda got: any(e["event_type"] == "task_assignment" for e in got["events"]),
        )
        announced = {
            e["data"]["agent"]["id"]
            for e in events["events"]
            if e["event_type"] == "agent_announcement"
        }
        assert {"arch-a", "rev-b", "doc-c"} <= announced

        # Peers: every node lists the three, over MCP and on the command line.
        ids = {(await x.health())["node_id"] for x in (a, b, c)}
        peers = await eventually(
            lambda: _resource(sc, "bzzz://peers"),
            lambda got: {p["id"] for p in got["peers"] if p["status"] == "online"} == ids,
        )
        assert {p["address"] for p in peers["peers"]} == {x.mcp_url for x in (a, b, c)}
        table = _peers_cli(a.env)
        assert all(node_id in table for node_id in ids)
        assert table.count("online") == 3

        # B dies: the others see it offline, and its agent with it.
        b_id = (await b.health())["node_id"]
        b.send(signal.SIGKILL)
        await b.wait_exit()
        for session in (sa, sc):
            gone = await eventually(
                lambda s=session: _agent(s, "rev-b"),
                lambda got: got is not None and got["status"] == "offline",
            )
            assert gone is not None
        peers = await eventually(
            lambda: _resource(sa, "bzzz://peers"),
            lambda got: {p["id"]: p["status"] for p in got["peers"]}.get(b_id) == "offline",
        )
        statuses = await eventually(
            lambda: _resource(sc, uri),
            lambda got: any(
                e["event_type"] == "network_status" and e["data"]["node_id"] == b_id
                and e["data"]["status"] == "offline" for e in got["events"]
            ),
        )  # fmt: skip
        assert statuses["events"]
        assert (await _agent(sa, "arch-a"))["status"] != "offline"  # type: ignore[index]


async def test_one_agent_id_announced_on_two_nodes_at_once_has_one_winner_everywhere(
    make_node: NodeFactory,
) -> None:
    a, b = make_node("a"), make_node("b")
    await start_network(a, b)
    ids = [f"contested-{n}" for n in range(8)]
    async with http_session(a.mcp_url) as sa, http_session(b.mcp_url) as sb:

        async def announce(session: ClientSession, agent_id: str) -> bool:
            async with asyncio.timeout(15):
                result = await session.call_tool(
                    "bzzz_announce", {"agent_id": agent_id, "role": "worker"}
                )
            return not result.is_error

        outcomes = await asyncio.gather(
            *(announce(s, agent_id) for agent_id in ids for s in (sa, sb))
        )
        node_of = {"a": (await a.health())["node_id"], "b": (await b.health())["node_id"]}
        for n, agent_id in enumerate(ids):
            won_a, won_b = outcomes[2 * n], outcomes[2 * n + 1]
            assert won_a != won_b, f"{agent_id}: exactly one node must win"
            winner = node_of["a" if won_a else "b"]
            for session in (sa, sb):
                got = await eventually(
                    lambda s=session, i=agent_id: call(s, "bzzz_get", {"address": f"bzzz://{i}"}),
                    lambda got: got["content"]["agent_info"]["status"] != "offline",
                )
                assert got["content"]["agent_info"]["node_id"] == winner


@pytest.mark.runs_first
async def test_a_node_killed_while_another_posts_10000_messages_gets_each_once(
    make_node: NodeFactory,
) -> None:
    # The default heartbeat (5 s): with 0.3 s, a sender whose event loop the 16 posters keep
    # busy on a loaded machine missed three beats, its peer took it for lost and its agent
    # offline, and the posts made before the agent was announced again were refused (CI).
    beat = {"BZZZ_HEARTBEAT_INTERVAL": "5"}
    sender, receiver = make_node("sender", **beat), make_node("receiver", **beat)
    await start_network(sender, receiver)
    total = 10_000
    recipients = ["inbox-0", "inbox-1"]
    async with http_session(receiver.mcp_url, terminate_on_close=False) as sr:
        for agent in recipients:
            await call(sr, "bzzz_announce", {"agent_id": agent, "role": "sink"})
    async with http_session(sender.mcp_url) as ss:
        await call(ss, "bzzz_announce", {"agent_id": "source", "role": "source"})
        for agent in recipients:
            await eventually(lambda a=agent: _agent(ss, a), bool)
        next_n = iter(range(total))
        acked: list[str] = []
        # A post that fails is reported after the session has closed: raised inside it, the
        # client's transport tasks break with it and the report shows only their errors.
        failed: list[str] = []

        async def worker() -> None:
            for n in next_n:
                if n == total // 4:
                    receiver.send(signal.SIGKILL)
                try:
                    result = await call(
                        ss,
                        "bzzz_post",
                        {"target_address": f"bzzz://{recipients[n % 2]}", "message_type": "data",
                         "content": {"n": n}},
                    )  # fmt: skip
                except Exception as exc:
                    failed.append(f"post {n}: {exc!r}")
                    return
                acked.append(result["message_id"])

        await asyncio.gather(*(worker() for _ in range(16)))
    assert not failed, f"{len(failed)} posts failed, the first: {failed[:3]}"
    assert len(acked) == total == len(set(acked))
    await receiver.wait_exit()
    await receiver.start()
    await _assert_each_once(receiver.data_dir / "bzzz.db", acked, recipients)


async def _assert_each_once(db_path: Path, acked: list[str], recipients: list[str]) -> None:
    """Read the receiver's own store: every acknowledged message in its inbox exactly once."""
    import sqlite3

    def read() -> list[tuple[str, str]]:
        with contextlib.closing(sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)) as db:
            rows = db.execute("SELECT message_id, agent_id FROM inbox").fetchall()
            return [(str(m), str(a)) for m, a in rows]

    rows = await eventually(
        lambda: asyncio.to_thread(read), lambda got: len(got) >= len(acked), within=60
    )
    assert sorted(m for m, _ in rows) == sorted(acked)
    assert {a for _, a in rows} == set(recipients)


async def test_a_brand_new_node_replays_the_networks_history(make_node: NodeFactory) -> None:
    first = make_node("first")
    await first.start()
    async with http_session(first.mcp_url) as s1:
        for n in range(20):
            await call(s1, "bzzz_announce", {"agent_id": f"old-{n}", "role": "veteran"})
        late = make_node("late")
        await late.start()
        async with http_session(late.mcp_url) as s2:
            found = await call(s2, "bzzz_lookup", {"semantic_address": "bzzz://*:veteran@*"})
            # The node answers /healthz only after catching up, so all twenty are there.
            assert found["count"] == 20


async def test_nodes_of_another_network_share_nothing(make_node: NodeFactory) -> None:
    main, other = make_node("main"), make_node("other", BZZZ_NETWORK_ID="other")
    await asyncio.gather(main.start(), other.start())
    async with http_session(main.mcp_url) as sm, http_session(other.mcp_url) as so:
        await call(sm, "bzzz_announce", {"agent_id": "here", "role": "worker"})
        await call(so, "bzzz_announce", {"agent_id": "there", "role": "worker"})
        mine = await call(sm, "bzzz_lookup", {"semantic_address": "bzzz://*:worker@*"})
        theirs = await call(so, "bzzz_lookup", {"semantic_address": "bzzz://*:worker@*"})
        assert [m["id"] for m in mine["matches"]] == ["here"]
        assert [m["id"] for m in theirs["matches"]] == ["there"]
        peers = await _resource(sm, "bzzz://peers")
        assert [p["id"] for p in peers["peers"]] == [(await main.health())["node_id"]]


async def test_forged_tampered_and_replayed_envelopes_on_the_stream_change_nothing(
    make_node: NodeFactory, nats_url: str
) -> None:
    node = make_node("target")
    await node.start()
    async with http_session(node.mcp_url) as session:
        await call(session, "bzzz_announce", {"agent_id": "honest", "role": "reviewer"})
        nc = await nats.connect(nats_url)
        try:
            js = nc.jetstream(timeout=10)
            real = await _first_envelope(js, "bzzz.main.p._.agent.honest")
            stranger = NodeIdentity.generate()
            forged = seal(stranger, "main", "agent.announced", "bzzz.main.p._.agent.evil",
                          {**real["payload"], "agent_id": "evil"})  # fmt: skip
            forged_as_node = forged.model_copy(update={"origin": real["origin"]})
            tampered = {**real, "payload": {**real["payload"], "role": "admin"}}
            injected = [
                ("bzzz.main.p._.agent.evil", forged_as_node.to_bytes()),
                ("bzzz.main.p._.agent.honest", json.dumps(tampered).encode()),
                ("bzzz.main.p._.agent.honest", json.dumps(real).encode()),
            ]
            for n, (subject, data) in enumerate(injected):
                await js.publish(subject, data, headers={"Nats-Msg-Id": f"attack-{n}"})
        finally:
            await nc.close()
        rejected = await eventually(
            lambda: node.health(),
            lambda got: sum(got["projector"]["rejected"].values()) >= 3,
        )
        counts = rejected["projector"]["rejected"]
        assert counts["origin_mismatch"] == 1
        assert counts["bad_signature"] == 1
        assert counts["replayed"] == 1
        found = await call(session, "bzzz_lookup", {"semantic_address": "bzzz://*"})
        assert [(m["id"], m["role"]) for m in found["matches"]] == [("honest", "reviewer")]


async def _first_envelope(js: JetStreamContext, subject: str) -> dict[str, Any]:
    sub = await js.subscribe(subject, ordered_consumer=True)
    try:
        msg = await sub.next_msg(timeout=10)
        envelope: dict[str, Any] = json.loads(msg.data)
        return envelope
    finally:
        await sub.unsubscribe()


async def test_a_federated_network_is_searched_and_its_agents_reached_by_address(
    make_node: NodeFactory,
) -> None:
    home = make_node("home", BZZZ_FEDERATED_NETWORKS="research")
    lab = make_node("lab", BZZZ_NETWORK_ID="research")
    await asyncio.gather(home.start(), lab.start())
    # Home posts into research's log: research's first node admits it there.
    await admit(lab, home)
    async with http_session(home.mcp_url) as sh, http_session(lab.mcp_url) as sl:
        await call(sh, "bzzz_announce", {"agent_id": "arch-home", "role": "architect"})
        await call(sl, "bzzz_announce", {"agent_id": "rev-lab", "role": "reviewer"})
        found = await eventually(
            lambda: call(sh, "bzzz_lookup", {"semantic_address": "bzzz://*:reviewer@*"}),
            lambda got: got["count"] == 1,
        )
        match = found["matches"][0]
        assert (match["id"], match["network"]) == ("rev-lab", "research")
        assert match["address"] == "bzzz://rev-lab:reviewer@*:*?network=research"
        only_there = await call(
            sh, "bzzz_lookup", {"semantic_address": "bzzz://*?network=research"}
        )
        assert [m["id"] for m in only_there["matches"]] == ["rev-lab"]
        only_home = await call(sh, "bzzz_lookup", {"semantic_address": "bzzz://*?network=main"})
        assert [m["id"] for m in only_home["matches"]] == ["arch-home"]

        posted = await call(
            sh,
            "bzzz_post",
            {"target_address": match["address"], "message_type": "question",
             "content": {"text": "can you review our parser?"}},
        )  # fmt: skip
        assert posted["network"] == "research"
        assert posted["delivery_results"]["recipients"] == ["rev-lab"]
        assert posted["delivery_results"]["stored_in_network_log"] is True
        remote = await call(sh, "bzzz_get", {"address": match["address"]})
        assert remote["content"]["network"] == "research"
        assert remote["content"]["agent_info"]["id"] == "rev-lab"
        inbox_there = await call_error(
            sh, "bzzz_get", {"address": "bzzz://rev-lab/inbox?network=research"}
        )
        assert inbox_there["code"] == "INVALID_PARAMETERS"
        inbox = await eventually(
            lambda: call(sl, "bzzz_get", {"address": "bzzz://rev-lab/inbox"}),
            lambda got: len(got["content"]["messages"]) == 1,
        )
        message = inbox["content"]["messages"][0]
        assert message["sender"] == "arch-home@main"
        assert message["content"] == {"text": "can you review our parser?"}

        # The lab's own network knows nothing of home's agents.
        theirs = await call(sl, "bzzz_lookup", {"semantic_address": "bzzz://*"})
        assert [m["id"] for m in theirs["matches"]] == ["rev-lab"]
        unknown = await call_error(
            sh, "bzzz_lookup", {"semantic_address": "bzzz://*?network=elsewhere"}
        )
        assert unknown["code"] == "INVALID_PARAMETERS"
        assert "not federated" in unknown["error"]
        refused = await call_error(
            sh,
            "bzzz_post",
            {"target_address": match["address"], "message_type": "task_assignment",
             "content": {"type": "code_review"}},
        )  # fmt: skip
        assert refused["code"] == "INVALID_PARAMETERS"
