"""Token counting that works offline.

tiktoken downloads its encodings on first use, which a node without internet access cannot do,
so counts are estimated: one token per word piece of up to six characters, one per punctuation
mark, plus the chat format's per-message overhead. That is the order of real BPE counts for
English prose; the estimate only guards budgets, and the ledger books the server's own usage.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from typing import Any

_PIECE = re.compile(r"\w+|[^\w\s]", re.UNICODE)
# The chat format wraps each message in a few tokens and primes the answer with a few more.
PER_MESSAGE = 4
PER_REPLY = 3


def count_text(text: str) -> int:
    """Estimated tokens of a piece of text."""
    total = 0
    for piece in _PIECE.findall(text):
        total += math.ceil(len(piece) / 6) if piece[0].isalnum() or piece[0] == "_" else 1
    return total


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(
            str(part.get("text", "")) if isinstance(part, Mapping) else str(part)
            for part in content
        )
    return "" if content is None else str(content)


def count_messages(messages: Iterable[Mapping[str, Any]]) -> int:
    """Estimated prompt tokens of chat messages (tool calls included)."""
    total = PER_REPLY
    for message in messages:
        total += PER_MESSAGE + count_text(_content_text(message.get("content")))
        for call in message.get("tool_calls") or []:
            function = call.get("function", {}) if isinstance(call, Mapping) else {}
            total += count_text(str(function.get("name", "")))
            total += count_text(str(function.get("arguments", "")))
    return total
