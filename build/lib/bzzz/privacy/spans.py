"""What a detector finds: a typed span of text, and the placeholder that replaces it."""

from __future__ import annotations

from dataclasses import dataclass

EMAIL = "EMAIL"
PHONE = "PHONE"
CARD = "CARD"
IBAN = "IBAN"
IP_ADDRESS = "IP_ADDRESS"
US_SSN = "US_SSN"
API_KEY = "API_KEY"
SECRET = "SECRET"
PERSON = "PERSON"

KINDS = (EMAIL, PHONE, CARD, IBAN, IP_ADDRESS, US_SSN, API_KEY, SECRET, PERSON)
# The kinds a pattern with a checksum or a fixed shape finds; person names are a guess.
STRUCTURED_KINDS = (EMAIL, PHONE, CARD, IBAN, IP_ADDRESS, US_SSN, API_KEY, SECRET)


@dataclass(frozen=True, slots=True)
class Span:
    """``text[start:end]`` is personal data of ``kind``; ``score`` ranks overlapping finds."""

    start: int
    end: int
    kind: str
    score: float

    @property
    def placeholder(self) -> str:
        """The typed mask, e.g. ``<EMAIL>``."""
        return f"<{self.kind}>"

    def overlaps(self, other: Span) -> bool:
        """The two spans share at least one character."""
        return self.start < other.end and other.start < self.end
