"""What a project's facts add to a hosted agent's prompt: tokens, characters, and the read's time.

A node on an in-memory log and SQLite; ``--facts`` agreed facts stated in one project
(among ``--entities`` entities, each with a sentence-long statement and a source; one with the
subject and relation of an earlier one supersedes it, as on a team), and 10 decoys in another
project. For ``--prompts`` task texts (half naming entities of the project, half
naming none), the hosted agents' prompt context is built as the runtime builds it
(``for_prompt`` at its bounds, 8 facts and 2,000 characters, then ``facts_message``); reported:
the facts chosen, the tokens the facts message adds to a prompt (p50/p99/max, counted with the
offline counter the cost tracker estimates with), its characters, and the time of ``for_prompt``
(p50/p99; the first read of the project, which opens its facts, apart).

    .venv/bin/python bench/knowledge_prompt.py [--facts 2000] [--entities 200] [--prompts 200] \
        [--json bench/results/knowledge_prompt.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import random
import tempfile
import time
from pathlib import Path
from typing import Any

from benchutil import machine, percentile
from bzzz.config import load_settings
from bzzz.eventlog import Caller
from bzzz.llm import tokens
from bzzz.llm.facts import FACT_CHARS, FACT_LIMIT, facts_message
from bzzz.network.memory import InMemoryBus
from bzzz.node.core import Node
from bzzz.principal import LOCAL

CALLER = Caller("bench", LOCAL)
RELATIONS = ("uses", "retries with", "is owned by", "stores data in", "calls", "is limited to")
WORDS = [
    *("checkout", "payments", "refunds", "catalogue", "search", "orders", "invoices"),
    *("shipping", "inventory", "ledger", "gateway", "webhook", "cache", "queue"),
    *("scheduler", "reports", "billing", "accounts", "sessions", "tokens"),
]
BASE_PROMPT = [
    {"role": "system", "content": "You are a senior software architect. " * 20},
    {"role": "user", "content": "placeholder"},
]


def entity(i: int) -> str:
    return f"{WORDS[i % len(WORDS)]} service {i}"


async def _fill(node: Node, facts: int, entities: int, rng: random.Random) -> None:
    for i in range(facts):
        subject = entity(rng.randrange(entities))
        relation = RELATIONS[i % len(RELATIONS)]
        obj = entity(rng.randrange(entities)) if i % 3 else f"policy {i}"
        statement = f"The {subject} {relation} {obj} (decided in review {i})."
        await node.knowledge.state(
            CALLER,
            "shop",
            subject,
            relation,
            obj,
            statement=statement,
            source={"thread": f"th-{i // 10}", "message": f"msg-{i}", "agents": ["ana", "bob"]},
        )
    for i in range(10):
        await node.knowledge.state(CALLER, "garden", entity(i), "uses", f"decoy {i}")


def _texts(count: int, entities: int, rng: random.Random) -> list[str]:
    texts = []
    for i in range(count):
        if i % 2:
            texts.append("Write the release notes of this sprint for the newsletter.")
        else:
            named = entity(rng.randrange(entities))
            texts.append(f"How should the {named} handle retries and where does it store data?")
    return texts


async def _measure(node: Node, texts: list[str]) -> dict[str, Any]:
    started = time.perf_counter()
    await node.knowledge.for_prompt("shop", texts[0], limit=FACT_LIMIT, max_chars=FACT_CHARS)
    first_ms = (time.perf_counter() - started) * 1000
    took, added, chars, chosen = [], [], [], []
    for text in texts:
        started = time.perf_counter()
        facts = await node.knowledge.for_prompt(
            "shop", text, limit=FACT_LIMIT, max_chars=FACT_CHARS
        )
        took.append((time.perf_counter() - started) * 1000)
        prompt = [BASE_PROMPT[0], {"role": "user", "content": text}]
        message = facts_message(facts)
        with_facts = [prompt[0], *([message] if message else []), prompt[1]]
        added.append(tokens.count_messages(with_facts) - tokens.count_messages(prompt))
        chars.append(len(str(message["content"])) if message else 0)
        chosen.append(len(facts))
    hit = sorted(float(a) for a, n in zip(added, chosen, strict=True) if n)
    took.sort()
    added.sort()
    named = chosen[0::2]
    return {
        "first_read_ms": round(first_ms, 1),
        "for_prompt_p50_ms": round(percentile(took, 50), 2),
        "for_prompt_p99_ms": round(percentile(took, 99), 2),
        "added_tokens_p50": percentile([float(a) for a in added], 50),
        "added_tokens_p99": percentile([float(a) for a in added], 99),
        "added_tokens_max": max(added),
        "added_tokens_p50_when_any": percentile(hit, 50),
        "prompts_without_facts": sum(1 for n in chosen if n == 0),
        "message_chars_max": max(chars),
        "facts_chosen_mean_named": round(sum(named) / max(len(named), 1), 2),
        "facts_chosen_mean_unnamed": round(sum(chosen[1::2]) / max(len(chosen[1::2]), 1), 2),
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--facts", type=int, default=2000)
    parser.add_argument("--entities", type=int, default=200)
    parser.add_argument("--prompts", type=int, default=200)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    rng = random.Random(7)
    with tempfile.TemporaryDirectory() as tmp:
        settings = load_settings(environ={}, overrides={"node": {"data_dir": f"{tmp}/node"}})
        async with Node(settings, bus=InMemoryBus()) as node:
            started = time.perf_counter()
            await _fill(node, args.facts, args.entities, rng)
            fill_s = time.perf_counter() - started
            figures = await _measure(node, _texts(args.prompts, args.entities, rng))
    result = {
        "bench": "knowledge_prompt",
        "facts": args.facts,
        "entities": args.entities,
        "prompts": args.prompts,
        "limits": {"facts": FACT_LIMIT, "chars": FACT_CHARS},
        "state_facts_per_s": round(args.facts / fill_s, 1),
        **figures,
        "machine": machine(),
    }
    print(json.dumps(result, indent=2))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    asyncio.run(main())
