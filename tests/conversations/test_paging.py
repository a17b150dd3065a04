"""Paging people on a rota until one answers: steps in order, once each, signed, answered."""

from __future__ import annotations

import asyncio
import time
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import httpx
import pytest
from pydantic import SecretStr

from bzzz.api.app import build_app
from bzzz.audit import reading
from bzzz.clock import ManualClock
from bzzz.config import load_settings
from bzzz.config.conversations import RotaConfig
from bzzz.errors import ConfigError
from bzzz.events.webhooks import verify_signature
from bzzz.mcp.server import build_server
from bzzz.node.core import Node

from .conftest import NOTIFY, NodeFactory, ReceiverFactory, announce, open_thread, rule

STUCK = [{"type": "no_progress", "threshold": True, "timeframe": 600}]
SECRETS = ("alice-secret", "bob-secret")
STEP = '[[escalation.rota.shop.steps]]\nname = "a"\n'


def rota(*urls: str) -> dict[str, RotaConfig]:
    steps = [
        {"name": name, "webhook_url": url, "secret": SecretStr(secret)}
        for name, url, secret in zip(("alice", "bob"), urls, SECRETS, strict=False)
    ]
    return {"shop": RotaConfig.model_validate({"steps": steps})}


async def escalate(node: Node, clock: ManualClock) -> str:
    """A thread of the project 'shop' that the 'stuck' rule escalates to humans."""
    await announce(node, "arch", "architect", project="shop")
    await announce(node, "dev", "developer", project="shop")
    await open_thread(node, "arch", "dev")
    clock.advance(601)
    [escalation_id] = await node.escalations.check_all()
    return escalation_id


async def paging_of(node: Node, escalation_id: str) -> dict[str, Any]:
    [shown] = await node.paging.attach([{"id": escalation_id}])
    paging: dict[str, Any] = shown["paging"]
    return paging


def http_of(node: Node) -> httpx.AsyncClient:
    server, _ = build_server(node)
    transport = httpx.ASGITransport(app=build_app(node, server, "127.0.0.1"))
    return httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:7331")


async def test_a_page_walks_the_rota_once_per_step_until_acknowledged_from_the_console(
    make_node: NodeFactory, clock: ManualClock, http_receiver: ReceiverFactory
) -> None:
    async with http_receiver(lambda _n: 200) as alice, http_receiver(lambda _n: 200) as bob:
        settings = {"rota": rota(alice.url, bob.url), "ack_timeout": 60}
        async with make_node([rule("stuck", STUCK, NOTIFY)], escalation=settings) as node:
            escalation_id = await escalate(node, clock)
            await node.paging.run_due()
            await node.paging.run_due()  # nothing new is due: nobody is paged again
            first = await paging_of(node, escalation_id)
            clock.advance(59)
            await node.paging.run_due()
            assert len(bob.requests) == 0
            clock.advance(2)
            await node.paging.run_due()
            await node.paging.run_due()
            async with http_of(node) as http:
                acked = await http.post(
                    f"/api/v1/escalations/{escalation_id}/ack", json={"via": "console"}
                )
                listed = await http.get("/api/v1/escalations")
                thread_id = listed.json()["escalations"][0]["threadId"]
                history = await http.get(f"/api/v1/threads/{thread_id}/envelopes")
            clock.advance(600)
            await node.paging.run_due()  # acknowledged: the admins are not paged
            last = await paging_of(node, escalation_id)
            await node.audit.flush()
            audited = [r.action for r in await reading.records(node.db)]

    assert [p["name"] for p in first["pages"]] == ["alice"]
    assert [(p["step"], p["name"], p["status"]) for p in last["pages"]] == [
        (0, "alice", "delivered"),
        (1, "bob", "delivered"),
    ]
    assert len(alice.requests) == 1 and len(bob.requests) == 1
    for receiver, secret in ((alice, SECRETS[0]), (bob, SECRETS[1])):
        [request] = receiver.requests
        assert verify_signature(secret, request.headers["x-bzzz-signature"], request.body)
        assert request.json()["escalation"]["id"] == escalation_id
    assert acked.status_code == 200, acked.text
    assert last["ack"]["via"] == "console" and last["ack"]["by"] == "anonymous"
    [shown] = listed.json()["escalations"]
    assert shown["paging"]["ack"]["via"] == "console"
    types = [e["type"] for e in history.json()["envelopes"]]
    assert types.count("escalation.paged") == 2 and types.count("escalation.acked") == 1
    assert audited.count("escalation.paged") == 2 and audited.count("escalation.ack") == 1


async def test_after_the_last_step_the_admins_are_paged_then_paging_stops(
    make_node: NodeFactory, clock: ManualClock, http_receiver: ReceiverFactory
) -> None:
    steps = {"shop": RotaConfig.model_validate({"steps": [{"name": "desk", "console": True}]})}
    async with make_node(
        [rule("stuck", STUCK, NOTIFY)], escalation={"rota": steps, "ack_timeout": 30}
    ) as node:
        escalation_id = await escalate(node, clock)
        await node.paging.run_due()
        clock.advance(31)
        await node.paging.run_due()
        clock.advance(600)
        await node.paging.run_due()
        paging = await paging_of(node, escalation_id)

    assert [(p["name"], p["channel"], p["status"]) for p in paging["pages"]] == [
        ("desk", "console", "delivered"),
        ("admins of shop", "admins", "delivered"),
    ]


async def test_a_signed_link_acknowledges_once_and_a_bad_one_changes_nothing(
    make_node: NodeFactory, clock: ManualClock, http_receiver: ReceiverFactory
) -> None:
    async with http_receiver(lambda _n: 200) as alice:
        settings = {"rota": rota(alice.url), "ack_timeout": 60}
        async with make_node([rule("stuck", STUCK, NOTIFY)], escalation=settings) as node:
            escalation_id = await escalate(node, clock)
            await node.paging.run_due()
            link = alice.requests[0].json()["links"]["ack"]
            parts = urlsplit(link)
            query = dict(parse_qsl(parts.query))
            async with http_of(node) as http:
                forged = dict(query, by="mallory")
                bad = await http.post(parts.path, params=forged)
                expired = await http.post(
                    parts.path, params=dict(query, exp=str(int(time.time()) - 1))
                )
                other = await http.post(parts.path.replace("/ack", "/resolve"), params=query)
                before = await paging_of(node, escalation_id)
                good = await http.post(parts.path, params=query)
                again = await http.post(parts.path, params=query)
            after = await paging_of(node, escalation_id)

    for refused in (bad, expired, other):
        assert refused.status_code == 403, refused.text
        assert refused.json()["code"] == "PERMISSION_DENIED"
    assert before["ack"] is None
    assert good.status_code == 200, good.text
    assert after["ack"]["by"] == "alice" and after["ack"]["via"] == "link"
    assert after["ack"]["step"] == 0
    assert again.status_code == 400 and "acknowledged" in again.json()["error"]


async def test_a_resolve_link_resolves_the_thread_as_the_person_paged(
    make_node: NodeFactory, clock: ManualClock, http_receiver: ReceiverFactory
) -> None:
    async with http_receiver(lambda _n: 200) as alice:
        settings = {"rota": rota(alice.url), "ack_timeout": 60}
        async with make_node([rule("stuck", STUCK, NOTIFY)], escalation=settings) as node:
            await escalate(node, clock)
            await node.paging.run_due()
            link = urlsplit(alice.requests[0].json()["links"]["resolve"])
            async with http_of(node) as http:
                answer = await http.post(
                    link.path, params=dict(parse_qsl(link.query)), json={"reason": "rolled back"}
                )
                [shown] = (await http.get("/api/v1/escalations")).json()["escalations"]

    assert answer.status_code == 200, answer.text
    assert shown["resolved"] is True and shown["resolution"] == "rolled back"
    assert shown["paging"]["ack"]["by"] == "alice"
    assert shown["paging"]["resolved_by"] == "human-alice"


async def test_a_failed_page_is_retried_with_backoff_and_recorded(
    make_node: NodeFactory, clock: ManualClock, http_receiver: ReceiverFactory
) -> None:
    async with http_receiver(lambda n: 503 if n == 0 else 200) as alice:
        settings = {
            "rota": rota(alice.url),
            "ack_timeout": 600,
            "initial_backoff": 10,
            "max_backoff": 10,
        }
        async with make_node([rule("stuck", STUCK, NOTIFY)], escalation=settings) as node:
            escalation_id = await escalate(node, clock)
            await node.paging.run_due()
            failed = (await paging_of(node, escalation_id))["pages"][0]
            clock.advance(11)
            await node.paging.run_due()
            delivered = (await paging_of(node, escalation_id))["pages"][0]

    assert (failed["status"], failed["attempts"], failed["last_error"]) == ("failed", 1, "HTTP 503")
    assert (delivered["status"], delivered["attempts"]) == ("delivered", 2)
    assert len(alice.requests) == 2


async def test_acknowledging_is_for_people_and_for_someone_else_for_the_projects_admins(
    make_node: NodeFactory, clock: ManualClock
) -> None:
    from bzzz.eventlog import Caller
    from bzzz.principal import Scope, principal

    steps = {"shop": RotaConfig.model_validate({"steps": [{"name": "desk", "console": True}]})}
    async with make_node([rule("stuck", STUCK, NOTIFY)], escalation={"rota": steps}) as node:
        escalation_id = await escalate(node, clock)
        person = principal("p1", "token", ["shop"], ["human"], Scope.WRITE, "pat")
        with pytest.raises(Exception) as denied:
            await node.answers.ack(Caller("s", person), escalation_id, as_name="kim")
        outsider = principal("p2", "token", ["other"], ["*"], Scope.ADMIN, "zed")
        with pytest.raises(Exception) as hidden:
            await node.answers.ack(Caller("s", outsider), escalation_id)
        # An agent's write token of the project may not stop the paging of people.
        agent = principal("p3", "token", ["shop"], ["developer"], Scope.WRITE, "bot")
        with pytest.raises(Exception) as not_a_person:
            await node.answers.ack(Caller("s", agent), escalation_id)
        acked = await node.answers.ack(Caller("s", person), escalation_id, via="cli")

    assert getattr(denied.value, "code", None) == "PERMISSION_DENIED"
    assert getattr(not_a_person.value, "code", None) == "PERMISSION_DENIED"
    assert "role 'human'" in str(not_a_person.value)
    assert getattr(hidden.value, "code", None) == "THREAD_NOT_FOUND"
    assert acked["ack"]["by"] == "pat" and acked["ack"]["via"] == "cli"


@pytest.mark.parametrize(
    ("rota_toml", "expected"),
    [
        (STEP + 'webhook_url = "https://x.example/h"\n', "secret is required with webhook_url"),
        (STEP, "needs webhook_url (with secret) or console"),
        ('[escalation.rota.shop]\nsteps = []\n', "escalation.rota.shop.steps"),
        (STEP.replace("shop", '"bad/name"') + "console = true\n", "not a project name"),
        ((STEP + "console = true\n") * 2, "unique in a rota"),
    ],
)  # fmt: skip
def test_a_bad_rota_is_refused_with_a_clear_error(
    tmp_path: Any, rota_toml: str, expected: str
) -> None:
    path = tmp_path / "bzzz.toml"
    path.write_text(rota_toml)
    with pytest.raises(ConfigError) as refused:
        load_settings(config_file=path, environ={})
    assert expected in str(refused.value)


def test_a_rotas_secrets_are_never_shown(tmp_path: Any) -> None:
    path = tmp_path / "bzzz.toml"
    path.write_text(
        '[[escalation.rota.shop.steps]]\nname = "a"\n'
        'webhook_url = "https://u:pw@x.example/h"\nsecret = "s3cr3t-value"\n'
    )
    shown = str(load_settings(config_file=path, environ={}).masked())
    assert "s3cr3t-value" not in shown and ":pw@" not in shown


async def test_a_page_whose_sending_a_stopped_node_left_unfinished_is_never_sent_again(
    make_node: NodeFactory, clock: ManualClock, http_receiver: ReceiverFactory
) -> None:
    async with http_receiver(lambda _n: 200) as alice:
        settings = {"rota": rota(alice.url), "ack_timeout": 60}
        async with make_node([rule("stuck", STUCK, NOTIFY)], escalation=settings) as node:
            escalation_id = await escalate(node, clock)
            await node.paging.run_due()
            thread_id = (await node.escalations.list())[0].thread_id
            # What a node killed during its POST leaves on the log, and a new start of it.
            state = {"escalation_id": escalation_id, "step": 0, "status": "sending", "attempts": 2}
            await node.log.emit("escalation.page_state", "thread", thread_id, state, project="shop")
            restarted = type(node.paging)(
                node.db, node.log, clock, node.settings.escalation, node.paging._links,
                lambda: "http://127.0.0.1:7331",
            )  # fmt: skip
            await restarted.run_due()
            [page] = (await paging_of(node, escalation_id))["pages"]

    assert len(alice.requests) == 1
    assert (page["status"], page["attempts"]) == ("unconfirmed", 2)


async def test_two_nodes_racing_page_each_step_once(
    make_node: NodeFactory,
    clock: ManualClock,
    http_receiver: ReceiverFactory,
    memory_bus: Any,
    tmp_path: Any,
) -> None:
    from admitted import admit

    async with http_receiver(lambda _n: 200) as alice, http_receiver(lambda _n: 200) as bob:
        settings = {"rota": rota(alice.url, bob.url), "ack_timeout": 60}
        async with make_node([rule("stuck", STUCK, NOTIFY)], escalation=settings) as first:
            other = first.settings.model_copy(deep=True)
            other.node.data_dir = tmp_path / "second"
            async with Node(other, bus=memory_bus, clock=clock) as second:
                await admit(first, second)
                escalation_id = await escalate(first, clock)
                # Late enough that the second node takes each step for its own too.
                for _ in range(2):
                    clock.advance(121)
                    await asyncio.gather(first.paging.run_due(), second.paging.run_due())
                    await asyncio.gather(first.paging.run_due(), second.paging.run_due())
                seen = [await paging_of(n, escalation_id) for n in (first, second)]

    assert seen[0] == seen[1]
    assert [(p["step"], p["name"]) for p in seen[0]["pages"]] == [(0, "alice"), (1, "bob")]
    assert len(alice.requests) == 1 and len(bob.requests) == 1


async def test_an_ack_or_a_page_on_another_projects_subject_is_refused(
    make_node: NodeFactory, clock: ManualClock
) -> None:
    """A node serving another project cannot stop a project's paging by naming its
    escalation: what is read from NATS must travel on the escalation's project's subject."""
    from bzzz.store.repository import Repository

    steps = {"shop": RotaConfig.model_validate({"steps": [{"name": "desk", "console": True}]})}
    async with make_node([rule("stuck", STUCK, NOTIFY)], escalation={"rota": steps}) as node:
        escalation_id = await escalate(node, clock)
        async with node.db.session() as session:
            escalation = await Repository(session).escalation(escalation_id)
        assert escalation is not None
        ack = {"escalation_id": escalation_id, "by": "mallory", "via": "api",
               "principal": "token:mallory", "step": None}  # fmt: skip
        page = {"escalation_id": escalation_id, "step": 0, "name": "desk", "channel": "console",
                "status": "delivered"}  # fmt: skip
        acked = await node.log.emit(
            "escalation.acked", "thread", escalation.thread_id, ack, project="other"
        )
        paged = await node.log.emit(
            "escalation.paged", "thread", escalation.thread_id, page, project="other"
        )
        paging = await paging_of(node, escalation_id)

    assert acked.get("ok") is False and paged.get("ok") is False
    assert paging["ack"] is None and paging["pages"] == []
