"""Dead-letter topics (KIP-1191, on any cluster): a record a share group gives up on (rejected,
or at its delivery count limit) goes to the group's dead-letter topic before it is Archived.

Pure: the cause of each record, the headers and partition of its dead-letter copy, which
topic names may be one and whether a topic may take a write now. Kafka's names, texts and rules,
so tools written for Kafka 4.4 read ours and a topic set up for Kafka works here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum

HEADER_TOPIC = "__dlq.errors.topic"
HEADER_PARTITION = "__dlq.errors.partition"
HEADER_OFFSET = "__dlq.errors.offset"
HEADER_GROUP = "__dlq.errors.group"
HEADER_DELIVERY_COUNT = "__dlq.errors.delivery.count"
HEADER_MESSAGE = "__dlq.errors.message"

# Kafka's broker configs for dead-letter topics, node settings here under the same names
TOPIC_PREFIX = "errors.deadletterqueue.topic.name.prefix"
DEFAULT_TOPIC_PREFIX = "dlq."
AUTO_CREATE = "errors.deadletterqueue.auto.create.topics.enable"
# Kafka's topic config by which a topic's owner lets groups write dead letters to it
GROUP_ENABLE = "errors.deadletterqueue.group.enable"
# a topic config every Kafka broker reports, set or not: a cluster whose answer has it but not
# GROUP_ENABLE does not know GROUP_ENABLE (Kafka before 4.4)
ALWAYS_REPORTED = "cleanup.policy"
# the configs a dead-letter topic the proxy creates gets, as Kafka creates one: it opts in, and
# each record keeps the time it was written (the copy's own timestamp)
CREATED_CONFIGS = {GROUP_ENABLE: "true", "message.timestamp.type": "CreateTime"}

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


def topic_problem(name: str, prefix: str) -> str | None:
    """Why ``name`` cannot be a dead-letter topic, or None (empty: no dead-letter topic).
    Kafka's rules: no internal topic, and the cluster's prefix (empty: any name) first, so a
    record written there is known to be a dead letter by its topic's name alone."""
    if name == "":
        return None
    if name in (".", "..") or not _LEGAL_TOPIC.fullmatch(name):
        return "is not a legal topic name (up to 249 of a-z, A-Z, 0-9, '.', '_', '-')"
    if name.startswith("__"):
        return "must not start with '__' (internal topics)"
    if not name.startswith(prefix):
        return f"must start with {prefix!r} ({TOPIC_PREFIX})"
    return None


def enabled_problem(reported: Mapping[str, str]) -> str | None:
    """Why an existing topic whose configs the cluster reported as ``reported`` may not take
    dead letters, or None. Its owner opts it in with ``GROUP_ENABLE=true``, as on Kafka; a
    cluster that does not know that config (it reports its defaults, but not this one) cannot
    carry it, so there the name rules alone decide."""
    value = reported.get(GROUP_ENABLE)
    if value is None and ALWAYS_REPORTED in reported:
        return None
    if value is not None and value.strip().lower() == "true":
        return None
    return f"the topic does not allow dead letters: set its {GROUP_ENABLE}=true"


def missing_problem(auto_create: bool) -> str | None:
    """Why a dead-letter topic that does not exist is not created, or None."""
    if auto_create:
        return None
    return f"it does not exist upstream and {AUTO_CREATE} is off: create it"
