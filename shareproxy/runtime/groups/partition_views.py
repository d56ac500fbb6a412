"""What GroupAdmin reads of share-partitions, live or stored: offsets and lag, the dead letters
they hold back. Kept apart so the use cases read as steps."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from uuid import UUID

from shareproxy.core.errors import ErrorCode
from shareproxy.core.lag import PartitionLag, partition_lag
from shareproxy.core.share_partition import SharePartition
from shareproxy.core.states import RecordState
from shareproxy.core.store import SharePartitionKey, ShareStateStore
from shareproxy.runtime.archive.dead_letters import DeadLetterWriter
from shareproxy.runtime.consuming.partitions import SharePartitions
from shareproxy.runtime.groups.group_views import PartitionOffsets, PendingDeadLetters
from shareproxy.upstream.client import Upstream, UpstreamError
from shareproxy.upstream.lookups import UpstreamOffsets, topic_named

# how long an offsets view waits on the upstream for a partition's log end; once one such wait
# runs out, the view asks no more (a cluster that accepts requests and does not answer would
# otherwise hold it for a request timeout per partition)
LOG_END_WAIT_S = 2.0

Ranges = list[tuple[int, int, RecordState]]  # (first, last, state) in offset order
Waiting = list[tuple[int, int, int]]  # (first, last, delivery time) of ranges not due yet


async def snapshot(
    partitions: SharePartitions, store: ShareStateStore, key: SharePartitionKey
) -> tuple[int, int, Ranges, Waiting] | None:
    """SPSO, SPEO, the in-flight ranges and those waiting for their delivery time: from the
    live engine where this node leads the share-partition, else as stored (the same but for
    records acquired and not yet acknowledged, which wait either way, and for delivery times,
    which the leader reads from the log); None: it has no state."""
    leader = partitions.loaded_leader(key)
    if leader is not None and leader.valid:
        return await leader.snapshot()
    loaded = await store.read(key)
    if loaded is None:
        return None
    sp = SharePartition.from_persisted(loaded.state)
    return sp.spso, sp.speo, [(r.first, r.last, r.state) for r in sp.ranges], []


async def lag(
    partitions: SharePartitions,
    store: ShareStateStore,
    upstream: Upstream,
    key: SharePartitionKey,
    topic: str,
    within_s: float | None = LOG_END_WAIT_S,
) -> PartitionLag | None:
    """From the live engine where this node leads the share-partition, else from the store;
    None: it has no state. The high watermark unknown (upstream down, not answering within
    ``within_s``, or not to be asked: None) leaves the lag unknown."""
    held = await snapshot(partitions, store, key)
    if held is None:
        return None
    spso, speo, ranges, waiting = held
    hwm: int | None = None
    if within_s is not None:
        offsets = UpstreamOffsets(upstream, topic, key.partition)
        try:
            async with asyncio.timeout(within_s):
                hwm = await offsets.latest_offset()
        except (UpstreamError, TimeoutError):  # the lag unknown; the stored offsets still count
            hwm = None
    return partition_lag(spso, speo, ranges, hwm, waiting)


def pending_dead_letters(
    partitions: SharePartitions, writer: DeadLetterWriter | None, group_id: str
) -> list[PendingDeadLetters]:
    """The share-partitions this node leads whose records wait for the group's dead-letter
    topic, and why they are not written yet."""
    out = []
    for leader in partitions.loaded():
        key = leader.key
        if key.group_id != group_id:
            continue
        waiting = sum(
            r.last - r.first + 1 for r in leader.ranges if r.state == RecordState.ARCHIVING
        )
        problem = writer.problems.get(key) if writer is not None else None
        if waiting or problem is not None:
            out.append(PendingDeadLetters(leader.topic, key.partition, waiting, problem))
    return sorted(out, key=lambda p: (p.topic, p.partition))


def topic_names(upstream: Upstream) -> dict[UUID, str]:
    return {info.topic_id: name for name, info in upstream.topics.items()}


async def offsets(
    partitions: SharePartitions,
    store: ShareStateStore,
    upstream: Upstream,
    group_id: str,
    topics: Iterable[str] | None,
) -> list[PartitionOffsets]:
    """Each share-partition with state (or, for named topics, each partition of them): its
    offsets and lag, and the partition's leader epoch as the upstream metadata last showed it."""
    if topics is None:
        keys = await store.list_partitions(group_id)
    else:
        keys = []
        for asked in topics:
            named = await topic_named(upstream, asked)
            keys += [
                SharePartitionKey(group_id, named.topic_id, p) for p in range(named.partition_count)
            ]
    names = topic_names(upstream)
    loop = asyncio.get_running_loop()
    within: float | None = LOG_END_WAIT_S
    out = []
    for key in keys:
        name = names.get(key.topic_id)
        if name is None:  # state for a topic deleted upstream
            out.append(
                PartitionOffsets(
                    str(key.topic_id),
                    key.topic_id,
                    key.partition,
                    None,
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                )
            )
            continue
        info = upstream.topics.get(name)
        epoch = info.leader_epochs.get(key.partition, 0) if info is not None else 0
        started = loop.time()
        found = await lag(partitions, store, upstream, key, name, within)
        if within is not None and loop.time() - started >= within:  # the cluster hangs
            within = None
        out.append(
            PartitionOffsets(
                name,
                key.topic_id,
                key.partition,
                found,
                leader_epoch=epoch,
            )
        )
    return out
