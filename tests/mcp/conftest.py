"""Fixtures for the MCP layer: the server of a running node, and in-memory legacy clients.

This directory has no ``__init__.py`` on purpose: as a package it would be imported as ``mcp``
(pytest's default import mode puts ``tests/`` on ``sys.path``) and shadow the MCP SDK.
"""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client
from mcp_checks import ClientFactory

from bzzz.mcp.server import BzzzMCP, build_server
from bzzz.mcp.sessions import SessionRegistry
from bzzz.node.core import Node


@pytest.fixture
def mcp_server(node: Node) -> tuple[BzzzMCP, SessionRegistry]:
    """The MCP server of the running test node, and its session registry."""
    return build_server(node)


@pytest.fixture
def connect(mcp_server: tuple[BzzzMCP, SessionRegistry]) -> ClientFactory:
    """Open a new in-memory client (a new MCP session) in the legacy era, as real hosts do.

    Tests enter it with ``async with`` themselves: the client runs an anyio task group, which
    must be entered and left in the same task (an async yield fixture is not).
    """
    server, _ = mcp_server

    def factory(**kwargs: Any) -> Client:
        return Client(server, mode="legacy", **kwargs)

    return factory
