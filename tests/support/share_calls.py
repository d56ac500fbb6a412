"""Share consumption as the Kafka front end calls the runtime (``ShareConsumers``,
``Consumption``): one share-partition's fetch in a share session it opens, and acknowledgements,
for the in-process tests of both the integration and the middle tier."""

from __future__ import annotations

import uuid
from typing import Any

from shareproxy.core.acknowledgement import AckBatch
from shareproxy.core.states import AcknowledgeType, AcquireMode
from shareproxy.core.store import SharePartitionKey
from shareproxy.runtime.consuming.consumers import (
    OPEN_EPOCH,
    Fetched,
    FetchLimits,
    SessionRequest,
    TopicPartition,
)
from shareproxy.runtime.consuming.leader import Acquisition
from tests.support.runtime import Runtime

GROUP = "g-runtime"
ACCEPT, RELEASE = (AcknowledgeType.ACCEPT,), (AcknowledgeType.RELEASE,)


async def share_fetch(
    rt: Runtime,
    member_id: str,
    tp: TopicPartition,
    *,
    wait_ms: int = 3_000,
    max_records: int = 500,
    max_bytes: int = 1 << 20,
    mode: AcquireMode = AcquireMode.BATCH_OPTIMIZED,
    epoch: int = OPEN_EPOCH,
    host: str = "127.0.0.1",
    connection: int = 0,
) -> Fetched:
    """A ShareFetch of one share-partition, in a share session it opens (or goes on with, at
    ``epoch``), from an anonymous client on ``host``, sent on ``connection`` (0: none)."""
    return await rt.consumers.share_fetch(
        GROUP,
        member_id,
        SessionRequest(epoch, ("User:ANONYMOUS", host), connection),
        {},
        fetch=[tp],
        forget=[],
        limits=FetchLimits(wait_ms, max_records=max_records, max_bytes=max_bytes, mode=mode),
        access=AllowAll(),
    )


async def acquire(
    rt: Runtime, member_id: str, tp: TopicPartition, **request: Any
) -> Acquisition | None:
    """A ShareFetch's acquisition from one share-partition, which it answers with no error
    (``request``: as ``share_fetch`` takes it)."""
    fetched = await share_fetch(rt, member_id, tp, **request)
    assert (fetched.refusal, fetched.errors) == (None, {}), (fetched.refusal, fetched.errors)
    return fetched.acquired.get(tp)


async def fetch(
    rt: Runtime, member_id: str, tp: TopicPartition, **request: Any
) -> list[tuple[int, int, int]]:
    """(first, last, delivery count) of each range acquired."""
    return ranges(await acquire(rt, member_id, tp, **request))


def ranges(acquisition: Acquisition | None) -> list[tuple[int, int, int]]:
    if acquisition is None:
        return []
    return [(r.first_offset, r.last_offset, r.delivery_count) for r in acquisition.acquired]


class AllowAll:
    """A client that may Read every group and topic (no ACLs)."""

    def may_read_group(self, group_id: str) -> bool:
        return True

    def may_read_topic(self, topic_id: uuid.UUID) -> bool:
        return True


async def ack(
    rt: Runtime,
    member_id: str,
    tp: TopicPartition,
    first: int,
    last: int,
    types: tuple[int, ...],
) -> int:
    codes = await rt.consumption.acknowledge(GROUP, member_id, {tp: [AckBatch(first, last, types)]})
    return codes[tp]


def key(tp: TopicPartition) -> SharePartitionKey:
    return SharePartitionKey(GROUP, *tp)
