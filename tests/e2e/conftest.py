"""Fixtures of the real-process tests: a data directory that leaves no server behind, a receiver."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from .support import WebhookReceiver, kill_orphans


@pytest.fixture
def data_dir(tmp_path: Path) -> Iterator[Path]:
    """A node data directory; no nats-server of it may survive the test."""
    path = tmp_path / "data"
    try:
        yield path
    finally:
        kill_orphans(path)


@pytest.fixture
async def receiver() -> AsyncIterator[WebhookReceiver]:
    """A webhook receiver that answers 500 once, then 200."""
    hook = WebhookReceiver(fail_first=1)
    await hook.start()
    try:
        yield hook
    finally:
        await hook.close()
