"""Stand-ins for purged envelopes: the same envelope, its message content stripped.

A ``message.posted`` envelope carries a message's content and, with it, state: it creates and
moves tasks, counts thread messages, logs decisions and stances, fills inboxes. Purging it from
the log would cost a node that replays the log later (a new one, or one that was down) all of
that. So before a purge the retained part of each purged envelope is re-stated on the log
(``retention.restated`` on ``bzzz.<network>.tomb.<run>-<n>``) and a replaying node applies it at
the original envelope's sequence (``network/restate.py``), reaching the state every other node has.

What a stand-in keeps: every field but ``content``; of the content only what is state —
a task's own fields for task messages under retention (tasks are long-lived: their type,
description, data, progress and result stay), a decision's text (the thread's decision log).
Under erasure nothing of the content stays but a task's kind, thread and timing: the
``retention.forget`` applier, which a replaying node applies after the stand-ins, blanks the
same task fields on every node.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from pydantic import ValidationError

from bzzz.domain import TASK_UPDATE_TYPES
from bzzz.network.envelope import SEALED, Envelope, unseal
from bzzz.network.sealing import Keyring, SealError

logger = logging.getLogger(__name__)

RETENTION = "retention"
ERASURE = "erasure"
TASK_TYPES = ("task_assignment", *TASK_UPDATE_TYPES)
# What the thread appliers read of a decision's content (thread_projection._message_text).
DECISION_KEYS = ("text", "decision", "content", "message", "body")
# What the task appliers read that is not content: a task's kind, its thread, a hosted
# agent's timing.
TASK_STATE_KEYS = ("task_type", "type", "thread_id", "response_ms")


def stripped_content(message_type: str, content: Any, reason: str) -> dict[str, Any]:
    """What of a purged message's content its stand-in keeps."""
    if not isinstance(content, dict):
        return {}
    if reason == RETENTION and message_type in TASK_TYPES:
        return dict(content)
    if reason == RETENTION and message_type == "decision":
        return {key: content[key] for key in DECISION_KEYS if isinstance(content.get(key), str)}
    if message_type in TASK_TYPES:
        return {key: content[key] for key in TASK_STATE_KEYS if key in content}
    return {}


def opened_fields(data: bytes, keyring: Keyring | None) -> dict[str, Any] | None:
    """An envelope's wire fields with a sealed payload opened (None: unreadable here)."""
    try:
        parsed = json.loads(data)
    except ValueError:
        return None
    if not isinstance(parsed, dict):
        return None
    fields: dict[str, Any] = parsed
    payload = fields.get("payload")
    if isinstance(payload, dict) and SEALED in payload:
        if keyring is None:
            return None
        try:
            opened = unseal(Envelope.model_validate(fields), keyring)
        except (SealError, ValidationError):
            logger.warning("cannot open envelope %s to restate it", fields.get("id"))
            return None
        fields = dict(fields, payload=opened.payload)
    return fields


def stand_in(data: bytes, reason: str, keyring: Keyring | None = None) -> dict[str, Any] | None:
    """The stand-in of one stored envelope (wire bytes), None for one that is not a post.

    A sealed post is opened with ``keyring``: the stand-in travels inside the
    ``retention.restated`` envelope, whose payload is sealed in its turn.
    """
    fields = opened_fields(data, keyring)
    if fields is None or fields.get("type") != "message.posted":
        return None
    payload = fields.get("payload")
    if not isinstance(payload, dict):
        return None
    kept = dict(payload)
    kept["content"] = stripped_content(
        str(payload.get("message_type")), payload.get("content"), reason
    )
    kept["restated"] = reason
    # Not the origin's signature any more: the stand-in is vouched for by the node that
    # signed the ``retention.restated`` envelope holding it.
    return dict(fields, payload=kept, sig="")


# A restated envelope stays well under NATS's default 1 MiB payload.
CHUNK_BYTES = 512 * 1024


def chunks(entries: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Split stand-ins (``{"seq", "envelope"}``) into envelopes of at most CHUNK_BYTES each."""
    found: list[list[dict[str, Any]]] = []
    current: list[dict[str, Any]] = []
    size = 0
    for entry in entries:
        length = len(json.dumps(entry, separators=(",", ":")))
        if current and size + length > CHUNK_BYTES:
            found.append(current)
            current, size = [], 0
        current.append(entry)
        size += length
    if current:
        found.append(current)
    return found
