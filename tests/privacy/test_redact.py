"""PII redaction: each kind masked, look-alikes left alone, and what a model and the store see."""

from __future__ import annotations

import asyncio
import copy
import json
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from bzzz.config import load_settings
from bzzz.eventlog import LOCAL_CALLER, Caller
from bzzz.llm.testing import ScriptedModelServer, Step
from bzzz.mcp.server import build_server
from bzzz.node.core import Node
from bzzz.privacy.redact import Redactor, default_redactor, redact, redact_data, redact_messages
from bzzz.privacy.secrets import entropy
from bzzz.schemas import AnnounceInput, GetInput, PostInput

from .conftest import HostedNode, TaskWatcher


@pytest.fixture(scope="module")
def redactor() -> Redactor:
    """One redactor for the module: building one imports Presidio (a second or two)."""
    return default_redactor()


MASKED: list[tuple[str, str]] = [
    ("mail jane.doe@example.com today", "mail <EMAIL> today"),
    ("From: Ops <ops+alerts@mail.example.org>", "From: Ops <<EMAIL>>"),
    ("call (415) 555-0132 now", "call <PHONE> now"),
    ("call +44 20 7946 0958 now", "call <PHONE> now"),
    ("call +49 30 901820 now", "call <PHONE> now"),
    ("call 01 42 68 53 00 now", "call <PHONE> now"),
    ("card 4111 1111 1111 1111 on file", "card <CARD> on file"),
    ("card 5555-5555-5555-4444 on file", "card <CARD> on file"),
    ("card 378282246310005 on file", "card <CARD> on file"),
    ("card 2221 0000 0000 0009 on file", "card <CARD> on file"),
    ("pay DE89 3704 0044 0532 0130 00 now", "pay <IBAN> now"),
    ("pay GB82WEST12345698765432 now", "pay <IBAN> now"),
    ("pay FR1420041010050500013M02606 now", "pay <IBAN> now"),
    ("from 203.0.113.42 at noon", "from <IP_ADDRESS> at noon"),
    ("from 2001:db8:85a3::8a2e:370:7334 at noon", "from <IP_ADDRESS> at noon"),
    ("ssn 219-09-9999 on file", "ssn <US_SSN> on file"),
    ("key sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z", "key <API_KEY>"),
    ("key sk_live_4eC39HqLyjWDarjtT1zdp7dc", "key <API_KEY>"),
    ("key ghp_16C7e42F292c6912E7710c838347Ae178B4a", "key <API_KEY>"),
    ("key github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzAB", "key <API_KEY>"),
    ("key xoxb-17653672481-19874698323-pdFZKVeTuE15EBdZn0UpG0Ro", "key <API_KEY>"),
    ("key AKIAIOSFODNN7EXAMPLE", "key <API_KEY>"),
    ("key AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY", "key <API_KEY>"),
    ("key bzzz_Zx9fK2LmQ8rT5vWb3nYc7dHs1gJp4aEuRi0oOkMl", "key <API_KEY>"),
    (
        "jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9P",
        "jwt <API_KEY>",
    ),
    (
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7bq\nq8Zk=\n"
        "-----END RSA PRIVATE KEY-----",
        "<SECRET>",
    ),
    ("DB_PASSWORD=hunter2-horse", "DB_PASSWORD=<SECRET>"),
    ('{"client_secret": "c8d2e6f0a4"}', '{"client_secret": "<SECRET>"}'),
    ("postgresql://app:Wq8sLx2mPz@db:5432/prod", "postgresql://app:<SECRET>@db:5432/prod"),
    ("token Q7mZ2xK9pL4vR8nT1wB6yH3jC5dF0gS", "token <SECRET>"),
    ("Dr. Ada Lovelace reviewed it", "Dr. <PERSON> reviewed it"),
    ("ask Priya Raman first", "ask <PERSON> first"),
    ("Regards,\nKlaus Müller", "Regards,\n<PERSON>"),
]


@pytest.mark.parametrize(("text", "expected"), MASKED)
def test_each_kind_is_masked_with_its_placeholder(
    redactor: Redactor, text: str, expected: str
) -> None:
    assert redactor.redact(text) == expected


UNTOUCHED = [
    "order ORD-2026-004821 shipped",
    "order #4829-1173-22 shipped",
    "id 3f2b8c1e-9a4d-4e2b-8f1a-0c9d7e6b5a43",
    "message msg-01JF3K9Q7Z8XH2M4N6P0R5T1VW",
    "released v2.14.3 and 1.2.0-rc.1, numpy==2.4.6",
    "due 2026-12-01 at 10:45:00, or 01/12/2026",
    "commit 3f786850e387550fdab836ed7e6dc881de23001b (3f78685)",
    "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "listening on localhost:8080, 1,234,567 bytes, EUR 1499.00",
    "HostedRuntimeWorkerPool in src/bzzz/llm/worker_3.py",
    "The nightly build finished after the cache was warmed.",
    "<EMAIL> <CARD> <API_KEY> <PERSON>",
]


@pytest.mark.parametrize("text", UNTOUCHED)
def test_look_alikes_are_left_as_they_are(redactor: Redactor, text: str) -> None:
    assert redactor.redact(text) == text


def test_a_card_is_masked_only_when_its_luhn_digit_checks(redactor: Redactor) -> None:
    assert redactor.redact("card 4111 1111 1111 1111") == "card <CARD>"
    assert redactor.redact("card 4111 1111 1111 1112") == "card 4111 1111 1111 1112"
    assert redactor.redact("card 2221 0000 0000 0001") == "card 2221 0000 0000 0001"


def test_an_iban_is_masked_only_when_its_check_digits_hold(redactor: Redactor) -> None:
    assert redactor.redact("iban DE89 3704 0044 0532 0130 00") == "iban <IBAN>"
    # 88 instead of 89: the mod-97 check fails.
    assert "<IBAN>" not in redactor.redact("iban DE88 3704 0044 0532 0130 00")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("call 415-555-0132 219-09-9999", "call <PHONE> <US_SSN>"),
        ("call 650-253-0000 203.0.113.42", "call <PHONE> <IP_ADDRESS>"),
        ("tel +4915123451564", "tel <PHONE>"),
        ("export TOKEN_B=Q7mZ2xK9pL4vR8nT1wB6yH3jC5dF0gS", "export TOKEN_B=<SECRET>"),
        ("call +1 650-253-0000 ext. 204", "call <PHONE>"),
    ],
)
def test_values_side_by_side_keep_their_own_kinds(
    redactor: Redactor, text: str, expected: str
) -> None:
    assert redactor.redact(text) == expected


def test_high_entropy_is_measured_per_character() -> None:
    assert entropy("aaaa") == 0
    assert entropy("abcd") == 2
    assert entropy("Q7mZ2xK9pL4vR8nT1wB6yH3jC5dF0gS") > 4


def test_nested_json_content_is_masked_and_keys_and_other_values_stay(
    redactor: Redactor,
) -> None:
    content: dict[str, Any] = {
        "text": "write to jane.doe@example.com",
        "jane.doe@example.com": "keys stay",
        "items": [{"card": "4111 1111 1111 1111", "qty": 2}, ["from 203.0.113.42"], None],
        "ok": True,
        "ratio": 0.5,
    }
    original = copy.deepcopy(content)

    masked = redactor.redact_data(content)

    assert masked == {
        "text": "write to <EMAIL>",
        "jane.doe@example.com": "keys stay",
        "items": [{"card": "<CARD>", "qty": 2}, ["from <IP_ADDRESS>"], None],
        "ok": True,
        "ratio": 0.5,
    }
    assert content == original
    assert redact_data(content) == masked


def test_redacting_twice_is_redacting_once(redactor: Redactor) -> None:
    text = " ".join(text for text, _ in MASKED)
    once = redactor.redact(text)

    assert redactor.redact(once) == once
    assert redact(once) == once
    assert "jane.doe@example.com" not in once and "4111 1111 1111 1111" not in once


def test_chat_messages_are_masked_in_content_parts_and_tool_calls() -> None:
    arguments = json.dumps({"to": "jane.doe@example.com", "note": 'say "hi"'})
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are careful."},
        {"role": "user", "content": "Mail jane.doe@example.com"},
        {"role": "user", "content": [{"type": "text", "text": "card 4111 1111 1111 1111"}]},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "send", "arguments": arguments},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "sent to jane.doe@example.com"},
    ]
    original = copy.deepcopy(messages)

    masked = redact_messages(messages)

    assert messages == original
    assert [m["role"] for m in masked] == [m["role"] for m in messages]
    assert masked[0] == messages[0]
    assert masked[1]["content"] == "Mail <EMAIL>"
    assert masked[2]["content"] == [{"type": "text", "text": "card <CARD>"}]
    call = masked[3]["tool_calls"][0]
    assert (call["id"], call["function"]["name"]) == ("call_1", "send")
    assert json.loads(call["function"]["arguments"]) == {"to": "<EMAIL>", "note": 'say "hi"'}
    assert masked[4] == {"role": "tool", "tool_call_id": "call_1", "content": "sent to <EMAIL>"}


def test_the_privacy_settings_default_to_models_only_and_read_the_environment() -> None:
    defaults = load_settings(environ={})
    assert (defaults.privacy.redact_models, defaults.privacy.redact_stored) == (True, False)

    env = {"BZZZ_PRIVACY__REDACT_STORED": "true", "BZZZ_PRIVACY__REDACT_MODELS": "false"}
    settings = load_settings(environ=env)
    assert (settings.privacy.redact_models, settings.privacy.redact_stored) == (False, True)


# --- what a hosted agent's model is sent ------------------------------------------------------

EMAIL = "jane.doe@example.com"
CARD = "4111 1111 1111 1111"
KEY = "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z"
PLANTED = (EMAIL, CARD, KEY)


async def call(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return result.structured_content


async def run_task(node: Node, model_server: ScriptedModelServer) -> dict[str, Any]:
    """A boss assigns arch-1 a task whose description and data hold PII; the task is done."""
    model_server.push(Step(content="Refund issued."))
    watcher = TaskWatcher(node)
    server, _ = build_server(node)
    async with Client(server, mode="legacy") as boss:
        await call(boss, "bzzz_announce", agent_id="boss", role="lead")
        posted = await call(
            boss,
            "bzzz_post",
            target_address="bzzz://arch-1",
            message_type="task_assignment",
            content={
                "task_type": "chat_completion",
                "description": f"Refund {EMAIL}: card {CARD}, use the key {KEY}",
                "task_data": {"messages": [{"role": "user", "content": f"Write to {EMAIL}"}]},
            },
        )
        task_id = posted["tasks"]["arch-1"]
        async with asyncio.timeout(10):
            assert await watcher.finished(task_id) == "completed"
        got = await call(boss, "bzzz_get", address="bzzz://arch-1/tasks", max_history=50)
    [task] = [t for t in got["content"]["tasks"] if t["id"] == task_id]
    return task


async def test_a_hosted_agents_model_request_never_holds_the_planted_pii(
    hosted_node: HostedNode, model_server: ScriptedModelServer
) -> None:
    async with hosted_node() as node:
        task = await run_task(node, model_server)

    assert model_server.requests, "the model was never asked"
    sent = json.dumps(model_server.requests)
    for value in PLANTED:
        assert value not in sent
    prompts = "\n".join(model_server.prompts())
    assert "<EMAIL>" in prompts and "<CARD>" in prompts and "<API_KEY>" in prompts
    # Only what the model sees is masked: the task as stored keeps its description.
    assert EMAIL in json.dumps(task)


async def test_with_redact_models_off_the_model_sees_the_text_as_written(
    hosted_node: HostedNode, model_server: ScriptedModelServer
) -> None:
    async with hosted_node(redact_models=False) as node:
        await run_task(node, model_server)

    sent = json.dumps(model_server.requests)
    assert EMAIL in sent and KEY in sent


# --- what is stored ---------------------------------------------------------------------------


async def post_and_read(node: Node) -> tuple[dict[str, Any], dict[str, Any]]:
    """arch posts content holding PII to dev; returns (dev's message, arch's post result)."""
    for agent_id, role in (("arch", "architect"), ("dev", "developer")):
        await node.agents.announce(
            Caller(f"session-{agent_id}"), AnnounceInput(agent_id=agent_id, role=role)
        )
    content = {"text": f"card {CARD} for {EMAIL}", "meta": {"key": KEY, "count": 3}}
    result = await node.conversations.post(
        Caller("session-arch"),
        PostInput(target_address="bzzz://dev", message_type="text", content=content),
    )
    got = await node.agents.get(LOCAL_CALLER, GetInput(address="bzzz://dev/inbox"))
    [message] = got["content"]["messages"]
    return message, result


def bytes_under(directory: Path) -> bytes:
    return b"".join(path.read_bytes() for path in sorted(directory.rglob("*")) if path.is_file())


async def test_with_redact_stored_the_content_is_masked_before_it_is_stored(
    node_factory: HostedNode,
) -> None:
    async with node_factory(redact_stored=True) as node:
        message, result = await post_and_read(node)
        data_dir = node.settings.node.data_dir

    assert result["success"] is True
    assert message["content"] == {
        "text": "card <CARD> for <EMAIL>",
        "meta": {"key": "<API_KEY>", "count": 3},
    }
    stored = bytes_under(data_dir)
    assert stored, "the node stored nothing"
    for value in PLANTED:
        assert value.encode() not in stored


async def test_by_default_stored_content_is_kept_as_written(node_factory: HostedNode) -> None:
    async with node_factory() as node:
        message, _ = await post_and_read(node)

    assert message["content"]["text"] == f"card {CARD} for {EMAIL}"
    assert message["content"]["meta"]["key"] == KEY
