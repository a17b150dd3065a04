"""The network's peer board read from outside a node (`bzzz peers`, `bzzz metrics`)."""

from __future__ import annotations

from bzzz.config import Settings
from bzzz.domain import utcnow
from bzzz.errors import NetworkError
from bzzz.network.embedded import local_auth, running_url
from bzzz.network.jetstream import JetStreamBus
from bzzz.network.nats_auth import NatsAuth, redact_url
from bzzz.peers.service import NetworkPeer, PeerSettings, board_view


async def read_board(settings: Settings) -> list[NetworkPeer]:
    """The peers on the network's board as of now (NetworkError when it cannot be read)."""

    data_dir = settings.node.data_dir.expanduser()
    urls = settings.bzzz.nats_url or [url for url in [running_url(data_dir)] if url]
    if not urls:
        raise NetworkError(f"no node has run on {data_dir} and BZZZ_NATS_URL is not set")
    auth = NatsAuth(creds_file=settings.bzzz.nats_creds)
    if not settings.bzzz.nats_url:
        auth = local_auth(data_dir) or auth
    network = settings.bzzz.network_id
    bus = JetStreamBus(urls, network, publish_timeout=5.0, create=False, auth=auth)
    try:
        await bus.start()
        entries = await bus.peer_entries()
    except NetworkError:
        raise
    except Exception as exc:
        # Whatever NATS says (no server, no bucket yet), the user needs one line.
        shown = ", ".join(redact_url(url) for url in urls)
        raise NetworkError(f"cannot read the peer board at {shown}: {exc!r}") from exc
    finally:
        await bus.close()
    peer_settings = PeerSettings(
        interval=settings.bzzz.heartbeat_interval,
        misses=settings.bzzz.heartbeat_misses,
        trusted=frozenset(settings.bzzz.trusted_nodes) or None,
    )
    return board_view(entries, settings.bzzz.network_id, peer_settings, utcnow())
