"""API keys and secrets: well-known token prefixes, JWTs, PEM private keys, high-entropy tokens.

Presidio has no recognizer for credentials, so these are plain regular expressions. A prefixed
key is an ``API_KEY``; a private key block, a password in a ``key=value`` pair and a token that
only looks random (no known prefix) are a ``SECRET``.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterator

from bzzz.privacy.spans import API_KEY, SECRET, Span

# A token's own characters: what the prefix rules and the entropy rule take as one token.
_TOKEN_CHARS = r"A-Za-z0-9_\-"
_END = rf"(?![{_TOKEN_CHARS}])"
_START = rf"(?<![{_TOKEN_CHARS}])"

PREFIXED_KEYS: tuple[tuple[str, str], ...] = (
    ("openai", r"sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}"),
    ("anthropic", r"sk-ant-[A-Za-z0-9_\-]{20,}"),
    ("stripe", r"(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}"),
    ("github", r"gh[pousr]_[A-Za-z0-9]{30,}"),
    ("github_pat", r"github_pat_[A-Za-z0-9_]{22,}"),
    ("slack", r"xox[abposr]-[A-Za-z0-9\-]{10,}"),
    ("aws", r"(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}"),
    ("google", r"AIza[0-9A-Za-z_\-]{35}"),
    ("bzzz", r"bzzz_[A-Za-z0-9_\-]{32,}"),
    ("jwt", r"eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"),
)
_PREFIXED = re.compile(
    "|".join(rf"{_START}{pattern}{_END}" for _, pattern in PREFIXED_KEYS),
)
_PEM = re.compile(
    r"-----BEGIN ((?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?)-----.*?-----END \1-----"
    r"|-----BEGIN ((?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?)-----[A-Za-z0-9+/=\s\\]*",
    re.DOTALL,
)
# ``password = hunter2``, ``"client_secret": "…"``: the value is the secret, the name stays.
_ASSIGNED = re.compile(
    r"(?i)(?<![a-z0-9])(?:password|passwd|pwd|passphrase|secret|client_secret|api[_-]?key"
    r"|access[_-]?key|auth[_-]?token|access[_-]?token|secret[_-]?key|private[_-]?key)"
    r"(?![a-z0-9])[\"']?\s*[:=]\s*[\"']?"
    r"(?P<value>[^\s\"',;<>]{6,})"
)
# ``postgresql://app:s3cret@db/prod``: the password of a URL's user info.
_URL_PASSWORD = re.compile(r"(?i)\b[a-z][a-z0-9+.\-]*://[^\s:/@]+:(?P<value>[^\s:/@]+)@")
# Base64's ``=`` only as padding: ``NAME=value`` is a name and a value, not one token.
_CANDIDATE = re.compile(rf"{_START}[{_TOKEN_CHARS}+/]{{24,}}={{0,2}}(?![{_TOKEN_CHARS}+/=])")

_PARTS = re.compile(r"[-_./]")
MIN_RANDOM_LENGTH = 20
MIN_ENTROPY = 3.7  # bits per character; random base62 text of 24+ characters has ~4.3


def entropy(token: str) -> float:
    """Shannon entropy of the token's characters, in bits per character."""
    counts = Counter(token)
    size = len(token)
    return -sum(n / size * math.log2(n / size) for n in counts.values())


def looks_random(token: str) -> bool:
    """Upper case, lower case and digits mixed, with the entropy of a random string.

    Hex (git SHAs, UUIDs, digests) has no upper case letters and identifiers in camel case
    have few digits: neither is taken for a secret.
    """
    digits = sum(c.isdigit() for c in token)
    upper = sum(c.isupper() for c in token)
    lower = sum(c.islower() for c in token)
    if digits < 3 or upper < 3 or lower < 3:
        return False
    return entropy(token) >= MIN_ENTROPY


def find_secrets(text: str) -> Iterator[Span]:
    """Every credential in the text (spans may overlap; the redactor resolves overlaps)."""
    for match in _PEM.finditer(text):
        yield Span(match.start(), match.end(), SECRET, 1.0)
    for match in _PREFIXED.finditer(text):
        yield Span(match.start(), match.end(), API_KEY, 1.0)
    for match in _ASSIGNED.finditer(text):
        start, end = match.span("value")
        yield Span(start, end, SECRET, 0.9)
    for match in _URL_PASSWORD.finditer(text):
        yield Span(match.start("value"), match.end("value"), SECRET, 0.9)
    for match in _CANDIDATE.finditer(text):
        # Judged on its longest part: ``msg-01J…`` (a ULID) is an id, not a secret.
        core = max(_PARTS.split(match.group()), key=len)
        if len(core) >= MIN_RANDOM_LENGTH and looks_random(core):
            yield Span(match.start(), match.end(), SECRET, 0.7)
