"""The node's paging of people: the pager (monitor-driven) and the answers (ack, resolve, links)."""

from __future__ import annotations

from pathlib import Path

from bzzz.agents.service import AgentService
from bzzz.clock import Clock
from bzzz.config import Settings
from bzzz.conversations.acks import EscalationAnswers
from bzzz.conversations.pagelinks import LinkSigner
from bzzz.conversations.paging import Pager, Recorder
from bzzz.eventlog import EventLog
from bzzz.network.sealing import Keyring
from bzzz.node.slots import load_secret
from bzzz.store.database import Database


def link_base(settings: Settings, address: str) -> str:
    """Where a person's link reaches this node: ``auth.public_url``, else its HTTP address."""
    if settings.auth.public_url:
        return settings.auth.public_url.rstrip("/")
    if address.startswith(("http://", "https://")):
        return address.removesuffix("/mcp").rstrip("/")
    return f"http://{settings.node.http_host}:{settings.node.http_port}"


def build_paging(
    settings: Settings,
    db: Database,
    log: EventLog,
    clock: Clock,
    agents: AgentService,
    keyring: Keyring | None,
    node_dir: Path,
    address: str,
    audit: Recorder | None,
) -> tuple[Pager, EscalationAnswers]:
    """The pager and the answers, sharing one link signer."""
    own = load_secret(node_dir / "webhook.secret")

    def secrets() -> list[bytes]:
        # The network's keys (newest first) so every node verifies; else this node's own.
        if keyring is None:
            return [own]
        current = keyring.current.secret
        return [current] + [k.secret for k in keyring.all_keys() if k.secret != current]

    links = LinkSigner(secrets)
    pager = Pager(
        db, log, clock, settings.escalation, links, lambda: link_base(settings, address), audit
    )
    return pager, EscalationAnswers(db, log, agents, links, clock, audit)
