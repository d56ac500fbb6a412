"""What GroupAdmin reads of one share-partition, live or stored: its lag, the dead letters it
holds back. Kept apart so the use cases read as steps."""

from __future__ import annotations

from shareproxy.core.lag import PartitionLag, partition_lag
from shareproxy.core.share_partition import SharePartition
from shareproxy.core.states import RecordState
from shareproxy.core.store import SharePartitionKey, ShareStateStore
from shareproxy.runtime.archive.dead_letters import DeadLetterWriter
from shareproxy.runtime.consuming.partitions import SharePartitions
from shareproxy.runtime.groups.group_views import PendingDeadLetters
from shareproxy.upstream.client import Upstream, UpstreamError
from shareproxy.upstream.lookups import UpstreamOffsets

Ranges = list[tuple[int, int, RecordState]]  # (first, last, state) in offset order


async def snapshot(
    partitions: SharePartitions, store: ShareStateStore, key: SharePartitionKey
) -> tuple[int, int, Ranges] | None:
    """SPSO, SPEO and the in-flight ranges: from the live engine where this node leads the
    share-partition, else as stored (the same but for records acquired and not yet
    acknowledged, which wait either way); None: it has no state."""
    leader = partitions.loaded_leader(key)
    if leader is not None and leader.valid:
        return await leader.snapshot()
    loaded = await store.read(key)
    if loaded is None:
        return None
    sp = SharePartition.from_persisted(loaded.state)
    return sp.spso, sp.speo, [(r.first, r.last, r.state) for r in sp.ranges]


async def lag(
    partitions: SharePartitions,
    store: ShareStateStore,
    upstream: Upstream,
    key: SharePartitionKey,
    topic: str,
) -> PartitionLag | None:
    """From the live engine where this node leads the share-partition, else from the store;
    None: it has no state. The high watermark unknown (upstream down) leaves the lag unknown."""
    held = await snapshot(partitions, store, key)
    if held is None:
        return None
    spso, speo, ranges = held
    offsets = UpstreamOffsets(upstream, topic, key.partition)
    try:
        hwm: int | None = await offsets.latest_offset()
    except UpstreamError:  # the lag is unknown; the stored offsets are still worth answering
        hwm = None
    return partition_lag(spso, speo, ranges, hwm)


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
