"""Fixtures of the real-process tests: a data directory that leaves no server behind, a receiver."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from .support import WebhookReceiver


@pytest.fixture
async def receiver() -> AsyncIterator[WebhookReceiver]:
    """A webhook receiver that answers 500 once, then 200."""
    hook = WebhookReceiver(fail_first=1)
    await hook.start()
    try:
        yield hook
    finally:
        await hook.close()
