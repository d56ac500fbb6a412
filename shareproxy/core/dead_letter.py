"""Dead-letter topics (KIP-1191, on any cluster): a record a share group gives up on (rejected,
or at its delivery count limit) goes to the group's dead-letter topic before it is Archived.

Pure: the cause of each record, the headers and partition of its dead-letter copy, and which
topic names may be one. Kafka's names and texts, so tools written for Kafka 4.4 read ours.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

HEADER_TOPIC = "__dlq.errors.topic"
HEADER_PARTITION = "__dlq.errors.partition"
HEADER_OFFSET = "__dlq.errors.offset"
HEADER_GROUP = "__dlq.errors.group"
HEADER_DELIVERY_COUNT = "__dlq.errors.delivery.count"
HEADER_MESSAGE = "__dlq.errors.message"

# Kafka's topic name rule (Topic.validate)
_LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]{1,249}")


class DeadLetterCause(Enum):
    """Why a record went to the dead-letter topic, with the message Kafka writes for it."""

    REJECTED = "Offset rejected by client."
    DELIVERY_LIMIT = "Offset delivery count exceeded the threshold."


@dataclass(frozen=True, slots=True)
class DeadLetterRun:
    """Offsets first..last, Archiving, delivered ``delivery_count`` times."""

    first: int
    last: int
    delivery_count: int
    cause: DeadLetterCause


def cause_of(delivery_count: int, delivery_count_limit: int) -> DeadLetterCause:
    """The stored state keeps Archiving, not why: a record at its delivery limit used it up,
    one below it was rejected (one rejected on its last delivery reads as the limit, as the
    state alone cannot tell)."""
    if delivery_count >= delivery_count_limit:
        return DeadLetterCause.DELIVERY_LIMIT
    return DeadLetterCause.REJECTED


def headers(
    topic: str, partition: int, offset: int, group_id: str, run: DeadLetterRun
) -> list[tuple[str, bytes]]:
    """The context headers of one dead-letter record, as Kafka writes them (UTF-8 text)."""
    return [
        (HEADER_TOPIC, topic.encode()),
        (HEADER_PARTITION, str(partition).encode()),
        (HEADER_OFFSET, str(offset).encode()),
        (HEADER_GROUP, group_id.encode()),
        (HEADER_DELIVERY_COUNT, str(run.delivery_count).encode()),
        (HEADER_MESSAGE, run.cause.value.encode()),
    ]


def target_partition(source_partition: int, dead_letter_partitions: int) -> int:
    """Records of one source partition stay together, in order (Kafka's choice too)."""
    return source_partition % dead_letter_partitions


def topic_problem(name: str) -> str | None:
    """Why ``name`` cannot be a dead-letter topic, or None (empty: no dead-letter topic)."""
    if name == "":
        return None
    if name in (".", "..") or not _LEGAL_TOPIC.fullmatch(name):
        return "is not a legal topic name (up to 249 of a-z, A-Z, 0-9, '.', '_', '-')"
    if name.startswith("__"):
        return "must not start with '__' (internal topics)"
    return None
