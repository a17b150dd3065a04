"""How a node is put together: the services it builds, in the order they need each other, and
what each is told of the others. ``core.Node`` gives them their life: start, run, stop.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import IO, Any

from bzzz.a2a.bridge import A2ABridge
from bzzz.access.limits import CallLimiter, PostLimiter
from bzzz.access.network_keys import NetworkKeys
from bzzz.access.service import (
    AccessService,
    TokenVerifier,
    serves_loopback_only,
)
from bzzz.access.tokens import TokenRegistry
from bzzz.agents.inbox import InboxService
from bzzz.agents.service import AgentService
from bzzz.audit.dropped import drop_recorder
from bzzz.audit.trail import AuditTrail
from bzzz.clock import Clock
from bzzz.config import Settings
from bzzz.conversations.acks import EscalationAnswers
from bzzz.conversations.actions import EscalationActions
from bzzz.conversations.consensus import ConsensusService
from bzzz.conversations.escalation import EscalationService
from bzzz.conversations.hooks import ExtractiveInsights
from bzzz.conversations.monitor import ThreadMonitor
from bzzz.conversations.paging import Pager
from bzzz.conversations.replay import ThreadLog
from bzzz.conversations.service import ConversationService
from bzzz.conversations.timeline import ThreadTimeline
from bzzz.eventlog import Caller, EventLog
from bzzz.events.service import SubscriptionService
from bzzz.events.webhooks import WebhookDispatcher
from bzzz.federation.service import FederationService
from bzzz.knowledge.service import KnowledgeService
from bzzz.llm.runtime import HostedRuntime
from bzzz.llm.service import LLMService
from bzzz.llm.summaries import ModelSummarizer
from bzzz.network.admission import Admission
from bzzz.network.base import Bus
from bzzz.network.embedded import EmbeddedNats
from bzzz.network.identity import NodeIdentity
from bzzz.network.join import make_bus
from bzzz.network.sealing import Keyring, keyring_of
from bzzz.node.forward import FrontDoor, Local, Routing, used_ids
from bzzz.node.network import (
    Listing,
    open_listing,
    open_snapshots,
    trusted_origins,
)
from bzzz.node.paging import build_paging
from bzzz.node.slots import claim_slot, load_secret
from bzzz.peers.reclaim import Reclaimer
from bzzz.peers.service import PeerService, PeerSettings
from bzzz.projector import Projector
from bzzz.projects import AgentProjects, ProjectSet
from bzzz.reservations.service import ReservationService
from bzzz.retention.service import RetentionService
from bzzz.snapshots.service import SnapshotService
from bzzz.store.database import Database
from bzzz.store.projection import ProjectionLimits
from bzzz.store.scratch import applied_sequences
from bzzz.whoosh.registrar import WhooshRegistrar

logger = logging.getLogger(__name__)


class Wiring:
    """A node's services and how they are built (``Node`` starts, runs and stops them)."""

    # Set by Node.__init__; typed here for the building below.
    settings: Settings
    clock: Clock
    address: str
    tool: bool
    slot: int
    _agent_projects: AgentProjects | None
    _bus_override: Bus | None
    _embedded: EmbeddedNats | None
    _slot_lock: IO[bytes] | None

    # The services exist once started; typed here so the layers above can use them.
    identity: NodeIdentity
    tokens: TokenRegistry
    access: AccessService
    bus: Bus
    db: Database
    projector: Projector
    log: EventLog
    listing: Listing
    audit: AuditTrail
    agents: AgentService
    conversations: ConversationService
    timeline: ThreadTimeline
    subscriptions: SubscriptionService
    webhooks: WebhookDispatcher
    peers: PeerService
    federation: FederationService | None = None
    escalations: EscalationService
    consensus: ConsensusService
    monitor: ThreadMonitor
    paging: Pager
    answers: EscalationAnswers
    llm: LLMService
    hosted: HostedRuntime
    retention: RetentionService
    reservations: ReservationService
    inbox: InboxService
    knowledge: KnowledgeService
    snapshots: SnapshotService
    # Where reads of an address and posts go: here, or a node serving their project.
    front: FrontDoor
    whoosh: WhooshRegistrar | None = None
    node_dir: Path
    # The network's data keys (None with encryption off): content is sealed under them.
    keyring: Keyring | None
    keys: NetworkKeys

    @property
    def node_id(self) -> str:
        """This node's id (derived from its key)."""
        return self.identity.node_id

    @property
    def network(self) -> str:
        """The network id."""
        return self.settings.bzzz.network_id

    async def _build(self) -> None:
        data_dir = self.settings.node.data_dir.expanduser()
        # Private to the node's user: the store, keys, NATS credentials and logs live here.
        data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        data_dir.chmod(0o700)
        self.node_dir, self._slot_lock, self.slot = claim_slot(data_dir)
        self.identity = NodeIdentity.load_or_create(self.node_dir)
        node_secret = load_secret(self.node_dir / "webhook.secret")
        self.keyring = keyring_of(self.settings)
        if self._bus_override is not None:
            self.bus = self._bus_override
        else:
            self.bus, self._embedded = await make_bus(
                self.settings, data_dir, f"bzzz-slot{self.slot}"
            )
        url = self.settings.database_url()
        if self.slot and not self.settings.node.database_url:
            url = f"sqlite+aiosqlite:///{self.node_dir / 'bzzz.db'}"
        self.db = Database(url, self.keyring)
        await self.db.open()
        await self.bus.start()
        limits = ProjectionLimits(
            max_active_threads=self.settings.conversation.max_active_threads,
            max_agents=self.settings.agents.max_agents,
        )
        trusted = trusted_origins(self.settings, self.identity)
        self.projector = Projector(
            self.db,
            self.bus,
            network=self.network,
            node_id=self.node_id,
            limits=limits,
            # With admission the static list is part of the admitted set, not a filter of its own.
            trusted=None if self.settings.bzzz.admission else trusted,
            admitted=Admission(trusted or (), enforce=self.settings.bzzz.admission),
            keyring=self.keyring,
            projects=self.projects,
        )
        self.snapshots = open_snapshots(
            self.settings, self.bus, self.db, self.projector, self.identity, self.keyring, trusted
        )
        self.log = EventLog(
            self.identity,
            self.network,
            self.projector,
            self.clock,
            keyring=self.keyring,
            projects=self.projects,
        )
        audit = self.settings.audit
        self.audit = AuditTrail(
            self.db,
            self.identity,
            self.log.emit,
            clock=self.clock,
            every=audit.head_every,
            interval=audit.head_seconds,
        )
        self.audit.enabled = audit.enabled
        self.projector.add_drop_listener(drop_recorder(self.audit))
        self.keys = NetworkKeys(self.keyring, self.log)
        self._build_access()
        limits_cfg = self.settings.limits
        self.agents = AgentService(
            self.db,
            self.log,
            self.projector.directory,
            self.settings.agents.max_agents,
            lease_seconds=self.settings.agents.lease_seconds,
            agents_per_principal=limits_cfg.agents_per_principal,
        )
        self.listing = await open_listing(
            self.settings, self.bus, self.projector, self.agents, self.identity
        )
        history = ThreadLog(
            self.bus,
            self.network,
            trusted=None if self.settings.bzzz.admission else trusted,
            keyring=self.keyring,
            node_id=self.node_id,
            limits=limits,
            sequences_of=self._applied_sequences,
        )
        self.agents.history = history
        self.agents.as_of_limits = CallLimiter(
            "as_of_reads_per_minute",
            limits_cfg.as_of_reads_per_minute,
            limits_cfg.as_of_reads_burst,
        )
        # A thread as it happened (the dashboard's transcript): its log, read like as_of.
        self.timeline = ThreadTimeline(self.db, self.agents, history, self.agents.as_of_limits)
        self.conversations = ConversationService(
            self.db,
            self.log,
            self.agents,
            self.settings.conversation.max_active_threads,
            clock=self.clock,
            idle_timeout=self.settings.conversation.default_timeout,
            limiter=PostLimiter(
                limits_cfg.node_messages_per_second,
                limits_cfg.agent_messages_per_second,
                limits_cfg.burst_seconds,
            ),
            threads_per_principal=limits_cfg.threads_per_principal,
            redact_stored=self.settings.privacy.redact_stored,
        )
        self.subscriptions = SubscriptionService(
            self.db,
            self.log,
            node_secret,
            allow_private=self.settings.webhooks.allow_private,
            loopback_only=serves_loopback_only(
                self.settings.node.http_host, stdio=self.address == "stdio"
            ),
            per_agent=limits_cfg.subscriptions_per_agent,
            per_principal=limits_cfg.subscriptions_per_principal,
        )
        # A lease that runs out ends the agents' plain subscriptions before they go offline.
        self.agents.before_offline = self.subscriptions.end_for_agents
        self.webhooks = WebhookDispatcher(
            self.db,
            self.settings.webhooks,
            node_secret,
            targets=self.subscriptions.targets,
            on_dead=self.subscriptions.mark_dead,
        )
        self.projector.add_listener(self._wake_webhooks)
        self.peers = PeerService(
            self.bus,
            self.log,
            self.identity,
            self.network,
            PeerSettings(
                interval=self.settings.bzzz.heartbeat_interval,
                misses=self.settings.bzzz.heartbeat_misses,
                trusted=trusted,
                admits=self.projector.admission.admits if self.settings.bzzz.admission else None,
            ),
            address=self.address,
            describe=self._describe,
            projects=self.projector.projects,
        )
        self._reclaimer = Reclaimer(self.log, self.agents)
        self.projector.add_applied_listener(self._reclaimer.on_applied)
        self.projector.add_outcome_listener(self._reclaimer.on_outcomes)
        self.agents.settle_reclaim = self._reclaimer.settled
        self._build_front()
        self._build_thread_services()
        self._build_llm()
        self.retention = RetentionService(
            self.db, self.bus, self.log, self.settings.retention, clock=self.clock
        )
        self.projector.add_outcome_listener(self.retention.on_outcomes)
        self.reservations = ReservationService(
            self.db, self.log, self.agents, self.settings.reservations, clock=self.clock
        )
        self.agents.reservations_of = self.reservations.of_agent
        self.inbox = InboxService(self.db, self.log, self.agents)
        self._build_knowledge()
        self._build_a2a()

    def _build_knowledge(self) -> None:
        """Facts of projects: stated by agents (bzzz_post), from threads' consensus."""
        self.knowledge = KnowledgeService(self.db, self.log, clock=self.clock)

        async def author_of(caller: Caller) -> str:
            return await self.conversations.sender_for(caller, None, True)

        self.knowledge.author_of = author_of
        self.knowledge.audit = self.audit.record
        self.agents.knowledge_of = self.knowledge.read_address
        self.conversations.fact_poster = self.knowledge.post_fact
        self.conversations.observers.append(self.knowledge)
        # Hosted agents read the agreed facts for their prompts and propose what they learn.
        self.hosted.facts = self.knowledge

    def _build_front(self) -> None:
        def required() -> bool:
            return self.access.required

        local = Local(self.agents, self.conversations, self.db, self.audit, self.clock, required)
        projects = ProjectSet.of(self.settings.bzzz.projects)
        # Where an agent this node does not hold lives: the network's agent directory.
        routing = Routing(projects, directory=self._agent_projects or self.listing.directory)
        admits = self.projector.admission.admits
        bzzz = self.settings.bzzz
        used = used_ids(
            self.bus, self.network, replicas=bzzz.stream_replicas, timeout=bzzz.publish_timeout
        )
        self.front = FrontDoor(
            self.identity,
            self.network,
            self.bus,
            local,
            routing,
            admits,
            keyring=self.keyring,
            used=used,
        )

    async def _applied_sequences(self, ids: list[str]) -> dict[str, int]:
        async with self.db.session() as session:
            return await applied_sequences(session, ids)

    def _build_a2a(self) -> None:
        """Remote A2A agents of this data directory (`bzzz a2a add`): slot 0 hosts them."""
        self.a2a = A2ABridge(
            self.settings.node.data_dir.expanduser(),
            self.node_id,
            self.agents,
            self.conversations,
            self.db,
            self.subscriptions.targets,
            self.settings.webhooks,
            self.settings.a2a,
        )
        if self.slot == 0:
            self.projector.add_applied_listener(self.a2a.on_applied)
            self.projector.add_outcome_listener(self.a2a.on_outcomes)

    def _build_access(self) -> None:
        """Tokens (network state), admin tokens and the OAuth issuer: who may call."""
        auth = self.settings.auth
        tokens = self.settings.node.auth_tokens
        self.tokens = TokenRegistry()
        self.projector.add_applied_listener(self.tokens.on_applied)
        loopback = serves_loopback_only(self.settings.node.http_host)
        self.access = AccessService(
            self.tokens,
            tokens,
            required=auth.required,
            loopback=loopback,
            issuer=bool(auth.issuer),
            log=self.log,
            jwt=self._jwt_verifier(),
        )

    def _jwt_verifier(self) -> TokenVerifier | None:
        auth = self.settings.auth
        if not auth.issuer or not auth.audience:
            return None
        from bzzz.access.jwt import JwtPrincipals, JwtVerifier

        return JwtPrincipals(JwtVerifier(auth.issuer, auth.audience))

    def _build_thread_services(self) -> None:
        """Escalation rules, consensus and SLURP, and the monitor that sweeps threads."""
        wakeup = asyncio.Event()
        directory = self.projector.directory
        actions = EscalationActions(self.db, self.log, directory, self.settings.escalation)
        self.escalations = EscalationService(
            self.db,
            self.log,
            self.clock,
            self.settings.conversation.escalation_rules,
            self.settings.escalation,
            actions,
            wakeup,
        )
        self.consensus = ConsensusService(
            self.db,
            self.log,
            directory,
            self.clock,
            self.settings.slurp,
            ExtractiveInsights(),
            wakeup,
        )
        self.conversations.observers.extend([self.consensus, self.escalations])
        self.paging, self.answers = build_paging(
            self.settings, self.db, self.log, self.clock, self.agents, self.keyring,
            self.node_dir, self.address, self.audit,
        )  # fmt: skip
        self.monitor = ThreadMonitor(
            self.conversations.lifecycle,
            self.escalations,
            self.consensus,
            self.settings.escalation.monitor_interval,
            wakeup,
            self.paging,
        )

    def _build_llm(self) -> None:
        """The model client under the cost budget, and the hosted agents that use it."""
        # The model-backed conversation hooks, used only when a model endpoint is configured.
        from bzzz.llm.classifier import ModelInsights, ModelStanceClassifier

        self.llm = LLMService(self.settings, self.db, self.log)
        self.llm.audit = self.audit
        if self.llm.enabled:
            self.conversations.summarizer = ModelSummarizer(self.llm)
            self.conversations.classifier = ModelStanceClassifier(self.llm)
            self.consensus.insights = ModelInsights(self.llm)
        self.hosted = HostedRuntime(
            self.settings,
            db=self.db,
            projector=self.projector,
            agents=self.agents,
            conversations=self.conversations,
            llm=self.llm,
            log=self.log,
        )

    def _describe(self) -> tuple[str, list[str]]:
        """This node's status and capabilities for its heartbeat: busy when all its agents are."""
        hosted = self.projector.directory.online_of_node(self.node_id)
        busy = bool(hosted) and all(agent.status == "busy" for agent in hosted)
        roles = sorted({agent.role for agent in hosted})
        return ("busy" if busy else "online"), ["mcp", *roles]

    async def _wake_webhooks(self, matched: Any) -> None:
        if any(sub.callback_webhook for sub, _ in matched):
            self.webhooks.wake()

    @property
    def projects(self) -> ProjectSet:
        """The projects this node serves (``bzzz.projects``)."""
        return ProjectSet.of(self.settings.bzzz.projects)
