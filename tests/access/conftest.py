"""Fixtures of the access tests: a running test JWT issuer, a verifier bound to it, and a data
directory that leaves no nats-server behind."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from access.issuer import AUDIENCE, JwtIssuer, jwt_issuer  # noqa: F401 - the fixture
from bzzz.access.jwt import JwtVerifier


@pytest.fixture
async def verifier(jwt_issuer: JwtIssuer) -> AsyncIterator[JwtVerifier]:  # noqa: F811
    """A verifier of ``jwt_issuer``'s tokens for ``AUDIENCE``."""
    async with JwtVerifier(jwt_issuer.url, AUDIENCE) as verifier:
        yield verifier
