"""The embedded nats-server: start, JetStream round trip, join, stop, and no orphan on kill -9."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path

import nats
import pytest

import bzzz
from bzzz.errors import NetworkError
from bzzz.network.embedded import EmbeddedNats, nats_server_binary

pytestmark = pytest.mark.integration

_WAIT = 10.0


def _alive(pid: int) -> bool:
    """Whether pid is a live process (a zombie nobody has reaped yet counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    except OSError:
        # No procfs: fall back to signal 0, which cannot tell a zombie from a live process.
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
    # The state follows the parenthesised command name, which may itself contain spaces.
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _read_written(path: Path) -> str:
    """The file's stripped content, or "" while it does not exist yet."""
    return path.read_text().strip() if path.exists() else ""


def _src_dir() -> str:
    """The directory holding the bzzz package, for the child's PYTHONPATH."""
    return str(Path(bzzz.__file__).resolve().parents[1])


async def _wait_gone(pid: int) -> None:
    """Poll the OS until pid has exited; bound it with asyncio.timeout at the call."""
    while True:
        if not _alive(pid):
            return
        await asyncio.sleep(0.05)


async def _wait_file(path: Path) -> str:
    """Poll until another process has written path; bound it with asyncio.timeout at the call."""
    while True:
        if text := _read_written(path):
            return text
        await asyncio.sleep(0.05)


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[EmbeddedNats]:
    """A started embedded server on a fresh data dir."""
    embedded = EmbeddedNats(tmp_path)
    async with asyncio.timeout(_WAIT):
        await embedded.start()
    try:
        yield embedded
    finally:
        async with asyncio.timeout(_WAIT):
            await embedded.close()


def test_binary_is_found() -> None:
    assert nats_server_binary().is_file()


async def test_start_gives_working_jetstream(server: EmbeddedNats, tmp_path: Path) -> None:
    assert server.owner
    assert server.url.startswith("nats://127.0.0.1:")
    assert server.server_pid is not None and _alive(server.server_pid)
    assert (tmp_path / "nats" / "server.url").read_text().strip() == server.url
    async with asyncio.timeout(_WAIT):
        nc = await nats.connect(server.url)
        try:
            js = nc.jetstream()
            await js.add_stream(name="EVENTS", subjects=["events.>"])
            ack = await js.publish("events.one", b"hello")
            assert ack.stream == "EVENTS"
            assert ack.seq == 1
            msg = await js.get_msg("EVENTS", 1)
            assert msg.data == b"hello"
        finally:
            await nc.close()


async def test_store_lands_under_data_dir(server: EmbeddedNats, tmp_path: Path) -> None:
    async with asyncio.timeout(_WAIT):
        nc = await nats.connect(server.url)
        try:
            js = nc.jetstream()
            await js.add_stream(name="STORED", subjects=["stored.>"], storage="file")
            await js.publish("stored.x", b"x")
        finally:
            await nc.close()
    store = tmp_path / "nats" / "jetstream"
    assert store.is_dir()
    assert any(p.name == "STORED" for p in store.rglob("*"))


async def test_second_instance_joins(server: EmbeddedNats, tmp_path: Path) -> None:
    # flock locks belong to an open file description, so a second open() in this same
    # process conflicts exactly like another process would.
    async with asyncio.timeout(_WAIT), EmbeddedNats(tmp_path) as joiner:
        assert joiner.owner is False
        assert joiner.url == server.url
        assert joiner.server_pid is None
    # The joiner leaving must not stop the owner's server.
    assert server.server_pid is not None and _alive(server.server_pid)
    assert (tmp_path / "nats" / "server.url").exists()


async def test_close_stops_server_and_is_idempotent(tmp_path: Path) -> None:
    embedded = EmbeddedNats(tmp_path)
    async with asyncio.timeout(_WAIT):
        await embedded.start()
        pid = embedded.server_pid
        assert pid is not None
        await embedded.close()
        await embedded.close()
    assert not _alive(pid)
    assert not (tmp_path / "nats" / "server.url").exists()
    assert embedded.server_pid is None
    # The lock is free again: a new instance owns the directory.
    async with asyncio.timeout(_WAIT), EmbeddedNats(tmp_path) as again:
        assert again.owner


async def test_start_twice_raises(server: EmbeddedNats) -> None:
    with pytest.raises(RuntimeError):
        await server.start()


async def test_early_exit_reports_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # An unparsable configuration makes nats-server exit at once, with the reason on stderr.
    monkeypatch.setattr(EmbeddedNats, "_config_text", lambda self: "jetstream {\n")
    embedded = EmbeddedNats(tmp_path, start_timeout=5.0)
    async with asyncio.timeout(_WAIT):
        with pytest.raises(NetworkError) as info:
            await embedded.start()
    assert "exited with status" in info.value.message
    assert "Parse error" in info.value.message  # the server's own complaint, from the log tail
    assert embedded.server_pid is None
    monkeypatch.undo()
    # A failed start releases the lock.
    async with asyncio.timeout(_WAIT), EmbeddedNats(tmp_path) as again:
        assert again.owner


_CHILD = textwrap.dedent(
    """
    import asyncio, sys
    from pathlib import Path
    from bzzz.network.embedded import EmbeddedNats

    async def main() -> None:
        embedded = EmbeddedNats(Path(sys.argv[1]))
        await embedded.start()
        out = Path(sys.argv[2])
        tmp = out.with_suffix(".tmp")
        tmp.write_text(str(embedded.server_pid))
        tmp.replace(out)
        await asyncio.Event().wait()

    asyncio.run(main())
    """
)


async def test_killed_parent_leaves_no_orphan(tmp_path: Path) -> None:
    pid_file = tmp_path / "server.pid"
    data_dir = tmp_path / "data"
    env = {**os.environ, "PYTHONPATH": _src_dir()}
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        _CHILD,
        str(data_dir),
        str(pid_file),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    try:
        async with asyncio.timeout(_WAIT):
            server_pid = int(await _wait_file(pid_file))
        assert _alive(server_pid)
        child.send_signal(signal.SIGKILL)
        async with asyncio.timeout(_WAIT):
            await child.wait()
        async with asyncio.timeout(5.0):
            await _wait_gone(server_pid)
    finally:
        if child.returncode is None:
            child.kill()
            await child.wait()
    # The dead owner's lock went with it: the next process takes over despite the stale URL.
    async with asyncio.timeout(_WAIT), EmbeddedNats(data_dir) as successor:
        assert successor.owner
        assert successor.server_pid != server_pid


async def test_a_joined_process_takes_over_when_the_owner_leaves(tmp_path: Path) -> None:
    owner = EmbeddedNats(tmp_path)
    joiner = EmbeddedNats(tmp_path)
    joiner.takeover_interval = 0.05
    url = await owner.start()
    try:
        assert await joiner.start() == url
        reconnected = asyncio.Event()

        async def on_reconnect() -> None:
            reconnected.set()

        nc = await nats.connect(
            url, reconnected_cb=on_reconnect, reconnect_time_wait=0.05, max_reconnect_attempts=-1
        )
        js = nc.jetstream()
        await js.add_stream(name="KEEP", subjects=["keep.>"])
        await js.publish("keep.a", b"before")
        await owner.close()
        async with asyncio.timeout(_WAIT):
            await reconnected.wait()
        assert joiner.owner
        assert joiner.url == url
        assert (await js.get_msg("KEEP", 1)).data == b"before"
        await js.publish("keep.b", b"after")
        await nc.close()
    finally:
        await joiner.close()
        await owner.close()
