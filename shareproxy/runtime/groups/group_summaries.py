"""Every share group at a glance: state, members, topics, lag and the age of its oldest record
not yet acknowledged, for `groups list`.

State, members and subscribed topics are what the group's coordinator holds (``Listed``, asked
of the other nodes by the admin API). The lag and the age come from what is durable or live for
each share-partition (``partition_views.snapshot``) and one upstream Fetch per share-partition,
all of them batched by broker: at the first offset not yet acknowledged, with a byte limit of
one batch header (Kafka gives only the first partition of a Fetch a whole batch past its
limit), the broker answers the high watermark and the header of the batch holding that
offset, whose timestamp is the age's source. Any node computes the same answer, so no
share-partition's leader needs asking."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from uuid import UUID

from shareproxy.core.errors import ErrorCode
from shareproxy.core.lag import backlog as summed
from shareproxy.core.lag import first_unacked, oldest_unacked_age, partition_lag
from shareproxy.core.share_group import ShareGroup
from shareproxy.core.store import SharePartitionKey, ShareStateStore
from shareproxy.protocol.record_batch import HEADER_BYTES, first_timestamp
from shareproxy.runtime.cluster import NodeAddress
from shareproxy.runtime.consuming.partitions import SharePartitions
from shareproxy.runtime.groups import partition_views
from shareproxy.upstream.client import Upstream, UpstreamError
from shareproxy.upstream.held_reads import fetch_held

# share-partitions read from the store at once while summarizing
READ_CONCURRENCY = 16


@dataclass(frozen=True, slots=True)
class Listed:
    """What a group's coordinator says of it."""

    state: str
    members: int = 0
    subscribed: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class GroupSummary:
    group_id: str
    state: str
    members: int
    topics: list[str]  # those it has state for or subscribes to
    lag: int | None  # None: unknown for some share-partition
    oldest_unacked_age_s: float | None  # 0: nothing waits; None: unknown


@dataclass(frozen=True, slots=True)
class _Waiting:
    key: SharePartitionKey
    topic: str
    first: int  # first offset not yet acknowledged
    spso: int
    speo: int
    ranges: partition_views.Ranges
    waiting: partition_views.Waiting


def as_coordinated(
    listed: Iterable[tuple[str, str]],
    seen: Mapping[int, Mapping[str, Listed]],
    coordinator_at: Callable[[str], NodeAddress | None],
    here: Mapping[str, ShareGroup],
) -> dict[str, Listed]:
    """Each listed (group, state) with its members and subscribed topics from its coordinator:
    this node (``here``) or the node that listed it in ``seen``; none when it is only stored
    or its coordinator could not be asked."""
    out = {}
    for group_id, state in listed:
        home = coordinator_at(group_id)
        group = here.get(group_id)
        peer = seen.get(home.node_id, {}).get(group_id) if home is not None else None
        if peer is not None:
            out[group_id] = Listed(state, peer.members, peer.subscribed)
        elif home is None and group is not None:
            subscribed = tuple(sorted(group.subscribed_topic_names()))
            out[group_id] = Listed(state, len(group.members), subscribed)
        else:
            out[group_id] = Listed(state)
    return out


async def summarize(
    groups: Mapping[str, Listed],
    store: ShareStateStore,
    partitions: SharePartitions,
    upstream: Upstream,
    now_ms: int,
    backlog: bool = True,
) -> list[GroupSummary]:
    """One summary per group, in group order; without ``backlog`` only what the coordinator
    holds (topics subscribed to, lag and age unknown), which is all a peer is asked for."""
    if not backlog:
        return [
            GroupSummary(g, x.state, x.members, list(x.subscribed), None, None)
            for g, x in sorted(groups.items())
        ]
    gate = asyncio.Semaphore(READ_CONCURRENCY)

    async def keys_of(group_id: str) -> list[SharePartitionKey]:
        async with gate:
            return await store.list_partitions(group_id)

    async def read(key: SharePartitionKey, topic: str) -> _Waiting | None:
        async with gate:
            held = await partition_views.snapshot(partitions, store, key)
        if held is None:
            return None
        spso, speo, ranges, waiting = held
        return _Waiting(
            key, topic, first_unacked(spso, ranges, waiting), spso, speo, ranges, waiting
        )

    ids = sorted(groups)
    keys = await asyncio.gather(*(keys_of(g) for g in ids))
    names = await _topic_names(upstream, {k.topic_id for ks in keys for k in ks})
    # state kept for a topic deleted upstream waits for nothing
    named = [[(k, names[k.topic_id]) for k in ks if k.topic_id in names] for ks in keys]
    read_all = iter(await asyncio.gather(*(read(k, t) for ks in named for k, t in ks)))
    found = [[w for w in (next(read_all) for _ in ks) if w is not None] for ks in named]
    heads = await _batch_heads(upstream, [w for ws in found for w in ws])
    out = []
    for group_id, waiting in zip(ids, found, strict=True):
        listed = groups[group_id]
        parts = []
        for w in waiting:
            hwm, timestamp_ms = heads.get((w.topic, w.key.partition, w.first), (None, None))
            lag = partition_lag(w.spso, w.speo, w.ranges, hwm, w.waiting).lag
            parts.append((lag, oldest_unacked_age(w.first, hwm, timestamp_ms, now_ms)))
        total = summed(parts)
        out.append(
            GroupSummary(
                group_id,
                listed.state,
                listed.members,
                sorted({w.topic for w in waiting} | set(listed.subscribed)),
                total.lag,
                total.oldest_unacked_age_s,
            )
        )
    return out


async def _topic_names(upstream: Upstream, ids: set[UUID]) -> dict[UUID, str]:
    """Topic names by id, the cluster's metadata asked again when this node has not seen a
    topic yet (it need not serve it to list a group that has state for it)."""
    names = {info.topic_id: name for name, info in upstream.topics.items()}
    if ids - names.keys():
        try:
            async with asyncio.timeout(partition_views.LOG_END_WAIT_S):
                await upstream.refresh_metadata()
        except (UpstreamError, TimeoutError):  # out of reach or silent: their lag unknown
            return names
        names = {info.topic_id: name for name, info in upstream.topics.items()}
    return names


Head = tuple[int | None, int | None]  # (high watermark, timestamp ms of the batch) if known


async def _batch_heads(
    upstream: Upstream, waiting: Iterable[_Waiting]
) -> dict[tuple[str, int, int], Head]:
    """(topic, partition, offset) → the high watermark and the timestamp of the batch holding
    the offset, in as few Fetches as there are distinct offsets asked of one partition. Each
    waits ``LOG_END_WAIT_S`` at most, as an offsets view does; once one runs out, no more is
    asked (a cluster that takes requests and does not answer would hold the list for a request
    timeout per Fetch)."""
    rounds: list[dict[tuple[str, int], int]] = []
    for offset_at in {(w.topic, w.key.partition, w.first) for w in waiting}:
        topic, partition, offset = offset_at
        for wanted in rounds:
            if (topic, partition) not in wanted:
                wanted[(topic, partition)] = offset
                break
        else:
            rounds.append({(topic, partition): offset})
    heads: dict[tuple[str, int, int], Head] = {}
    for wanted in rounds:
        try:
            async with asyncio.timeout(partition_views.LOG_END_WAIT_S):
                fetched = await fetch_held(upstream, wanted, partition_max_bytes=HEADER_BYTES)
        except UpstreamError:  # the upstream is out of reach: lag and age unknown
            continue
        except TimeoutError:  # silent: these and the rest unknown
            break
        for (topic, partition), offset in wanted.items():
            data = fetched.get((topic, partition))
            if data is None or data.error_code != ErrorCode.NONE:
                continue
            records = data.records
            stamp = first_timestamp(records) if len(records) >= HEADER_BYTES else None
            heads[(topic, partition, offset)] = (data.high_watermark, stamp)
    return heads
