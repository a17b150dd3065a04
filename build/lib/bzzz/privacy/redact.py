"""PII redaction: personal data and secrets replaced by typed placeholders (``<EMAIL>``, …).

Detection of e-mail addresses, phone numbers (libphonenumber), payment cards (Luhn-checked),
IBANs (mod-97-checked), IP addresses and US social security numbers is Microsoft Presidio's: its
pattern recognizers, used one by one, without its ``AnalyzerEngine`` (which insists on a spaCy
model that cannot be downloaded here). Credentials and person names are this package's own
(``secrets.py``, ``names.py``). Redaction is idempotent: a placeholder is never found again.

Presidio (and spaCy under it) takes 0.5-2 s to import, so it is loaded on the first redaction,
not when this module is imported.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import json
import re
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

from bzzz.privacy.names import find_names
from bzzz.privacy.secrets import find_secrets
from bzzz.privacy.spans import CARD, EMAIL, IBAN, IP_ADDRESS, PHONE, US_SSN, Span

T = TypeVar("T")
Finder = Callable[[str], Iterable[Span]]

# Where phone numbers without a +country prefix are looked for (each region costs a pass).
PHONE_REGIONS = ("US", "GB", "DE", "FR")
# Presidio's own scores: weaker finds (a bare 9-digit number as an SSN: 0.05) are dropped.
MIN_SCORE = 0.3
_DIGITS = re.compile(r"\d")
_EXTENSION = re.compile(r"(?i)[\s,;]*(?:ext\.?|extension|x|#)\s*\d+$")
_PRESIDIO_KINDS = {
    "EMAIL_ADDRESS": EMAIL,
    "PHONE_NUMBER": PHONE,
    "CREDIT_CARD": CARD,
    "IBAN_CODE": IBAN,
    "IP_ADDRESS": IP_ADDRESS,
    "US_SSN": US_SSN,
}


def _digit_count(text: str, at_least: int) -> bool:
    # Stops at the ``at_least``-th digit: a long text is not scanned to its end.
    return any(count >= at_least for count, _ in enumerate(_DIGITS.finditer(text), 1))


def _phone_alone(text: str, start: int, end: int) -> bool:
    """A phone number of 7-15 digits that is not a piece of an id (``ORD-2026-004821``)."""
    digits = sum(c.isdigit() for c in _EXTENSION.sub("", text[start:end]))
    if not 7 <= digits <= 15:
        return False  # a short code (an extension), or longer than E.164 allows (a card)
    before = text[max(start - 2, 0) : start]
    after = text[end : end + 1]
    glued_before = before[-1:].isalnum() or (before[-1:] in "-_#/" and before[:1].isalnum())
    # Only a letter or digit right after: ``… 136-51-9864`` may follow a number that the
    # matcher ran into (an SSN after a phone number); the overlap is resolved later.
    return not (before and glued_before) and not after[:1].isalnum()


class _Recognizer:
    """One Presidio recognizer, with a cheap test that skips texts it cannot match."""

    def __init__(self, recognizer: Any, worth_trying: Callable[[str], bool]) -> None:
        self._recognizer = recognizer
        self._entities = list(recognizer.supported_entities)
        self._worth_trying = worth_trying

    def __call__(self, text: str) -> Iterator[Span]:
        if not self._worth_trying(text):
            return
        for found in self._recognizer.analyze(text, self._entities, None):
            kind = _PRESIDIO_KINDS.get(found.entity_type)
            if kind is None or found.score < MIN_SCORE:
                continue
            if kind == PHONE and not _phone_alone(text, found.start, found.end):
                continue
            if kind == CARD and text[found.start - 1 : found.start] == "+":
                continue  # +4915123451564 is a phone number that happens to pass Luhn
            yield Span(found.start, found.end, kind, float(found.score))


def _presidio_finders(phone_regions: tuple[str, ...]) -> list[Finder]:
    # Imported here: Presidio imports spaCy, which takes seconds (see the module docstring).
    import tldextract
    from presidio_analyzer.predefined_recognizers import (
        CreditCardRecognizer,
        EmailRecognizer,
        IbanRecognizer,
        IpRecognizer,
        PhoneRecognizer,
        UsSsnRecognizer,
    )

    # The shipped public-suffix snapshot: tldextract's default fetches the list over the
    # network on first use (and logs a traceback when it cannot).
    suffixes = tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None)

    class OfflineEmailRecognizer(EmailRecognizer):
        def validate_result(self, pattern_text: str) -> bool:
            return bool(suffixes(pattern_text.rpartition("@")[2]).fqdn)

    cards = CreditCardRecognizer()
    return [
        _Recognizer(OfflineEmailRecognizer(), lambda text: "@" in text),
        _Recognizer(cards, lambda text: _digit_count(text, 12)),
        _TwoSeriesCards(cards.validate_result),
        _Recognizer(IbanRecognizer(), lambda text: _digit_count(text, 8)),
        _Recognizer(UsSsnRecognizer(), lambda text: _digit_count(text, 9)),
        _Recognizer(
            IpRecognizer(), lambda text: ("." in text or ":" in text) and _digit_count(text, 2)
        ),
        _Recognizer(
            PhoneRecognizer(supported_regions=phone_regions), lambda text: _digit_count(text, 7)
        ),
    ]


def resolve(text: str, spans: Iterable[Span]) -> list[Span]:
    """Non-overlapping spans in text order.

    Where finds overlap, the higher score (then the longer span) keeps its extent and the
    other keeps what is left of it, so every character a detector found stays masked and two
    values side by side keep their own kinds.
    """
    chosen: list[Span] = []  # in text order, never overlapping
    for span in sorted(spans, key=lambda s: (-s.score, s.start - s.end, s.start)):
        for piece in _uncovered(text, span, chosen):
            bisect.insort(chosen, piece, key=lambda s: s.start)
    return chosen


def _uncovered(text: str, span: Span, chosen: list[Span]) -> list[Span]:
    """What is left of ``span`` outside the chosen spans, trimmed of white space."""
    first = max(bisect.bisect_left(chosen, span.start, key=lambda s: s.start) - 1, 0)
    parts, at = [], span.start
    for taken in itertools.islice(chosen, first, None):
        if taken.start >= span.end:
            break
        if taken.end <= at:
            continue
        parts.append((at, taken.start))
        at = taken.end
    parts.append((at, span.end))
    pieces = []
    for start, end in parts:
        piece = text[start:end]
        if start < end and any(c.isalnum() for c in piece):
            start += len(piece) - len(piece.lstrip())
            end -= len(piece) - len(piece.rstrip())
            pieces.append(Span(start, end, span.kind, span.score))
    return pieces


class _TwoSeriesCards:
    """Mastercard's 2221-2720 range, which Presidio's card pattern does not cover."""

    PATTERN = re.compile(r"(?<![\d-])2[2-7]\d\d(?:[ -]?\d{4}){3}(?![\d-])")

    def __init__(self, luhn: Any) -> None:
        self._luhn = luhn

    def __call__(self, text: str) -> Iterator[Span]:
        for match in self.PATTERN.finditer(text):
            if 2221 <= int(match.group()[:4]) <= 2720 and self._luhn(match.group()):
                yield Span(match.start(), match.end(), CARD, 1.0)


class Redactor:
    """Finds personal data and secrets in text and masks them with typed placeholders."""

    def __init__(self, *, names: bool = True, phone_regions: tuple[str, ...] = PHONE_REGIONS):
        self._finders: list[Finder] = [find_secrets, *_presidio_finders(phone_regions)]
        if names:
            self._finders.append(find_names)

    def find(self, text: str) -> list[Span]:
        """What would be masked, in text order."""
        return resolve(text, [span for finder in self._finders for span in finder(text)])

    def redact(self, text: str) -> str:
        """The text with every find replaced by its placeholder (``<EMAIL>``, ``<CARD>``…)."""
        spans = self.find(text)
        if not spans:
            return text
        parts: list[str] = []
        at = 0
        for span in spans:
            parts += [text[at : span.start], span.placeholder]
            at = span.end
        parts.append(text[at:])
        return "".join(parts)

    def redact_data(self, value: T) -> T:
        """JSON-like data with every string value redacted, recursively; keys stay."""
        result: Any
        if isinstance(value, str):
            result = self.redact(value)
        elif isinstance(value, dict):
            result = {key: self.redact_data(item) for key, item in value.items()}
        elif isinstance(value, list | tuple):
            result = type(value)(self.redact_data(item) for item in value)
        else:
            result = value
        return result  # type: ignore[no-any-return]  # same shape as the value given

    def redact_messages(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """OpenAI chat messages with their text redacted: content, content parts, tool calls.

        Roles, names, tool call ids and function names stay, so the conversation still holds
        together; the messages given are not changed.
        """
        return [self._message(message) for message in messages]

    def _message(self, message: dict[str, Any]) -> dict[str, Any]:
        copy = dict(message)
        content = copy.get("content")
        if isinstance(content, str):
            copy["content"] = self.redact(content)
        elif isinstance(content, list):
            copy["content"] = [self._part(part) for part in content]
        if isinstance(copy.get("tool_calls"), list):
            copy["tool_calls"] = [self._tool_call(call) for call in copy["tool_calls"]]
        return copy

    def _part(self, part: Any) -> Any:
        if isinstance(part, dict) and isinstance(part.get("text"), str):
            return part | {"text": self.redact(part["text"])}
        return part

    def _tool_call(self, call: Any) -> Any:
        function = call.get("function") if isinstance(call, dict) else None
        if isinstance(function, dict) and isinstance(function.get("arguments"), str):
            arguments = self._arguments(function["arguments"])
            return call | {"function": function | {"arguments": arguments}}
        return call

    def _arguments(self, arguments: str) -> str:
        # Redacted as data, so that a mask can never break the JSON's quoting.
        try:
            decoded = json.loads(arguments)
        except ValueError:
            return self.redact(arguments)
        return json.dumps(self.redact_data(decoded))


@functools.cache
def default_redactor() -> Redactor:
    """The process's shared redactor (built, and Presidio imported, on first use)."""
    return Redactor()


def redact(text: str) -> str:
    """``text`` with personal data and secrets masked, by the shared redactor."""
    return default_redactor().redact(text)


def redact_data(value: T) -> T:
    """JSON-like data with every string masked, by the shared redactor."""
    return default_redactor().redact_data(value)


def redact_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """OpenAI chat messages with their text masked, by the shared redactor."""
    return default_redactor().redact_messages(messages)
