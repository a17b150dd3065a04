"""Encryption at rest, proved on real parts: the embedded nats-server, SQLite and PostgreSQL.

A canary posted in a message, a thread, a task and a hosted agent's memory is nowhere in the
bytes under the data directory (SQLite and its WAL, the JetStream store), nor in the rows of
PostgreSQL, nor in the stream as a raw NATS client reads it; ``bzzz_get`` still returns it to
the agent allowed to read it. Rotation, a wrong key and the directory's permissions too.
"""

from __future__ import annotations

import asyncio
import json
import stat
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import asyncpg
import nats
import pytest
from mcp import Client
from sqlalchemy import select

from bzzz.config import Settings, load_settings
from bzzz.domain import utcnow
from bzzz.llm.testing import ScriptedModelServer, Step
from bzzz.mcp.server import build_server
from bzzz.network.envelope import SEALED
from bzzz.network.jetstream import stream_name
from bzzz.network.sealing import KeyMissing, box_key_id, encode_secret, is_sealed
from bzzz.node.core import Node
from bzzz.principal import LOCAL
from bzzz.store.models import AuditRecordRow, MessageRow

from .support import bzzz_executable, node_env

pytestmark = pytest.mark.integration

CANARY = "CANARY-5e1f-tangerine-Q7"
OTHER_KEY = encode_secret(b"\x42" * 32)


def node_settings(data_dir: Path, **encryption: Any) -> Settings:
    """A node on its own data directory with the embedded nats-server (nothing overridden)."""
    overrides: dict[str, dict[str, Any]] = {"node": {"data_dir": str(data_dir)}}
    if encryption:
        overrides["encryption"] = encryption
    return load_settings(environ={}, overrides=overrides)


def files_holding(root: Path, needle: bytes) -> list[str]:
    """Every file under ``root`` whose bytes contain ``needle``."""
    found = []
    for path in root.rglob("*"):
        if path.is_file() and needle in path.read_bytes():
            found.append(str(path.relative_to(root)))
    return found


async def raw_stream(node: Node) -> list[bytes]:
    """Every message of the network's stream, as a plain nats-py client reads it."""
    assert node.embedded is not None
    nc = await nats.connect(node.embedded.client_url)
    try:
        js = nc.jetstream()
        stream = stream_name(node.network)
        info = await js.stream_info(stream)
        first, last = int(info.state.first_seq), int(info.state.last_seq)
        return [(await js.get_msg(stream, seq)).data or b"" for seq in range(first, last + 1)]
    finally:
        await nc.close()


async def postgres_rows(url: str) -> dict[str, str]:
    """Every row of every table of the node's PostgreSQL database, as text, by table."""
    conn = await asyncpg.connect(url.replace("postgresql+asyncpg", "postgresql"))
    try:
        tables = await conn.fetch("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
        dumped = {}
        for (table,) in tables:
            rows = await conn.fetch(f'SELECT t::text FROM "{table}" t')
            dumped[str(table)] = "\n".join(str(row[0]) for row in rows)
        return dumped
    finally:
        await conn.close()


async def call(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert result.structured_content is not None, result.content
    assert not result.is_error, result.structured_content
    return dict(result.structured_content)


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest) -> str | None:
    """None: SQLite in the data directory; else a fresh PostgreSQL database."""
    if request.param == "sqlite":
        return None
    url: str = request.getfixturevalue("empty_postgres_url")
    return url


@pytest.fixture
async def model_server() -> AsyncIterator[ScriptedModelServer]:
    server = ScriptedModelServer(strict=True)
    await server.start()
    try:
        yield server
    finally:
        server.gate.set()
        await server.close()


def hosting(settings: Settings, server: ScriptedModelServer) -> Settings:
    from bzzz.config import OpenAISettings

    values = settings.openai.model_dump() | {
        "api_key": "test-key",
        "base_url": server.base_url,
        "backoff_initial": 0.0,
        "backoff_max": 0.0,
    }
    settings.openai = OpenAISettings.model_validate(values)
    settings.agents.default_roles = [{"role": "architect", "agent_id": "arch-1"}]
    return settings


async def post_canaries(node: Node, boss: Client, bob: Client) -> dict[str, str]:
    """The canary in a direct message, a thread message, a task and a hosted agent's work."""
    await call(boss, "bzzz_announce", {"agent_id": "boss", "role": "lead", "project": "shop"})
    await call(bob, "bzzz_announce", {"agent_id": "bob", "role": "reviewer", "project": "shop"})
    await post_direct(boss, "bob", {"text": CANARY})
    opened = await call(
        boss, "bzzz_thread", {"action": "create", "topic": "release", "participants": ["bob"]}
    )
    thread_id = opened["thread_id"]
    await call(
        boss,
        "bzzz_post",
        {"thread_id": thread_id, "message_type": "text", "content": {"text": f"thread {CANARY}"}},
    )
    await call(
        boss,
        "bzzz_post",
        {
            "target_address": "bzzz://bob",
            "message_type": "task_assignment",
            "content": {"task_type": "code_review", "description": f"review {CANARY}"},
        },
    )
    memories = asyncio.Event()
    node.projector.add_applied_listener(
        lambda envs: memories.set() if any(e.type == "memory.recorded" for e in envs) else None
    )
    hosted = await call(
        boss,
        "bzzz_post",
        {
            "target_address": "bzzz://arch-1",
            "message_type": "task_assignment",
            "content": {
                "task_type": "chat_completion",
                "description": f"remember {CANARY}",
                "task_data": {"messages": [{"role": "user", "content": f"remember {CANARY}"}]},
            },
        },
    )
    async with asyncio.timeout(60):  # a bound: the hosted agent runs on a loaded machine too
        await memories.wait()
    return {"thread_id": thread_id, "hosted_task": hosted["tasks"]["arch-1"]}


async def test_a_canary_is_nowhere_at_rest_and_bzzz_get_still_returns_it(
    tmp_path: Path, store_url: str | None, model_server: ScriptedModelServer
) -> None:
    model_server.push(Step(content=f"Noted: the launch word is {CANARY}."))
    data_dir = tmp_path / "data"
    settings = hosting(node_settings(data_dir), model_server)
    settings.node.database_url = store_url
    async with Node(settings) as node:
        server, _ = build_server(node)
        async with Client(server, mode="legacy") as boss, Client(server, mode="legacy") as bob:
            ids = await post_canaries(node, boss, bob)
            inbox = await call(bob, "bzzz_get", {"address": "bzzz://bob/inbox"})
            thread = await call(
                bob, "bzzz_get", {"address": f"bzzz://bob/threads/{ids['thread_id']}"}
            )
            tasks = await call(bob, "bzzz_get", {"address": "bzzz://bob/tasks"})
            hosted = await call(boss, "bzzz_get", {"address": "bzzz://arch-1/tasks"})
        # Those allowed to read it see it, in clear.
        assert CANARY in json.dumps(inbox)
        assert CANARY in json.dumps(thread)
        assert CANARY in json.dumps(tasks)
        assert CANARY in json.dumps(hosted)
        assert model_server.requests, "the hosted agent never asked the model"
        # While the node runs (the WAL holds the newest writes) and on the wire.
        assert files_holding(data_dir, CANARY.encode()) == []
        stream = await raw_stream(node)
        assert len(stream) > 10
        assert [m for m in stream if CANARY.encode() in m] == []
        sealed = [json.loads(m)["payload"] for m in stream if b'"message.posted"' in m]
        assert sealed and all(is_sealed(p.get(SEALED)) for p in sealed)
        if store_url is not None:
            tables = await postgres_rows(store_url)
            assert [name for name, rows in tables.items() if CANARY in rows] == []
            for content in ("messages", "tasks", "llm_memories", "threads"):
                assert "bz1." in tables[content], content  # rows are there, sealed
    # Once stopped too (the WAL checkpointed into the database file).
    assert files_holding(data_dir, CANARY.encode()) == []
    if store_url is None:
        assert (data_dir / "bzzz.db").stat().st_size > 0


async def test_with_encryption_off_the_canary_is_in_the_store(tmp_path: Path) -> None:
    """The proof above can fail: without sealing, the canary lies in the store in clear."""
    data_dir = tmp_path / "data"
    settings = node_settings(data_dir, enabled=False, jetstream_cipher="none")
    async with Node(settings) as node:
        server, _ = build_server(node)
        async with Client(server, mode="legacy") as boss, Client(server, mode="legacy") as bob:
            await call(boss, "bzzz_announce", {"agent_id": "boss", "role": "lead"})
            await call(bob, "bzzz_announce", {"agent_id": "bob", "role": "reviewer"})
            await post_direct(boss, "bob", {"c": CANARY})
        assert any(CANARY.encode() in m for m in await raw_stream(node))
    assert files_holding(data_dir, CANARY.encode()) != []


async def post_direct(client: Client, target: str, content: dict[str, Any]) -> None:
    """A direct message from the client's agent to ``target``."""
    await call(
        client,
        "bzzz_post",
        {"target_address": f"bzzz://{target}", "message_type": "direct", "content": content},
    )


def modes(root: Path) -> dict[str, int]:
    """The permission bits of the data directory and of everything in it."""
    paths = [root, *root.rglob("*")]
    return {str(p.relative_to(root)): stat.S_IMODE(p.lstat().st_mode) for p in paths}


async def test_the_data_directory_and_every_file_in_it_are_private(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    async with Node(node_settings(data_dir)) as node:
        server, _ = build_server(node)
        async with Client(server, mode="legacy") as boss:
            await call(boss, "bzzz_announce", {"agent_id": "boss", "role": "lead"})
            await post_direct(boss, "boss", {"x": 1})
        running = modes(data_dir)
    stopped = modes(data_dir)
    for seen in (running, stopped):
        assert "bzzz.db" in seen and "keys/network.json" in seen and "nats/store.key" in seen
        assert any(name.startswith("nats/jetstream/") for name in seen)
        shared = {name: oct(mode) for name, mode in seen.items() if mode & 0o077}
        assert shared == {}
    assert running["bzzz.db-wal"] == 0o600
    assert running["."] == 0o700
    assert running["keys/network.json"] == 0o600


async def test_the_embedded_server_encrypts_its_jetstream_store(tmp_path: Path) -> None:
    """JetStream's own cipher: even the clear envelopes (an agent's id) are not on its disk."""
    data_dir = tmp_path / "data"
    async with Node(node_settings(data_dir)) as node:
        server, _ = build_server(node)
        async with Client(server, mode="legacy") as boss:
            await call(boss, "bzzz_announce", {"agent_id": "clear-agent-xyz", "role": "lead"})
        conf = (data_dir / "nats" / "nats.conf").read_text()
        assert "cipher: chachapoly" in conf
        # The agent's envelope is clear on the wire (ids stay clear) ...
        assert any(b"clear-agent-xyz" in m for m in await raw_stream(node))
    # ... but the server sealed its store.
    assert files_holding(data_dir / "nats", b"clear-agent-xyz") == []


async def test_after_rotation_old_content_reads_and_new_content_uses_the_new_key(
    tmp_path: Path,
) -> None:
    first = node_settings(tmp_path / "a")
    async with Node(first) as a:
        assert a.embedded is not None
        second = node_settings(tmp_path / "b")
        second.bzzz.nats_url = [a.embedded.client_url]
        old = a.keys.list(LOCAL)[0].id
        async with Node(second) as b:
            server, _ = build_server(a)
            async with Client(server, mode="legacy") as boss:
                await call(boss, "bzzz_announce", {"agent_id": "boss", "role": "lead"})
                await post_direct(boss, "boss", {"n": "before"})
                rotated = await a.keys.rotate(LOCAL, utcnow())
                assert rotated.id != old and rotated.current
                await post_direct(boss, "boss", {"n": "after"})
                inbox = await call(boss, "bzzz_get", {"address": "bzzz://boss/inbox"})
            texts = json.dumps(inbox)
            assert '"before"' in texts and '"after"' in texts
            # The other node learnt the key from the log and reads both.
            async with asyncio.timeout(5):
                await b.projector.wait_until(
                    lambda: b.keyring is not None and b.keyring.holds(rotated.id), 5
                )
            assert b.keyring is not None and b.keyring.current.id == rotated.id
            async with b.db.session() as session:
                contents = [c for c in (await session.scalars(select(MessageRow.content)))]
            assert {"n": "before"} in contents and {"n": "after"} in contents
        posts = [json.loads(m) for m in await raw_stream(a) if b'"message.posted"' in m]
        kids = [box_key_id(p["payload"][SEALED]) for p in posts]
        assert kids == [old, rotated.id]
        # The keys are in the keyring file; the log carried the new one sealed, never in clear.
        keyring_text = (tmp_path / "b" / "keys" / "network.json").read_text()
        assert rotated.id in keyring_text
        assert a.keyring is not None
        secret = encode_secret(a.keyring.current.secret).encode()
        stream = await raw_stream(a)
        assert any(b'"keys.added"' in m for m in stream)
        assert [m for m in stream if secret in m] == []
    # A restart reads both with the keyring file alone.
    async with Node(first) as again:
        server, _ = build_server(again)
        async with Client(server, mode="legacy") as boss:
            await call(boss, "bzzz_announce", {"agent_id": "boss", "role": "lead"})
            inbox = await call(boss, "bzzz_get", {"address": "bzzz://boss/inbox"})
        assert '"before"' in json.dumps(inbox) and '"after"' in json.dumps(inbox)


async def test_a_node_with_another_key_is_refused_with_one_clear_reason(
    tmp_path: Path, clean_env: dict[str, str]
) -> None:
    async with Node(node_settings(tmp_path / "a")) as a:
        assert a.embedded is not None
        server, _ = build_server(a)
        async with Client(server, mode="legacy") as boss:
            await call(boss, "bzzz_announce", {"agent_id": "boss", "role": "lead"})
            await post_direct(boss, "boss", {"x": CANARY})
        stranger = node_settings(tmp_path / "b", key=OTHER_KEY)
        stranger.bzzz.nats_url = [a.embedded.client_url]
        with pytest.raises(KeyMissing) as refused:
            async with Node(stranger, catch_up_timeout=20):
                pass
        held = a.keys.list(LOCAL)[0].id
        assert f"sealed under network key {held}" in refused.value.message
        assert "BZZZ_NETWORK_KEY" in refused.value.message
        # Nothing of the stranger's store holds the content it could not open.
        assert files_holding(tmp_path / "b", CANARY.encode()) == []

        # `bzzz serve` says the same in one line and exits non-zero.
        env = node_env(
            clean_env,
            tmp_path / "c",
            BZZZ_NETWORK_KEY=OTHER_KEY,
            BZZZ_NATS_URL=a.embedded.client_url,
            BZZZ_HTTP_PORT="0",
        )
        proc = await asyncio.create_subprocess_exec(
            bzzz_executable(),
            "serve",
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        async with asyncio.timeout(60):
            out, err = await proc.communicate()
        assert proc.returncode == 2, err.decode()
        lines = [line for line in err.decode().splitlines() if line.startswith("bzzz: ")]
        assert len(lines) == 1, err.decode()
        assert f"sealed under network key {held}" in lines[0]
        assert out == b""


def test_keys_list_shows_ids_and_ages_never_a_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from bzzz import cli

    data_dir = tmp_path / "data"

    async def run_node() -> str:
        async with Node(node_settings(data_dir)) as node:
            assert node.keyring is not None
            return encode_secret(node.keyring.current.secret)

    secret = asyncio.run(run_node())
    assert cli.main(["--data-dir", str(data_dir), "keys", "list", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert len(shown["keys"]) == 1 and shown["keys"][0]["current"] is True
    assert set(shown["keys"][0]) == {"id", "created_at", "age_seconds", "current"}
    assert secret not in json.dumps(shown)


def test_keys_rotate_from_the_command_line_adds_a_key_new_writes_use(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from bzzz import cli

    data_dir = tmp_path / "data"
    assert cli.main(["--data-dir", str(data_dir), "keys", "rotate", "--json"]) == 0
    rotated = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert rotated["current"] is True
    assert cli.main(["--data-dir", str(data_dir), "keys", "list", "--json"]) == 0
    keys = json.loads(capsys.readouterr().out)["keys"]
    assert [k["id"] for k in keys][-1] == rotated["id"] and len(keys) == 2
    assert [k["current"] for k in keys] == [False, True]

    async def audited() -> list[str]:
        async with Node(node_settings(data_dir)) as node:
            assert node.keyring is not None and node.keyring.current.id == rotated["id"]
            async with node.db.session() as session:
                return list(await session.scalars(select(AuditRecordRow.action)))

    assert "cli:keys rotate" in asyncio.run(audited())
