"""Deleting a share group's offsets for chosen topics: each topic's verdict, and the stored
state of those allowed removed. GroupAdmin decides who may and holds the coordinator
meanwhile; this is the step itself, kept apart so the use case reads as steps."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Set

from shareproxy.core.errors import ErrorCode, ShareError
from shareproxy.core.store import ShareStateStore
from shareproxy.runtime.consuming.partitions import SharePartitions
from shareproxy.telemetry import metrics
from shareproxy.upstream.client import TopicInfo

log = logging.getLogger(__name__)

# DeleteShareGroupOffsets for a topic the group has no state for (Kafka's message)
NO_OFFSETS = "There is no offset information to delete."


async def delete_offsets(
    store: ShareStateStore,
    partitions: SharePartitions,
    group_id: str,
    subscribed: Set[str],
    topics: Mapping[str, TopicInfo | None],
    *,
    all_or_nothing: bool,
) -> dict[str, tuple[ErrorCode, str | None]]:
    """Per topic its error code and message. A topic the group subscribes to is refused
    (GROUP_SUBSCRIBED_TO_TOPIC), one that does not exist is UNKNOWN_TOPIC_OR_PARTITION;
    ``all_or_nothing`` (the REST API's rule) turns any refusal into a ShareError that deletes
    nothing. Otherwise (Kafka's) a topic the group has no state for is
    UNKNOWN_TOPIC_OR_PARTITION too, as ``sharePartitionsEligibleForOffsetDeletion`` answers."""
    verdicts: dict[str, ErrorCode] = {}
    for name, info in topics.items():
        if name in subscribed:
            verdicts[name] = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
        elif info is None:
            verdicts[name] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        else:
            verdicts[name] = ErrorCode.NONE
    refused = {n: c for n, c in verdicts.items() if c != ErrorCode.NONE}
    if all_or_nothing and refused:
        name, code = next(iter(refused.items()))
        why = (
            f"share group {group_id!r} is subscribed to topic {name!r}"
            if code == ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
            else f"topic {name!r} does not exist"
        )
        raise ShareError(code, why + "; nothing was deleted")
    stored = await store.list_partitions(group_id)
    answers: dict[str, tuple[ErrorCode, str | None]] = {
        n: (c, f"topic {n!r} does not exist" if topics[n] is None else None)
        for n, c in verdicts.items()
    }
    for name, verdict in verdicts.items():
        info = topics[name]
        if verdict != ErrorCode.NONE or info is None:
            continue
        keys = [k for k in stored if k.topic_id == info.topic_id]
        if not keys and not all_or_nothing:
            answers[name] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, NO_OFFSETS)
            continue
        await store.delete(keys)
        partitions.evict(keys)
        metrics.OFFSET_DELETIONS.inc(len(keys))
        log.info(
            "offsets deleted", extra={"group": group_id, "topic": name, "partitions": len(keys)}
        )
    return answers
