"""JwtVerifier against a real issuer on loopback: grants, every refusal, key rotation, discovery."""

from __future__ import annotations

import asyncio
import base64
import json
import sys
from datetime import UTC, datetime
from typing import Any

import pytest
from mcp.client.auth.utils import build_oauth_authorization_server_metadata_discovery_urls

from access.issuer import AUDIENCE, JwtIssuer
from bzzz.access.jwt import JwtIdentity, JwtRejected, JwtVerifier, metadata_urls, parse_jwks
from bzzz.errors import ConfigError


class Monotonic:
    """A monotonic clock that moves only when told to."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def refused(verifier: JwtVerifier, token: str) -> str:
    """The reason a token is refused (failing the test if it is accepted)."""
    with pytest.raises(JwtRejected) as caught:
        await verifier.verify(token)
    assert not token or token not in str(caught.value)
    return caught.value.reason


# --- grants ------------------------------------------------------------------------------------


async def test_a_good_token_gives_its_subject_and_grants(
    jwt_issuer: JwtIssuer, verifier: JwtVerifier
) -> None:
    scopes = ["openid", "bzzz:read", "bzzz:write", "bzzz:project:p1", "bzzz:project:*"]
    token = jwt_issuer.mint("alice", scopes=[*scopes, "bzzz:role:reviewer"], jti="t-1")

    identity = await verifier.verify(token)

    claims = jwt_issuer.claims("alice")
    assert identity == JwtIdentity(
        subject="alice",
        issuer=jwt_issuer.url,
        projects=frozenset({"p1", "*"}),
        roles=frozenset({"reviewer"}),
        scope="write",
        expires_at=identity.expires_at,
        token_id="t-1",
    )
    assert abs(identity.expires_at.timestamp() - claims["exp"]) <= 5
    assert identity.expires_at.tzinfo is UTC


async def test_scp_as_a_list_and_an_audience_list_are_read(
    jwt_issuer: JwtIssuer, verifier: JwtVerifier
) -> None:
    token = jwt_issuer.mint(
        "svc",
        aud=["https://other.example", AUDIENCE],
        scopes=["bzzz:admin", "bzzz:read", "bzzz:role:*"],
        scope_claim="scp",
    )

    identity = await verifier.verify(token)

    assert (identity.scope, identity.roles, identity.projects) == (
        "admin",
        frozenset({"*"}),
        frozenset(),
    )
    assert identity.token_id is None


async def test_grants_without_a_level_read_only(
    jwt_issuer: JwtIssuer, verifier: JwtVerifier
) -> None:
    identity = await verifier.verify(jwt_issuer.mint(scopes=["bzzz:project:p2"]))

    assert (identity.scope, identity.projects) == ("read", frozenset({"p2"}))


@pytest.mark.parametrize("algorithm", ["ES256", "EdDSA"])
async def test_ec_and_ed25519_issuers_are_verified(algorithm: str) -> None:
    with JwtIssuer(algorithm=algorithm) as issuer:
        async with JwtVerifier(issuer.url, AUDIENCE) as verifier:
            identity = await verifier.verify(issuer.mint("bob", scopes=["bzzz:write"]))
            tampered = issuer.tamper(issuer.mint("bob"), sub="mallory")
            assert await refused(verifier, tampered) == "bad signature"

    assert (identity.subject, identity.scope) == ("bob", "write")


# --- refusals ----------------------------------------------------------------------------------

REFUSALS: dict[str, tuple[dict[str, Any], str]] = {
    "wrong audience": ({"aud": "https://other.example/mcp"}, "wrong audience"),
    "wrong audience list": ({"aud": ["https://a.example", "https://b.example"]}, "wrong audience"),
    "no audience": ({"aud": None}, "missing claim"),
    "wrong issuer": ({"iss": "http://127.0.0.1:1/elsewhere"}, "wrong issuer"),
    "expired": ({"exp": -120}, "expired"),
    "no expiry": ({"exp": None}, "missing claim"),
    "not yet valid": ({"nbf": 3600}, "not yet valid"),
    "no bzzz scope": ({"scopes": ["openid", "profile", "bzzz:project:"]}, "no bzzz grant"),
    "no scope at all": ({"scopes": None}, "no bzzz grant"),
}


@pytest.mark.parametrize("case", list(REFUSALS))
async def test_a_token_with_bad_claims_is_refused_with_its_reason(
    case: str, jwt_issuer: JwtIssuer, verifier: JwtVerifier
) -> None:
    claims, reason = REFUSALS[case]

    assert await refused(verifier, jwt_issuer.mint(**claims)) == reason


async def test_a_token_without_subject_is_refused(
    jwt_issuer: JwtIssuer, verifier: JwtVerifier
) -> None:
    assert await refused(verifier, jwt_issuer.mint(None)) == "missing claim"


async def test_times_within_the_leeway_are_accepted(
    jwt_issuer: JwtIssuer, verifier: JwtVerifier
) -> None:
    identity = await verifier.verify(jwt_issuer.mint(exp=-5, nbf=5))

    assert identity.expires_at < datetime.now(UTC)


async def test_a_key_the_issuer_never_published_is_unknown(
    jwt_issuer: JwtIssuer, verifier: JwtVerifier
) -> None:
    assert await refused(verifier, jwt_issuer.mint(kid="ghost")) == "unknown key"


async def test_a_tampered_token_has_a_bad_signature(
    jwt_issuer: JwtIssuer, verifier: JwtVerifier
) -> None:
    token = jwt_issuer.mint(scopes=["bzzz:read", "bzzz:project:p1"])

    forged = jwt_issuer.tamper(token, scope="bzzz:admin bzzz:project:*")

    assert await refused(verifier, forged) == "bad signature"
    assert (await verifier.verify(token)).scope == "read"


async def test_a_signature_by_another_key_under_a_known_kid_is_bad(
    jwt_issuer: JwtIssuer, verifier: JwtVerifier
) -> None:
    with JwtIssuer() as impostor:
        forged = impostor.mint(kid=jwt_issuer.kid, iss=jwt_issuer.url)

    assert await refused(verifier, forged) == "bad signature"


async def test_forged_algorithms_are_refused_before_any_key_is_fetched(
    jwt_issuer: JwtIssuer, verifier: JwtVerifier
) -> None:
    none = jwt_issuer.unsigned(scopes=["bzzz:admin"])
    confused = jwt_issuer.hs256_with_public_key(scopes=["bzzz:admin"])

    assert await refused(verifier, none) == "unsupported algorithm"
    assert await refused(verifier, confused) == "unsupported algorithm"
    assert jwt_issuer.count("/jwks") == 0


def test_only_signing_keys_of_accepted_algorithms_are_kept(jwt_issuer: JwtIssuer) -> None:
    good = jwt_issuer.jwks()["keys"][0]
    document = {
        "keys": [
            {**good, "kid": "rs512", "alg": "RS512"},
            {**good, "kid": "enc", "use": "enc"},
            {"kty": "oct", "kid": "hmac", "k": "c2VjcmV0"},
            {"kty": "EC", "kid": "p384", "crv": "P-384", "x": "AA", "y": "AA"},
            {"kty": "RSA", "kid": "broken"},
            "not a key",
            good,
        ]
    }

    assert [key.key_id for key in parse_jwks(document)] == [good["kid"]]
    with pytest.raises(JwtRejected):
        parse_jwks({"keys": "none"})


ODD_CLAIMS: dict[str, tuple[dict[str, Any], str]] = {
    "exp not a number": ({"exp": "soon"}, "malformed token"),
    "sub not a string": ({"sub": 42}, "invalid token"),
    "empty sub": ({"sub": ""}, "missing claim"),
    "iss a list": ({"iss": ["x"]}, "wrong issuer"),
    "scope a number": ({"scope": 7}, "no bzzz grant"),
    "scp of numbers": ({"scope": None, "scp": [1, 2]}, "no bzzz grant"),
}


@pytest.mark.parametrize("case", list(ODD_CLAIMS))
async def test_signed_claims_of_the_wrong_shape_are_refused(
    case: str, jwt_issuer: JwtIssuer, verifier: JwtVerifier
) -> None:
    changes, reason = ODD_CLAIMS[case]
    claims = {**jwt_issuer.claims(scopes=["bzzz:write"]), **changes}

    token = jwt_issuer.sign({name: value for name, value in claims.items() if value is not None})

    assert await refused(verifier, token) == reason


def _segment(value: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()


ODD_TOKENS = [
    "",
    "garbage",
    "a.b.c",
    "a.b",
    "a.b.c.d.e",
    "x" * 20000,
    f"{_segment([1])}.{_segment({})}.sig",
    f"{_segment({'alg': ['RS256']})}.{_segment({})}.sig",
    f"{_segment({'alg': 'RS256', 'kid': 7})}.{_segment({})}.sig",
    f"{_segment({'alg': 'RS256'})}.!!!.sig",
    "\u00e9\u00e9.\u00e9.\u00e9",
]


@pytest.mark.parametrize("token", ODD_TOKENS)
async def test_something_that_is_no_jwt_is_refused(token: str, verifier: JwtVerifier) -> None:
    reasons = {"malformed token", "unsupported algorithm", "unknown key", "bad signature"}
    assert await refused(verifier, token) in reasons


def test_an_issuer_over_plain_http_off_loopback_is_a_config_error() -> None:
    with pytest.raises(ConfigError):
        JwtVerifier("http://issuer.example", AUDIENCE)
    with pytest.raises(ConfigError):
        JwtVerifier("https://issuer.example", "")


# --- keys: rotation, refresh, rate limit -------------------------------------------------------


async def test_a_rotated_key_is_fetched_once_then_accepted(
    jwt_issuer: JwtIssuer, verifier: JwtVerifier
) -> None:
    old = jwt_issuer.mint("alice")
    await verifier.verify(old)
    assert jwt_issuer.count("/jwks") == 1

    jwt_issuer.rotate()
    new = jwt_issuer.mint("alice")
    identity = await verifier.verify(new)
    await verifier.verify(new)

    assert identity.subject == "alice"
    assert jwt_issuer.count("/jwks") == 2
    assert await refused(verifier, old) == "unknown key"


async def test_unknown_kids_refresh_the_keys_at_most_once_per_interval(
    jwt_issuer: JwtIssuer,
) -> None:
    clock = Monotonic()
    async with JwtVerifier(jwt_issuer.url, AUDIENCE, monotonic=clock) as verifier:
        await verifier.verify(jwt_issuer.mint())
        ghost = jwt_issuer.mint(kid="ghost")
        assert await refused(verifier, ghost) == "unknown key"
        assert jwt_issuer.count("/jwks") == 2

        jwt_issuer.publish("ghost")
        clock.now += 9
        for n in range(20):
            assert await refused(verifier, jwt_issuer.mint(kid=f"random-{n}")) == "unknown key"
        assert await refused(verifier, ghost) == "unknown key"
        assert jwt_issuer.count("/jwks") == 2

        clock.now += 1
        identity = await verifier.verify(ghost)

    assert identity.subject == "alice"
    assert jwt_issuer.count("/jwks") == 3


async def test_concurrent_unknown_kids_share_one_refresh(
    jwt_issuer: JwtIssuer, verifier: JwtVerifier
) -> None:
    await verifier.verify(jwt_issuer.mint())
    jwt_issuer.rotate(keep_old=True)
    token = jwt_issuer.mint("carol")

    async with asyncio.timeout(10):
        identities = await asyncio.gather(*(verifier.verify(token) for _ in range(20)))

    assert {identity.subject for identity in identities} == {"carol"}
    assert jwt_issuer.count("/jwks") == 2


async def test_the_key_set_is_fetched_again_after_its_ttl(jwt_issuer: JwtIssuer) -> None:
    clock = Monotonic()
    async with JwtVerifier(jwt_issuer.url, AUDIENCE, jwks_ttl=300, monotonic=clock) as verifier:
        token = jwt_issuer.mint()
        await verifier.verify(token)
        clock.now += 299
        await verifier.verify(token)
        assert jwt_issuer.count("/jwks") == 1

        clock.now += 1
        await verifier.verify(token)

    assert jwt_issuer.count("/jwks") == 2
    assert jwt_issuer.count("/.well-known/oauth-authorization-server") == 1


# --- the issuer unreachable, and discovery -----------------------------------------------------


async def test_an_issuer_that_is_down_is_unreachable() -> None:
    issuer = JwtIssuer().start()
    token = issuer.mint()
    issuer.stop()
    clock = Monotonic()

    async with JwtVerifier(issuer.url, AUDIENCE, monotonic=clock) as verifier:
        assert await refused(verifier, token) == "issuer unreachable"
        clock.now += 1
        assert await refused(verifier, token) == "issuer unreachable"


async def test_cached_keys_outlive_an_issuer_outage() -> None:
    clock = Monotonic()
    issuer = JwtIssuer().start()
    try:
        verifier = JwtVerifier(issuer.url, AUDIENCE, monotonic=clock)
        await verifier.verify(issuer.mint())
    finally:
        issuer.stop()

    clock.now += 3600
    identity = await verifier.verify(issuer.mint("dave"))
    assert await refused(verifier, issuer.mint(kid="ghost")) == "unknown key"
    await verifier.aclose()

    assert identity.subject == "dave"


async def test_a_closed_verifier_keeps_its_cached_keys_and_fetches_nothing(
    jwt_issuer: JwtIssuer,
) -> None:
    warm = JwtVerifier(jwt_issuer.url, AUDIENCE)
    await warm.verify(jwt_issuer.mint())
    await warm.aclose()
    cold = JwtVerifier(jwt_issuer.url, AUDIENCE)
    await cold.aclose()

    identity = await warm.verify(jwt_issuer.mint("heidi"))

    assert identity.subject == "heidi"
    assert await refused(warm, jwt_issuer.mint(kid="ghost")) == "unknown key"
    assert await refused(cold, jwt_issuer.mint()) == "issuer unreachable"
    assert jwt_issuer.count("/jwks") == 1


async def test_a_missing_key_set_leaves_the_issuer_unreachable(jwt_issuer: JwtIssuer) -> None:
    jwt_issuer.metadata_overrides = {"jwks_uri": f"{jwt_issuer.url}/gone"}

    async with JwtVerifier(jwt_issuer.url, AUDIENCE) as verifier:
        assert await refused(verifier, jwt_issuer.mint()) == "issuer unreachable"


async def test_openid_configuration_is_the_fallback() -> None:
    with JwtIssuer(serve={"openid"}) as issuer:
        async with JwtVerifier(issuer.url, AUDIENCE) as verifier:
            identity = await verifier.verify(issuer.mint("erin"))

        assert issuer.requests == [
            "/.well-known/oauth-authorization-server",
            "/.well-known/openid-configuration",
            "/jwks",
        ]
    assert identity.subject == "erin"


@pytest.mark.parametrize("serve", [{"oauth"}, {"openid"}])
async def test_an_issuer_with_a_path_is_found_by_rfc_8414_rules(serve: set[str]) -> None:
    with JwtIssuer(path="/tenant-a", serve=serve) as issuer:
        async with JwtVerifier(issuer.url, AUDIENCE) as verifier:
            identity = await verifier.verify(issuer.mint("frank"))

        assert identity.issuer == issuer.url
        assert issuer.requests[0] == "/.well-known/oauth-authorization-server/tenant-a"
        assert issuer.requests[-1] == "/tenant-a/jwks"


async def test_metadata_naming_another_issuer_is_refused(jwt_issuer: JwtIssuer) -> None:
    jwt_issuer.metadata_overrides = {"issuer": "https://evil.example"}

    async with JwtVerifier(jwt_issuer.url, AUDIENCE) as verifier:
        assert await refused(verifier, jwt_issuer.mint()) == "issuer metadata invalid"
    assert jwt_issuer.count("/jwks") == 0


async def test_no_metadata_at_all_leaves_the_issuer_unreachable() -> None:
    with JwtIssuer(serve=set()) as issuer:
        async with JwtVerifier(issuer.url, AUDIENCE) as verifier:
            assert await refused(verifier, issuer.mint()) == "issuer unreachable"


@pytest.mark.parametrize(
    "issuer", ["https://as.example", "https://as.example/", "https://as.example/t/1"]
)
def test_metadata_urls_follow_the_mcp_clients_order(issuer: str) -> None:
    expected = build_oauth_authorization_server_metadata_discovery_urls(issuer, issuer)

    assert metadata_urls(issuer) == expected


CHILD = """
import asyncio, sys
from bzzz.access.jwt import JwtVerifier

async def main():
    async with JwtVerifier(sys.argv[1], sys.argv[2]) as verifier:
        identity = await verifier.verify(sys.stdin.read())
    print(identity.subject, identity.scope, *sorted(identity.projects))

asyncio.run(main())
"""


async def test_another_process_verifies_the_issuers_tokens(jwt_issuer: JwtIssuer) -> None:
    token = jwt_issuer.mint("grace", scopes=["bzzz:admin", "bzzz:project:p9"])

    child = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        CHILD,
        jwt_issuer.url,
        AUDIENCE,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    async with asyncio.timeout(30):
        out, _ = await child.communicate(token.encode())

    assert child.returncode == 0
    assert out.decode().split() == ["grace", "admin", "p9"]
    assert jwt_issuer.count("/jwks") == 1


async def test_a_verified_token_is_remembered_until_the_keys_change(
    jwt_issuer: JwtIssuer, verifier: JwtVerifier
) -> None:
    token = jwt_issuer.mint("alice", scopes=["bzzz:write", "bzzz:project:p1"])
    first = await verifier.verify(token)
    again = await verifier.verify(token)
    assert again == first
    assert jwt_issuer.count("/jwks") == 1
    # Only the very token is remembered: another one with its signature is checked, and fails.
    assert await refused(verifier, jwt_issuer.tamper(token, sub="mallory")) == "bad signature"
    # A rotation drops what was remembered (test_a_rotated_key_… shows the old token refused).
