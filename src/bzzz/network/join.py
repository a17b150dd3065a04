"""Joining the network's log as a local process joins it (the CLI's commands that write to it).

The data directory's embedded server (started when no node runs on it), or ``BZZZ_NATS_URL``
with its credentials.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

from bzzz.config import Settings
from bzzz.network.embedded import EmbeddedNats
from bzzz.network.jetstream import JetStreamBus
from bzzz.network.nats_auth import NatsAuth


async def make_bus(
    settings: Settings, data_dir: Path, name: str
) -> tuple[JetStreamBus, EmbeddedNats | None]:
    """A bus of the network (``name`` on the server): on ``bzzz.nats_url``'s servers, else on
    the embedded nats-server it starts or joins in ``data_dir``, which it returns too."""
    urls = settings.bzzz.nats_url
    # An external server's credentials: a creds file, or the user and password in the URLs.
    auth = NatsAuth(creds_file=settings.bzzz.nats_creds)
    embedded = None
    if not urls:
        embedded = EmbeddedNats(
            data_dir,
            max_file_store=settings.bzzz.max_file_store,
            max_memory_store=settings.bzzz.max_memory_store,
            cipher=settings.encryption.jetstream_cipher,
            partitions=settings.bzzz.partitions,
        )
        urls = [await embedded.start()]
        auth = embedded.auth
    bus = JetStreamBus(
        urls,
        settings.bzzz.network_id,
        replicas=settings.bzzz.stream_replicas,
        publish_timeout=settings.bzzz.publish_timeout,
        name=name,
        auth=auth,
    )
    return bus, embedded


@contextlib.asynccontextmanager
async def joined_bus(settings: Settings) -> AsyncIterator[JetStreamBus]:
    """The network's log, joined as a local process joins it."""
    bus, embedded = await make_bus(settings, settings.node.data_dir.expanduser(), "bzzz-cli")
    try:
        await bus.start()
        yield bus
    finally:
        await bus.close()
        if embedded is not None:
            await embedded.close()
