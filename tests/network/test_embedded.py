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
from bzzz.network.jetstream import JetStreamBus

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
        nc = await nats.connect(server.client_url)
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
        nc = await nats.connect(server.client_url)
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
            owner.client_url,
            reconnected_cb=on_reconnect,
            reconnect_time_wait=0.05,
            max_reconnect_attempts=-1,
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


async def _refused(url: str, **credentials: str) -> str:
    """Connect a raw nats-py client; the server's complaint when it refuses the client."""
    complaints: list[str] = []

    async def on_error(exc: Exception) -> None:
        complaints.append(str(exc))

    try:
        async with asyncio.timeout(3):
            nc = await nats.connect(
                url, error_cb=on_error, allow_reconnect=False, connect_timeout=2, **credentials
            )
    except (TimeoutError, nats.errors.Error, OSError) as exc:
        return " ".join([*complaints, str(exc)])
    await nc.close()
    raise AssertionError("the embedded server took a client without its credentials")


async def test_a_client_without_the_credentials_is_refused(server: EmbeddedNats) -> None:
    async with asyncio.timeout(_WAIT):
        # The log exists and holds a message a stranger would like to read.
        nc = await nats.connect(server.client_url)
        js = nc.jetstream()
        await js.add_stream(name="SECRET", subjects=["secret.>"])
        await js.publish("secret.x", b"for members only")
        await nc.close()
        assert "Authorization Violation" in await _refused(server.url)
        assert "Authorization Violation" in await _refused(
            server.url, user="bzzz", password="guessed"
        )


async def test_the_credentials_are_kept_private_and_out_of_the_url(
    server: EmbeddedNats, tmp_path: Path
) -> None:
    nats_dir = tmp_path / "nats"
    for path in (nats_dir / "auth.json", nats_dir / "nats.conf"):
        assert path.stat().st_mode & 0o777 == 0o600
    assert nats_dir.stat().st_mode & 0o777 == 0o700
    password = server.auth.password
    assert password and len(password) >= 32
    assert password in (nats_dir / "nats.conf").read_text()
    assert password not in server.url
    assert password not in (nats_dir / "server.url").read_text()
    assert password not in repr(server.auth)


async def test_a_joining_process_uses_the_same_credentials(
    server: EmbeddedNats, tmp_path: Path
) -> None:
    async with asyncio.timeout(_WAIT), EmbeddedNats(tmp_path) as joiner:
        assert joiner.auth == server.auth
        nc = await nats.connect(joiner.client_url)
        assert nc.is_connected
        await nc.close()


async def test_a_jetstream_bus_without_the_credentials_fails_at_once(
    server: EmbeddedNats,
) -> None:
    bus = JetStreamBus([server.url], "main")
    async with asyncio.timeout(_WAIT):
        with pytest.raises(NetworkError) as info:
            await bus.start()
    assert "refused this node's credentials" in info.value.message
    assert server.auth.password not in info.value.message
    with_creds = JetStreamBus([server.url], "main", auth=server.auth)
    async with asyncio.timeout(_WAIT):
        await with_creds.start()
        assert await with_creds.last_sequence() == 0
        await with_creds.close()


async def test_an_error_never_shows_the_password_of_a_url(server: EmbeddedNats) -> None:
    port = server.url.rsplit(":", 1)[1]
    bus = JetStreamBus([f"nats://bzzz:hunter2-secret@127.0.0.1:{port}"], "main")
    async with asyncio.timeout(_WAIT):
        with pytest.raises(NetworkError) as info:
            await bus.start()
    assert "hunter2-secret" not in info.value.message
    assert "hunter2-secret" not in str(info.value.details)
    assert f"nats://***@127.0.0.1:{port}" in info.value.message
