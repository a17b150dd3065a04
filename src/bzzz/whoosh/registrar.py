"""The node's side of WHOOSH: each hosted agent registered, its health reported, deregistered.

One loop per agent, all in one ``TaskGroup``: register (``POST /agents``), retried with
jittered exponential backoff while WHOOSH is away; then report health every
``whoosh.health_interval`` seconds (``PUT /agents/{id}/health``), registering again if WHOOSH
answers 404 (it forgot the agent, e.g. it restarted). A 4xx answer to a registration is logged
once, with the status and WHOOSH's answer, and that agent is left unregistered: the request
would be refused again. A clean stop deregisters every registered agent (``DELETE``); a crash
cannot, and WHOOSH's own health checks find the agent gone.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from bzzz.backoff import backoff
from bzzz.config import Settings, WhooshSettings
from bzzz.domain import iso, utcnow
from bzzz.errors import WhooshRefused, WhooshUnavailable
from bzzz.llm.hosted import HostedAgent
from bzzz.llm.pricing import PriceTable
from bzzz.llm.roles import HostedAgentSpec
from bzzz.store.directory import AgentDirectory
from bzzz.whoosh.client import WhooshClient
from bzzz.whoosh.models import (
    AgentHealth,
    AgentMetadata,
    AgentRegistration,
    HealthCheckConfig,
    endpoints_for,
)

logger = logging.getLogger(__name__)

HealthOf = Callable[[str], AgentHealth]


class RegistrarState(StrEnum):
    """Where the registrar is in its life."""

    NEW = "new"
    RUNNING = "running"
    STOPPED = "stopped"


class Registration(StrEnum):
    """Where one agent stands with WHOOSH."""

    PENDING = "pending"
    REGISTERED = "registered"
    REFUSED = "refused"
    DEREGISTERED = "deregistered"


@dataclass(slots=True)
class _Agent:
    registration: AgentRegistration
    state: Registration = Registration.PENDING
    attempts: int = 0
    health_reports: int = 0
    last_error: str | None = None

    @property
    def id(self) -> str:
        return self.registration.agent_id

    def to_json(self) -> dict[str, Any]:
        return {
            "agent_id": self.id,
            "state": str(self.state),
            "attempts": self.attempts,
            "health_reports": self.health_reports,
            "last_error": self.last_error,
        }


def registration_for(
    spec: HostedAgentSpec,
    *,
    model: str,
    max_tokens: int,
    prices: PriceTable,
    public_url: str,
    settings: WhooshSettings,
) -> AgentRegistration:
    """The design's AgentRegistration of one hosted agent."""
    price = prices.price(model)
    # USD per million tokens -> per token; one figure: the mean of input and output.
    cost_per_token = (price.input + price.output) / 2 / 1_000_000
    role = spec.template.role
    return AgentRegistration(
        agent_id=spec.agent_id,
        role=role,
        capabilities=list(spec.template.capabilities),
        metadata=AgentMetadata(
            model=model,
            max_tokens=max_tokens,
            cost_per_token=cost_per_token,
            bzzz_address=f"bzzz://{spec.agent_id}:{role}@{spec.project or '*'}",
        ),
        endpoints=endpoints_for(public_url, spec.agent_id),
        health_check=HealthCheckConfig(
            interval=settings.health_interval,
            timeout=settings.health_timeout,
            retries=settings.health_retries,
        ),
    )


class WhooshRegistrar:
    """Registers agents with WHOOSH and keeps their health reported until stopped."""

    def __init__(
        self,
        settings: WhooshSettings,
        registrations: Sequence[AgentRegistration],
        health: HealthOf,
        *,
        client: WhooshClient | None = None,
    ) -> None:
        self._settings = settings
        self._client = client or WhooshClient(settings)
        self._health = health
        self.agents = {r.agent_id: _Agent(r) for r in registrations}
        self.state = RegistrarState.NEW
        self._task: asyncio.Task[None] | None = None
        self._registered = asyncio.Condition()
        self._client_closed = False

    def start(self) -> None:
        """Run the agents' loops in the background."""
        if self.state is not RegistrarState.NEW:
            raise RuntimeError(f"the WHOOSH registrar cannot start from state {self.state}")
        self.state = RegistrarState.RUNNING
        self._task = asyncio.create_task(self._run(), name="bzzz-whoosh")

    async def _run(self) -> None:
        async with asyncio.TaskGroup() as group:
            for agent in self.agents.values():
                group.create_task(self._serve(agent), name=f"bzzz-whoosh-{agent.id}")

    async def _serve(self, agent: _Agent) -> None:
        while await self._register(agent):
            await self._report(agent)

    async def _register(self, agent: _Agent) -> bool:
        """Register, retrying while WHOOSH is away; False when WHOOSH refused."""
        while True:
            try:
                await self._client.register(agent.registration)
            except WhooshUnavailable as exc:
                delay = backoff(
                    agent.attempts,
                    self._settings.initial_backoff,
                    self._settings.max_backoff,
                    jitter=True,
                )
                agent.attempts += 1
                agent.last_error = exc.message
                await self._changed()
                logger.warning(
                    "WHOOSH is unavailable for agent %s (%s); retrying in %.1fs",
                    agent.id,
                    exc.message,
                    delay,
                )
                await asyncio.sleep(delay)
                continue
            except WhooshRefused as exc:
                agent.attempts += 1
                agent.last_error = f"{exc.message}: {exc.details.get('answer', '')}"
                agent.state = Registration.REFUSED
                logger.error(
                    "WHOOSH refused to register agent %s (HTTP %s): %s; it stays unregistered",
                    agent.id,
                    exc.details.get("status"),
                    exc.details.get("answer", ""),
                )
                await self._changed()
                return False
            agent.attempts += 1
            agent.last_error = None
            agent.state = Registration.REGISTERED
            logger.info("agent %s registered with WHOOSH", agent.id)
            await self._changed()
            return True

    async def _report(self, agent: _Agent) -> None:
        """Report health every interval; return when WHOOSH no longer knows the agent."""
        while True:
            await asyncio.sleep(self._settings.health_interval)
            try:
                await self._client.report_health(self._health(agent.id))
            except WhooshRefused as exc:
                agent.last_error = exc.message
                if exc.details.get("status") == 404:
                    logger.warning("WHOOSH forgot agent %s; registering it again", agent.id)
                    agent.state = Registration.PENDING
                    return
                logger.error(
                    "WHOOSH refused the health report of agent %s (HTTP %s): %s",
                    agent.id,
                    exc.details.get("status"),
                    exc.details.get("answer", ""),
                )
            except WhooshUnavailable as exc:
                agent.last_error = exc.message
                logger.warning("health of agent %s not reported: %s", agent.id, exc.message)
            else:
                agent.health_reports += 1

    async def _changed(self) -> None:
        async with self._registered:
            self._registered.notify_all()

    async def wait_until(self, predicate: Callable[[list[dict[str, Any]]], bool]) -> None:
        """Wait until ``predicate`` holds of the agents' standing (bound it with a timeout)."""
        async with self._registered:
            await self._registered.wait_for(lambda: predicate(self.status()["agents"]))

    async def _cancel(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    async def stop(self) -> None:
        """Stop reporting and deregister every registered agent (each call bounded)."""
        if self.state is RegistrarState.STOPPED:
            return
        self.state = RegistrarState.STOPPED
        await self._cancel()
        try:
            registered = [a for a in self.agents.values() if a.state is Registration.REGISTERED]
            await asyncio.gather(*(self._deregister(agent) for agent in registered))
        finally:
            await self._close_client()

    async def _close_client(self) -> None:
        if not self._client_closed:
            self._client_closed = True
            await self._client.close()

    async def _deregister(self, agent: _Agent) -> None:
        try:
            await self._client.deregister(agent.id)
        except (WhooshUnavailable, WhooshRefused) as exc:
            agent.last_error = exc.message
            logger.warning("agent %s not deregistered from WHOOSH: %s", agent.id, exc.message)
            return
        agent.state = Registration.DEREGISTERED
        logger.info("agent %s deregistered from WHOOSH", agent.id)

    async def abort(self) -> None:
        """Stop without a word to WHOOSH (a crash, a failed start)."""
        self.state = RegistrarState.STOPPED
        await self._cancel()
        await self._close_client()

    def status(self) -> dict[str, Any]:
        """Each agent's standing with WHOOSH (for the node's status)."""
        # Not the URL: it may carry credentials, and /healthz shows this to anyone it answers.
        return {"agents": [agent.to_json() for agent in self.agents.values()]}


def public_url_of(settings: Settings, address: str) -> str | None:
    """Where WHOOSH reaches the node's routes: ``auth.public_url``, else what serves it."""
    if settings.auth.public_url:
        return settings.auth.public_url.rstrip("/")
    if address.startswith(("http://", "https://")):
        return address.removesuffix("/").removesuffix("/mcp")
    return None


def registrar_for(
    node_settings: Settings,
    address: str,
    hosted: dict[str, HostedAgent],
    prices: PriceTable,
    directory: AgentDirectory,
) -> WhooshRegistrar | None:
    """The registrar of the node's hosted agents, or None (no whoosh.url, no agents, no URL).

    ``address`` is what serves the node (``http://…`` or ``stdio``); ``directory`` tells each
    agent's status and availability.
    """
    settings = node_settings.whoosh
    if settings.url is None:
        return None
    if not hosted:
        logger.info("whoosh.url is set but this node hosts no agent: nothing to register")
        return None
    public_url = public_url_of(node_settings, address)
    if public_url is None:
        logger.error(
            "whoosh.url is set but this node has no public URL for WHOOSH to call back "
            "(set auth.public_url, or serve HTTP): hosted agents are not registered"
        )
        return None
    openai = node_settings.openai
    registrations = [
        registration_for(
            agent.spec,
            model=agent.spec.model or openai.default_model,
            max_tokens=openai.max_tokens,
            prices=prices,
            public_url=public_url,
            settings=settings,
        )
        for agent in hosted.values()
    ]

    def health(agent_id: str) -> AgentHealth:
        agent = hosted[agent_id]
        known = directory.get(agent_id)
        return AgentHealth(
            agent_id=agent_id,
            status=known.status if known is not None else "offline",
            available=known.available if known is not None else False,
            state=str(agent.lifecycle.state),
            current_tasks=agent.running,
            max_tasks=agent.spec.max_tasks,
            completed_tasks=agent.completed,
            failed_tasks=agent.failed,
            timestamp=iso(utcnow()) or "",
        )

    return WhooshRegistrar(settings, registrations, health)
