"""Joining the network's log as a local process joins it (the CLI's commands that write to it).

The data directory's embedded server (started when no node runs on it), or ``BZZZ_NATS_URL``
with its credentials.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from bzzz.config import Settings
from bzzz.network.embedded import EmbeddedNats
from bzzz.network.jetstream import JetStreamBus
from bzzz.network.nats_auth import NatsAuth


@contextlib.asynccontextmanager
async def joined_bus(settings: Settings) -> AsyncIterator[JetStreamBus]:
    """The network's log, joined as a local process joins it."""
    embedded: EmbeddedNats | None = None
    urls = settings.bzzz.nats_url
    auth = NatsAuth(creds_file=settings.bzzz.nats_creds)
    if not urls:
        embedded = EmbeddedNats(
            settings.node.data_dir.expanduser(),
            max_file_store=settings.bzzz.max_file_store,
            max_memory_store=settings.bzzz.max_memory_store,
        )
        urls = [await embedded.start()]
        auth = embedded.auth
    bus = JetStreamBus(
        urls,
        settings.bzzz.network_id,
        replicas=settings.bzzz.stream_replicas,
        publish_timeout=settings.bzzz.publish_timeout,
        name="bzzz-cli",
        auth=auth,
    )
    try:
        await bus.start()
        yield bus
    finally:
        await bus.close()
        if embedded is not None:
            await embedded.close()
