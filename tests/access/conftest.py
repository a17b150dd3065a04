"""Fixtures of the access tests: a running test JWT issuer and a verifier bound to it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from access.issuer import AUDIENCE, JwtIssuer
from bzzz.access.jwt import JwtVerifier


@pytest.fixture
def jwt_issuer() -> Iterator[JwtIssuer]:
    """A JWT issuer serving its metadata and JWKS on loopback for one test."""
    with JwtIssuer() as issuer:
        yield issuer


@pytest.fixture
async def verifier(jwt_issuer: JwtIssuer) -> AsyncIterator[JwtVerifier]:
    """A verifier of ``jwt_issuer``'s tokens for ``AUDIENCE``."""
    async with JwtVerifier(jwt_issuer.url, AUDIENCE) as verifier:
        yield verifier
