"""A node served on a real port (uvicorn, in this process) and headless Chromium on its /ui.

The browser is Debian's ``chromium`` driven by Playwright (``executable_path``; the suite never
downloads one). In CI (``CI=true``) a missing browser fails the tests instead of skipping them.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import pytest_asyncio
import uvicorn
from e2e.support import wait_until
from receiver import http_receiver  # noqa: F401 - the fixture

from bzzz.api.app import build_app
from bzzz.clock import Clock, ManualClock
from bzzz.config import EscalationRuleConfig, Settings
from bzzz.conversations.monitor import ThreadMonitor
from bzzz.events.webhooks import WebhookDispatcher
from bzzz.mcp.server import build_server
from bzzz.network.memory import InMemoryBus
from bzzz.node.core import Node
from bzzz.principal import LOCAL, Scope

CHROMIUM = "/usr/bin/chromium"
# How long a tab waits for what the page should show (Playwright's default for every wait).
# A bound, not a speed claim: four workers and Chromium on two cores took over 5 s once.
SHOWN_WITHIN_MS = 30_000
IN_CI = bool(os.environ.get("CI"))
STUCK = {
    "name": "stuck",
    "conditions": [{"type": "no_progress", "threshold": True, "timeframe": 600}],
    "actions": [{"type": "notify_human", "target": "project_manager"}],
}

try:
    from playwright.async_api import Browser, ConsoleMessage, Error, Page, async_playwright
except ImportError:  # pragma: no cover - the dev extra installs it
    async_playwright = None  # type: ignore[assignment]


def _need_browser() -> None:
    problem = None
    if async_playwright is None:
        problem = "the playwright package is not installed (pip install -e '.[dev]')"
    elif not os.access(CHROMIUM, os.X_OK):
        problem = f"{CHROMIUM} is missing (apt-get install -y chromium)"
    if problem is None:
        return
    if IN_CI:
        pytest.fail(f"the browser tests need Chromium in CI: {problem}")
    pytest.skip(problem)


@dataclass
class Served:
    """A running node, its URL and the clock it reads (manual, or the wall clock)."""

    node: Node
    clock: Any
    url: str

    async def token(
        self,
        name: str,
        projects: list[str],
        *,
        roles: list[str] | None = None,
        scope: Scope = Scope.WRITE,
    ) -> str:
        """A network token (as `bzzz token create` makes one); its secret."""
        _, secret = await self.node.access.create_token(
            LOCAL, name, projects, roles or ["*"], scope, None
        )
        return secret


async def _no_dispatch(self: WebhookDispatcher) -> None:
    # Stand-in for the dispatch loop: it delivers nothing (the tests drive the queue) and,
    # like the real one, leaves at stop() instead of holding the node's stop for its timeout.
    while not self._stopping:
        self._wake.clear()
        await self._wake.wait()


async def _idle(self: ThreadMonitor) -> None:
    # The tests sweep the threads themselves (node.escalations.check_all on a manual clock).
    while not self._stopping:
        self._wakeup.clear()
        await self._wakeup.wait()


@contextlib.asynccontextmanager
async def serve(
    settings: Settings, bus: InMemoryBus, clock: Clock | None = None
) -> AsyncIterator[Served]:
    """A node with these settings served by uvicorn on a free loopback port."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(128)
    port = listener.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    async with Node(settings, bus=bus, clock=clock, address=f"{url}/mcp") as node:
        server, _ = build_server(node)
        app = build_app(node, server, "127.0.0.1", url)
        config = uvicorn.Config(
            app, log_level="warning", lifespan="on", timeout_graceful_shutdown=1
        )
        web = uvicorn.Server(config)
        task = asyncio.create_task(web.serve(sockets=[listener]))
        try:
            async with asyncio.timeout(10):
                await wait_until(lambda: web.started)
            yield Served(node, node.clock, url)
        finally:
            web.should_exit = True
            with contextlib.suppress(asyncio.CancelledError):
                await task
            listener.close()


@pytest_asyncio.fixture(loop_scope="session")
async def served(
    settings: Settings, memory_bus: InMemoryBus, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Served]:
    """A node requiring credentials, with the 'stuck' rule, served on a free loopback port
    (its webhook queue, retried fast and dead after 50 ms, is driven by the tests)."""
    monkeypatch.setattr(ThreadMonitor, "run", _idle)
    monkeypatch.setattr(WebhookDispatcher, "run", _no_dispatch)
    for name, value in {"initial_backoff": 0.001, "max_backoff": 0.002, "max_age": 0.05}.items():
        setattr(settings.webhooks, name, value)
    settings.auth.required = True
    settings.conversation.default_timeout = 10**7
    settings.conversation.escalation_rules = [EscalationRuleConfig.model_validate(STUCK)]
    async with serve(settings, memory_bus, ManualClock()) as running:
        yield running


@pytest_asyncio.fixture(loop_scope="session")
async def open_served(settings: Settings, memory_bus: InMemoryBus) -> AsyncIterator[Served]:
    """A loopback node on the wall clock that takes callers without a credential."""
    settings.auth.required = False
    async with serve(settings, memory_bus) as running:
        yield running


@dataclass
class Problems:
    """What the browser reported as wrong: console errors and uncaught page errors."""

    messages: list[str] = field(default_factory=list)

    def console(self, message: ConsoleMessage) -> None:
        if message.type == "error":
            self.messages.append(f"console: {message.text}")

    def page_error(self, error: Error) -> None:
        self.messages.append(f"pageerror: {error}")


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def browser() -> AsyncIterator[Browser]:
    """Headless Debian Chromium, one per test process: each test opens its own context.

    Starting Playwright's driver and Chromium costs ~2 s of CPU here; the UI tests share them
    and run in the session's event loop (``pytestmark`` in each tests/ui module)."""
    _need_browser()
    async with async_playwright() as driver:
        launched = await driver.chromium.launch(executable_path=CHROMIUM, headless=True)
        try:
            yield launched
        finally:
            await launched.close()


@dataclass
class Dashboard:
    """One browser tab on the node's /ui, and what went wrong in it."""

    page: Page
    problems: Problems
    loads: list[Any]

    async def sign_in(self, token: str) -> None:
        """Sign in with ``token`` and wait for the event stream to be live."""
        await self.page.fill("#token", token)
        await self.page.click("#signin-form button[type=submit]")
        await self.page.locator("#live.on").wait_for()


@contextlib.asynccontextmanager
async def open_tab(
    browser: Browser, url: str, width: int = 1360, height: int = 900
) -> AsyncIterator[Dashboard]:
    """A fresh tab on ``url`` at this viewport that collects console and page errors."""
    context = await browser.new_context(viewport={"width": width, "height": height})
    context.set_default_timeout(SHOWN_WITHIN_MS)
    page = await context.new_page()
    problems = Problems()
    loads: list[Any] = []
    page.on("console", problems.console)
    page.on("pageerror", problems.page_error)
    page.on("load", lambda loaded: loads.append(loaded))
    try:
        await page.goto(url)
        yield Dashboard(page, problems, loads)
    finally:
        await context.close()


@pytest_asyncio.fixture(loop_scope="session")
async def dashboard(browser: Browser, served: Served) -> AsyncIterator[Dashboard]:
    """A fresh tab on /ui that collects console errors and page errors; none may occur."""
    async with open_tab(browser, f"{served.url}/ui") as board:
        await board.page.locator("#signin").wait_for()
        yield board
        assert board.problems.messages == []
