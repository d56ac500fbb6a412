"""GroupAdmin's reset, as steps: which share-partitions it covers, and where each one's SPSO
moves (the decision is ``core/reset_plan.py``'s; this module asks the store and the cluster
what it needs), as Kafka's ShareGroupCommand with its GroupOffsetsResetter."""

from __future__ import annotations

from collections.abc import Iterable

from shareproxy.core.errors import ErrorCode, ShareError
from shareproxy.core.reset_plan import ResetTarget, new_start_offset, parse_scope
from shareproxy.core.share_partition import SharePartition
from shareproxy.core.store import SharePartitionKey, ShareStateStore
from shareproxy.runtime.groups.group_views import ResetPlan
from shareproxy.upstream.client import Upstream
from shareproxy.upstream.lookups import UpstreamOffsets, topic_named

Scope = list[tuple[SharePartitionKey, str]]  # each share-partition with its topic's name


async def scope(
    upstream: Upstream,
    store: ShareStateStore,
    group_id: str,
    topics: Iterable[str] | None,
    target: ResetTarget,
) -> Scope:
    """The share-partitions to reset: those of the plan's offsets (to=offsets), of the topics
    named (``topic`` or Kafka's ``topic:0,2``), or every one the group has state for whose
    topic the cluster still has. A topic or partition that does not exist refuses the reset
    (UNKNOWN_TOPIC_OR_PARTITION, as Kafka's checkAllTopicPartitionsValid)."""
    if target.to == "offsets":
        if topics is not None:
            raise ShareError(ErrorCode.INVALID_REQUEST, "to=offsets takes no topics")
        listed: dict[str, list[int]] = {}
        for topic, partition in sorted(target.offsets):
            listed.setdefault(topic, []).append(partition)
        wanted: dict[str, list[int] | None] = dict(listed)
    elif topics is not None:
        wanted = {}
        for arg in topics:
            name, partitions = parse_scope(arg)
            before = wanted.get(name, [])
            if partitions is None or before is None:
                wanted[name] = None
            else:
                wanted[name] = sorted(set(before) | set(partitions))
    else:
        names = {info.topic_id: n for n, info in upstream.topics.items()}
        stored = await store.list_partitions(group_id)
        return [(k, names[k.topic_id]) for k in stored if k.topic_id in names]
    out: Scope = []
    missing = []
    for name, partitions in wanted.items():
        info = await topic_named(upstream, name)
        everyone = range(info.partition_count)
        for p in everyone if partitions is None else partitions:
            if p not in info.leaders:
                missing.append(f"{name}-{p}")
                continue
            out.append((SharePartitionKey(group_id, info.topic_id, p), name))
    if missing:
        raise ShareError(
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            f"the partitions {', '.join(missing)} do not exist; nothing was reset",
        )
    return out


async def plan(
    upstream: Upstream, store: ShareStateStore, target: ResetTarget, keys: Scope, now_ms: int
) -> list[ResetPlan]:
    """Each share-partition's SPSO now (as stored: the group is empty, so nothing newer is
    held live) and where the target moves it."""
    steps = []
    for key, topic in keys:
        loaded = await store.read(key)
        current = SharePartition.from_persisted(loaded.state).spso if loaded else None
        offsets = UpstreamOffsets(upstream, topic, key.partition)
        earliest = await offsets.earliest_offset()
        latest = await offsets.latest_offset()
        when = target.timestamp_ms(now_ms)
        at_time = None if when is None else await offsets.offset_for_timestamp(when)
        new = new_start_offset(
            target,
            topic,
            key.partition,
            current=current,
            earliest=earliest,
            latest=latest,
            at_time=at_time,
        )
        steps.append(ResetPlan(topic, key.partition, current, new))
    return steps
