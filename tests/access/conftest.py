"""Fixtures of the access tests: a data directory that leaves no nats-server behind."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from e2e.support import kill_orphans


@pytest.fixture
def data_dir(tmp_path: Path) -> Iterator[Path]:
    """A node data directory; no nats-server of it may survive the test."""
    path = tmp_path / "data"
    try:
        yield path
    finally:
        kill_orphans(path)
