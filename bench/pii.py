"""PII redaction: recall and precision per kind on a generated, labelled corpus; throughput.

The corpus is generated with a fixed seed (the same snippets every run): e-mail addresses,
phone numbers of several countries and formats, Luhn-valid cards of several brands, IBANs of
several countries (mod-97 check digits computed), IPv4/IPv6 addresses, US SSNs, API keys of the
well-known prefixes, JWTs, PEM private keys, passwords in ``key=value`` pairs, prefix-less random
tokens and person names — each planted in a template sentence, some snippets holding several —
and negatives that must stay as they are: order numbers, UUIDs, ULIDs, version strings, dates,
times, 16-digit numbers failing Luhn, IBANs with wrong check digits, git SHAs, digests, ports.

A planted value counts as found when every letter and digit of it lies inside a masked span of
its kind (API_KEY and SECRET count as one kind: credentials). A masked span is a false positive
when it overlaps no planted value of its kind. Figures: recall and precision per kind, overall
on the structured kinds (everything but person names), negatives left untouched, and
throughput of ``Redactor.redact`` (KB/s and µs per KB) on the corpus and on clean prose.

    .venv/bin/python bench/pii.py [--seed 13] [--repeat 3]

Prints the figures and writes bench/results/pii.json.
"""

from __future__ import annotations

import argparse
import json
import random
import string
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import phonenumbers

from benchutil import code_version, machine
from bzzz.privacy.redact import Redactor
from bzzz.privacy.spans import API_KEY, KINDS, PERSON, SECRET, STRUCTURED_KINDS, Span

RESULTS = Path(__file__).parent / "results" / "pii.json"
CREDENTIAL = "CREDENTIAL"  # API_KEY and SECRET, scored together


@dataclass
class Snippet:
    """A text and the values planted in it: (start, end, kind)."""

    text: str
    labels: list[tuple[int, int, str]] = field(default_factory=list)
    negative: str | None = None  # the kind of look-alike a negative snippet holds


def _group(kind: str) -> str:
    return CREDENTIAL if kind in (API_KEY, SECRET) else kind


# --- values -----------------------------------------------------------------------------------

FIRST = [
    "Maria",
    "James",
    "Priya",
    "Omar",
    "Sofia",
    "Daniel",
    "Chen",
    "Fatima",
    "Lukas",
    "Elena",
    "Kenji",
    "Aisha",
    "Thomas",
    "Nadia",
    "Siobhan",
    "Thandiwe",
    "Oluwaseun",
    "Guillermo",
    "Björn",
    "Anneliese",
    "Dara",
    "Tariq",
    "Ingeborg",
    "Meera",
    "Rosalind",
    "Kwame",
    "Ximena",
    "Anouk",
    "Emeka",
    "Saoirse",
]
LAST = [
    "Okafor",
    "Lindqvist",
    "Nakamura",
    "García",
    "Müller",
    "Novak",
    "Haddad",
    "Fernandes",
    "Kowalski",
    "Brennan",
    "Achebe",
    "Rossi",
    "Dubois",
    "Petrov",
    "Ólafsson",
    "Schneider",
    "Mensah",
    "Tanaka",
    "Moreau",
    "Costa",
]
STREETS = (
    "Baker Street, London NW1 6XE",
    "Rue de Rivoli, 75001 Paris",
    "Hauptstraße 5, 10115 Berlin",
)
DOMAINS = ("example.com", "acme-corp.io", "mail.example.org", "uni-hamburg.de", "bank.co.uk")
PROSE = (
    "The nightly build on the release branch finished after the cache was warmed. "
    "Reviewers asked for smaller functions and a clearer error when the stream is missing. "
    "We moved the retention job to run hourly and kept the audit trail untouched. "
)


def email(rng: random.Random) -> str:
    first, last = rng.choice(FIRST).lower(), rng.choice(LAST).lower()
    first = first.encode("ascii", "ignore").decode() or "user"
    last = last.encode("ascii", "ignore").decode() or "person"
    local = rng.choice(
        [f"{first}.{last}", f"{first[0]}{last}", f"{first}+alerts", f"{last}{rng.randint(1, 99)}"]
    )
    return f"{local}@{rng.choice(DOMAINS)}"


def luhn_digit(body: str) -> str:
    """The check digit that makes ``body`` + digit pass Luhn."""
    total = 0
    for i, ch in enumerate(reversed(body)):
        d = int(ch)
        if i % 2 == 0:
            d = d * 2 - 9 if d * 2 > 9 else d * 2
        total += d
    return str((10 - total % 10) % 10)


def card_number(rng: random.Random, valid: bool = True) -> str:
    prefix, size = rng.choice([("4", 16), ("51", 16), ("55", 16), ("2221", 16), ("37", 15)])
    prefix = rng.choice([prefix, "6011"]) if size == 16 else prefix
    body = prefix + "".join(rng.choice(string.digits) for _ in range(size - len(prefix) - 1))
    check = luhn_digit(body)
    if not valid:
        check = str((int(check) + rng.randint(1, 9)) % 10)
    digits = body + check
    style = rng.choice(["space", "dash", "none"])
    if style == "none":
        return digits
    sep = " " if style == "space" else "-"
    groups = [digits[i : i + 4] for i in range(0, len(digits), 4)]
    if size == 15:
        groups = [digits[:4], digits[4:10], digits[10:]]
    return sep.join(groups)


IBAN_FORMATS = {"DE": "8n10n", "GB": "4a14n", "FR": "10n11c2n", "ES": "20n", "IT": "1a10n12c"}
IBAN_FORMATS |= {"NL": "4a10n", "CH": "5n12c", "BE": "12n", "PL": "24n", "AT": "16n"}


def _bban(rng: random.Random, spec: str) -> str:
    out, number = [], ""
    for ch in spec:
        if ch.isdigit():
            number += ch
            continue
        pool = {"n": string.digits, "a": string.ascii_uppercase}.get(
            ch, string.digits + string.ascii_uppercase
        )
        out.append("".join(rng.choice(pool) for _ in range(int(number))))
        number = ""
    return "".join(out)


def iban(rng: random.Random, valid: bool = True) -> str:
    country = rng.choice(sorted(IBAN_FORMATS))
    bban = _bban(rng, IBAN_FORMATS[country])
    numeric = "".join(str(int(c, 36)) for c in bban + country + "00")
    check = 98 - int(numeric) % 97
    if not valid:
        check = (check + rng.randint(1, 40)) % 97 + 2
    code = f"{country}{check:02d}{bban}"
    if rng.random() < 0.5:
        return code
    return " ".join(code[i : i + 4] for i in range(0, len(code), 4))


PHONE_REGIONS = ("US", "GB", "DE", "FR", "IN", "ES", "NL")


def phone(rng: random.Random) -> str:
    region = rng.choice(PHONE_REGIONS)
    example = phonenumbers.example_number_for_type(
        region,
        rng.choice([phonenumbers.PhoneNumberType.MOBILE, phonenumbers.PhoneNumberType.FIXED_LINE]),
    )
    assert example is not None
    for _ in range(200):
        # Vary the example's last digits until a valid number of the region comes out.
        national = str(example.national_number)
        tail = "".join(rng.choice(string.digits) for _ in range(4))
        candidate = phonenumbers.parse(f"+{example.country_code}{national[:-4]}{tail}")
        if phonenumbers.is_valid_number(candidate):
            break
    fmt = rng.choice(["INTERNATIONAL", "E164", "NATIONAL"] + (["DOTS"] if region == "US" else []))
    if fmt == "DOTS":
        n = str(candidate.national_number)
        return f"{n[:3]}.{n[3:6]}.{n[6:]}"
    return phonenumbers.format_number(candidate, getattr(phonenumbers.PhoneNumberFormat, fmt))


def ipv4(rng: random.Random) -> str:
    first = rng.choice([10, 172, 192, rng.randint(11, 223)])
    return ".".join(str(part) for part in [first, *(rng.randint(0, 255) for _ in range(3))])


def ipv6(rng: random.Random) -> str:
    groups = [f"{rng.randint(0, 0xFFFF):x}" for _ in range(8)]
    if rng.random() < 0.5:
        return "2001:db8::" + ":".join(groups[:2])
    return ":".join(groups)


def ssn(rng: random.Random) -> str:
    area = rng.choice([a for a in range(1, 900) if a != 666])
    sep = rng.choice(["-", "-", " "])
    return f"{area:03d}{sep}{rng.randint(1, 99):02d}{sep}{rng.randint(1, 9999):04d}"


def _random(
    rng: random.Random, size: int, alphabet: str = string.ascii_letters + string.digits
) -> str:
    return "".join(rng.choice(alphabet) for _ in range(size))


def credential(rng: random.Random) -> tuple[str, str]:
    """(value, kind) of a key of a well-known form."""
    b64 = string.ascii_letters + string.digits + "-_"
    forms: list[Callable[[], tuple[str, str]]] = [
        lambda: ("sk-proj-" + _random(rng, 48, b64), API_KEY),
        lambda: ("sk-" + _random(rng, 40), API_KEY),
        lambda: ("sk_live_" + _random(rng, 24), API_KEY),
        lambda: ("ghp_" + _random(rng, 36), API_KEY),
        lambda: ("github_pat_" + _random(rng, 22) + "_" + _random(rng, 59), API_KEY),
        lambda: (
            "xoxb-"
            + "-".join(str(rng.randint(10**10, 10**11)) for _ in range(2))
            + "-"
            + _random(rng, 24),
            API_KEY,
        ),
        lambda: ("AKIA" + _random(rng, 16, string.ascii_uppercase + string.digits), API_KEY),
        lambda: ("AIza" + _random(rng, 35, b64), API_KEY),
        lambda: ("bzzz_" + _random(rng, 43, b64), API_KEY),
        lambda: (_jwt(rng), API_KEY),
        lambda: (_pem(rng), SECRET),
        lambda: (_random(rng, rng.randint(28, 40)), SECRET),
    ]
    return rng.choice(forms)()


def _jwt(rng: random.Random) -> str:
    b64 = string.ascii_letters + string.digits + "-_"
    return "eyJhbGciOiJFUzI1NiJ9.eyJ" + _random(rng, 60, b64) + "." + _random(rng, 86, b64)


def _pem(rng: random.Random) -> str:
    kind = rng.choice(["RSA PRIVATE KEY", "PRIVATE KEY", "EC PRIVATE KEY", "OPENSSH PRIVATE KEY"])
    body = "\n".join(
        _random(rng, 64, string.ascii_letters + string.digits + "+/") for _ in range(4)
    )
    return f"-----BEGIN {kind}-----\n{body}\n-----END {kind}-----"


def person(rng: random.Random) -> str:
    return f"{rng.choice(FIRST)} {rng.choice(LAST)}"


# --- snippets ---------------------------------------------------------------------------------

TEMPLATES = (
    "Please reach me at {v} if the deploy fails tonight.",
    "Customer record updated: {v}",
    'payload: {{"contact": "{v}", "status": "open"}}',
    "Forwarding from the support queue:\n> {v}\nThanks.",
    "{v}",
    "Noted in the incident log (value {v}) before the rollback.",
)
CREDENTIAL_TEMPLATES = (
    "Use the key {v} for the staging endpoint.",
    "export OPENAI_API_KEY={v}",
    'config = {{"api_key": "{v}", "timeout": 30}}',
    "Authorization: Bearer {v}",
    "the token leaked in the logs: {v}",
)
PASSWORD_TEMPLATES = ("DB_PASSWORD={v}", 'settings: {{"password": "{v}"}}', "client_secret: {v}")
PERSON_TEMPLATES = (
    "Please forward this to {v} before Friday.",
    "Dr. {v} approved the change.",
    "Regards,\n{v}",
    "{v} will review the migration.",
    "Meeting notes: {v} raised the retention question.",
    "The ticket was filed by Ms. {v} from finance.",
)


def planted(template: str, value: str, kind: str) -> Snippet:
    """The template filled with one value, labelled."""
    head, _, tail = template.partition("{v}")
    head, tail = (
        head.replace("{{", "{").replace("}}", "}"),
        tail.replace("{{", "{").replace("}}", "}"),
    )
    return Snippet(head + value + tail, [(len(head), len(head) + len(value), kind)])


def combine(parts: list[Snippet]) -> Snippet:
    """Several snippets joined into one paragraph, labels shifted."""
    text, labels = "", []
    for part in parts:
        if text:
            text += " "
        labels += [(s + len(text), e + len(text), k) for s, e, k in part.labels]
        text += part.text
    return Snippet(text, labels)


def positives(rng: random.Random) -> list[Snippet]:
    """Snippets holding one planted value each, per kind."""
    makers: list[tuple[int, str, Callable[[], str], tuple[str, ...]]] = [
        (90, "EMAIL", lambda: email(rng), TEMPLATES),
        (120, "PHONE", lambda: phone(rng), TEMPLATES),
        (90, "CARD", lambda: card_number(rng), TEMPLATES),
        (80, "IBAN", lambda: iban(rng), TEMPLATES),
        (50, "IP_ADDRESS", lambda: ipv4(rng), TEMPLATES),
        (40, "IP_ADDRESS", lambda: ipv6(rng), TEMPLATES),
        (70, "US_SSN", lambda: ssn(rng), TEMPLATES),
        (
            30,
            SECRET,
            lambda: _random(rng, rng.randint(8, 14), string.ascii_letters + string.digits + "!#%"),
            PASSWORD_TEMPLATES,
        ),
        (90, PERSON, lambda: person(rng), PERSON_TEMPLATES),
    ]
    out = [
        planted(rng.choice(templates), make(), kind)
        for count, kind, make, templates in makers
        for _ in range(count)
    ]
    for _ in range(130):
        value, kind = credential(rng)
        out.append(planted(rng.choice(CREDENTIAL_TEMPLATES), value, kind))
    return out + harder(rng)


def harder(rng: random.Random) -> list[Snippet]:
    """Forms seen in real text that simple patterns trip over."""
    out = []
    for _ in range(20):  # a mail header: a name and an address side by side
        name, address = person(rng), email(rng)
        text = f"From: {name} <{address}>"
        at = text.index("<") + 1
        labels = [(6, 6 + len(name), PERSON), (at, at + len(address), "EMAIL")]
        out.append(Snippet(text, labels))
    for _ in range(15):
        out.append(
            planted(rng.choice(["tel:{v}", "call {v} ext. 204", "({v})"]), phone(rng), "PHONE")
        )
    for _ in range(15):
        out.append(planted("upstream {v}:8443 refused the connection", ipv4(rng), "IP_ADDRESS"))
    for _ in range(15):
        secret = _random(rng, rng.randint(10, 16))
        text = f"DATABASE_URL=postgresql://app:{secret}@db.internal:5432/prod"
        at = text.index(secret)
        out.append(Snippet(text, [(at, at + len(secret), SECRET)]))
    for _ in range(10):
        pem = json.dumps({"key": _pem(rng)})
        out.append(Snippet(pem, [(9, len(pem) - 2, SECRET)]))
    for _ in range(10):
        out.append(planted("The card ends the sentence: {v}.", card_number(rng), "CARD"))
    for _ in range(15):  # postal addresses are not a kind: they stay (see BENCHMARKS.md)
        street = f"{rng.randint(1, 240)} {rng.choice(STREETS)}"
        out.append(planted(f"Ship to {{v}}, {street}.", person(rng), PERSON))
    return out


def negative_values(rng: random.Random) -> list[tuple[str, str]]:
    """(look-alike kind, value): text that must not be masked."""
    hexdigits = "0123456789abcdef"
    ulid_chars = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
    makers: list[tuple[str, Callable[[], str]]] = [
        (
            "order number",
            lambda: f"ORD-{rng.randint(2020, 2026)}-{rng.randint(0, 10**7):0{rng.randint(4, 7)}d}",
        ),
        ("order number", lambda: f"#{rng.randint(10000, 999999)}"),
        ("uuid", lambda: "-".join(_random(rng, n, hexdigits) for n in (8, 4, 4, 4, 12))),
        ("ulid id", lambda: "msg-01" + _random(rng, 24, ulid_chars)),
        ("version", lambda: f"v{rng.randint(0, 9)}.{rng.randint(0, 30)}.{rng.randint(0, 99)}"),
        (
            "version",
            lambda: (
                f"{rng.randint(1, 5)}.{rng.randint(0, 20)}.{rng.randint(0, 9)}"
                f"-rc.{rng.randint(1, 4)}"
            ),
        ),
        (
            "date",
            lambda: f"{rng.randint(2000, 2030)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
        ),
        (
            "date",
            lambda: f"{rng.randint(1, 28):02d}/{rng.randint(1, 12):02d}/{rng.randint(2000, 2030)}",
        ),
        (
            "time",
            lambda: f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}",
        ),
        ("invalid-Luhn card", lambda: card_number(rng, valid=False)),
        ("invalid IBAN", lambda: iban(rng, valid=False)),
        ("git sha", lambda: _random(rng, 40, hexdigits)),
        ("git sha", lambda: _random(rng, 7, hexdigits)),
        ("sha256", lambda: "sha256:" + _random(rng, 64, hexdigits)),
        ("port", lambda: f"localhost:{rng.randint(1024, 65535)}"),
        ("amount", lambda: f"EUR {rng.randint(1, 99999)}.{rng.randint(0, 99):02d}"),
        (
            "identifier",
            lambda: rng.choice(
                ["getUserAccountSettings", "HostedRuntimeWorkerPool", "ThreadLifecycleMonitor"]
            ),
        ),
        ("path", lambda: f"src/bzzz/llm/worker_{rng.randint(1, 9)}.py"),
    ]
    return [(kind, make()) for kind, make in makers for _ in range(14)]


def negatives(rng: random.Random) -> list[Snippet]:
    """Snippets that hold only look-alikes."""
    out = []
    for kind, value in negative_values(rng):
        head, _, tail = rng.choice(TEMPLATES).partition("{v}")
        text = head.replace("{{", "{").replace("}}", "}") + value + tail.replace("}}", "}")
        out.append(Snippet(text, [], negative=kind))
    return out


def corpus(seed: int) -> list[Snippet]:
    """The labelled corpus: positives, mixed paragraphs of several, negatives."""
    rng = random.Random(seed)
    single = positives(rng)
    alone = negatives(rng)
    mixed = [combine(rng.sample(single, 3)) for _ in range(60)]
    with_noise = [combine([rng.choice(single), rng.choice(alone)]) for _ in range(40)]
    return single + mixed + with_noise + alone


# --- scoring ----------------------------------------------------------------------------------


def covered(text: str, label: tuple[int, int, str], spans: list[Span]) -> bool:
    """Every letter and digit of the planted value lies in a span of its kind."""
    start, end, kind = label
    mine = [s for s in spans if _group(s.kind) == _group(kind)]
    return all(
        any(s.start <= i < s.end for s in mine) for i in range(start, end) if text[i].isalnum()
    )


def correct(span: Span, labels: list[tuple[int, int, str]]) -> bool:
    """The span overlaps a planted value of its kind."""
    return any(
        span.start < e and s < span.end and _group(k) == _group(span.kind) for s, e, k in labels
    )


def score(redactor: Redactor, snippets: list[Snippet]) -> dict[str, Any]:
    """Recall and precision per kind; the negatives that were touched."""
    truth: Counter[str] = Counter()
    found: Counter[str] = Counter()
    predicted: Counter[str] = Counter()
    right: Counter[str] = Counter()
    misses: dict[str, list[str]] = {}
    false_positives: list[dict[str, str]] = []
    touched: Counter[str] = Counter()
    for snippet in snippets:
        spans = redactor.find(snippet.text)
        for label in snippet.labels:
            group = _group(label[2])
            truth[group] += 1
            if covered(snippet.text, label, spans):
                found[group] += 1
            else:
                misses.setdefault(group, []).append(snippet.text[label[0] : label[1]])
        for span in spans:
            group = _group(span.kind)
            predicted[group] += 1
            if correct(span, snippet.labels):
                right[group] += 1
            else:
                false_positives.append(
                    {"kind": span.kind, "text": snippet.text[span.start : span.end]}
                )
        if snippet.negative is not None and spans:
            touched[snippet.negative] += 1
    return _figures(truth, found, predicted, right) | {
        "misses": {k: v[:8] for k, v in misses.items()},
        "miss_counts": {k: len(v) for k, v in misses.items()},
        "false_positives": false_positives[:20],
        "false_positive_count": len(false_positives),
        "negatives": sum(1 for s in snippets if s.negative is not None),
        "negatives_touched": dict(touched),
    }


def _ratio(a: int, b: int) -> float | None:
    return round(a / b, 4) if b else None


def _figures(
    truth: Counter[str], found: Counter[str], predicted: Counter[str], right: Counter[str]
) -> dict[str, Any]:
    groups = sorted({_group(k) for k in KINDS})
    structured = {_group(k) for k in STRUCTURED_KINDS}
    per_kind = {
        g: {
            "planted": truth[g],
            "recall": _ratio(found[g], truth[g]),
            "masked_spans": predicted[g],
            "precision": _ratio(right[g], predicted[g]),
        }
        for g in groups
    }
    total = {
        "planted": sum(truth[g] for g in structured),
        "recall": _ratio(sum(found[g] for g in structured), sum(truth[g] for g in structured)),
        "precision": _ratio(
            sum(right[g] for g in structured), sum(predicted[g] for g in structured)
        ),
    }
    return {"per_kind": per_kind, "structured": total}


# --- throughput -------------------------------------------------------------------------------


def throughput(redactor: Redactor, texts: list[str], repeat: int) -> dict[str, float]:
    """Best of ``repeat`` passes of ``redact`` over the texts: KB/s and µs per KB.

    Wall time and this process's CPU time: on a shared machine the first includes waits for a
    core, the second does not.
    """
    size = sum(len(t.encode()) for t in texts) / 1024
    wall = cpu = float("inf")
    for _ in range(repeat):
        started, used = time.perf_counter(), time.process_time()
        for text in texts:
            redactor.redact(text)
        wall = min(wall, time.perf_counter() - started)
        cpu = min(cpu, time.process_time() - used)
    return {
        "kb": round(size, 1),
        "texts": len(texts),
        "kb_per_s": round(size / wall, 1),
        "us_per_kb": round(wall / size * 1e6, 1),
        "cpu_us_per_kb": round(cpu / size * 1e6, 1),
        "us_per_text": round(wall / len(texts) * 1e6, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    started = time.perf_counter()
    redactor = Redactor()
    redactor.redact("warm-up: a@example.com")
    cold = time.perf_counter() - started
    snippets = corpus(args.seed)
    figures = score(redactor, snippets)
    texts = [s.text for s in snippets]
    prose = [PROSE * 8] * 40  # ~2 KB each, nothing to find
    speed = {
        "corpus": throughput(redactor, texts, args.repeat),
        "clean_prose": throughput(redactor, prose, args.repeat),
        "one_64kb_text": throughput(redactor, ["\n".join(texts)[: 64 * 1024]], args.repeat),
    }
    result = {
        "benchmark": "pii",
        "seed": args.seed,
        "snippets": len(snippets),
        "build_and_first_call_s": round(cold, 2),
        **figures,
        "throughput": speed,
        "machine": machine(),
        "code": code_version(),
    }
    report(result)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n")
    print(f"wrote {RESULTS}")


def report(result: dict[str, Any]) -> None:
    """The figures, as a table."""
    print(
        f"{result['snippets']} snippets (seed {result['seed']}); "
        f"redactor built and first call: {result['build_and_first_call_s']} s"
    )
    print(f"{'kind':<12} {'planted':>7} {'recall':>7} {'masked':>7} {'precision':>9}")
    for kind, row in result["per_kind"].items():
        print(
            f"{kind:<12} {row['planted']:>7} {row['recall']!s:>7} "
            f"{row['masked_spans']:>7} {row['precision']!s:>9}"
        )
    total = result["structured"]
    print(
        f"{'structured':<12} {total['planted']:>7} {total['recall']!s:>7} "
        f"{'':>7} {total['precision']!s:>9}"
    )
    print(f"negatives touched: {result['negatives_touched']} of {result['negatives']}")
    print(f"misses: {result['miss_counts']}")
    for name, row in result["throughput"].items():
        print(
            f"throughput {name}: {row['kb_per_s']} KB/s, {row['us_per_kb']} µs/KB "
            f"(CPU {row['cpu_us_per_kb']} µs/KB), "
            f"{row['us_per_text']} µs per text ({row['texts']} texts, {row['kb']} KB)"
        )


if __name__ == "__main__":
    sys.exit(main())
