"""Acquiring (with the long poll) and acknowledging across a member's share-partitions: the
mechanics under the consumers' use cases (``consumers``), one for ShareFetch, ShareAcknowledge and
the HTTP records API alike, so a record a Kafka consumer holds is never handed out over HTTP, and
the reverse."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterable, Mapping, Sequence

from shareproxy.core.acknowledgement import AckBatch
from shareproxy.core.errors import ShareError
from shareproxy.core.group_settings import GroupSettings
from shareproxy.core.share_session import TopicPartition
from shareproxy.core.states import AcquireMode
from shareproxy.core.store import ShareStateStore
from shareproxy.runtime.consuming.leader import Acquisition, SharePartitionLeader
from shareproxy.runtime.consuming.partitions import LoadUnderWay, SharePartitions
from shareproxy.runtime.consuming.upstream_feed import (
    READ_WAIT_PAST_MAX_WAIT_MS,
    TAIL_POLL_MS,
    UpstreamFeed,
)
from shareproxy.upstream.client import UpstreamError


class Consumption:
    """Acquire and acknowledge on behalf of share-group members, whichever front end asks."""

    def __init__(
        self,
        partitions: SharePartitions,
        feed: UpstreamFeed,
        store: ShareStateStore,
        settings_for: Callable[[str], GroupSettings],
        clock_ms: Callable[[], int],
    ) -> None:
        self._partitions = partitions
        self._feed = feed
        self._upstream = feed.upstream
        self._store = store
        self._settings_for = settings_for
        self._clock_ms = clock_ms

    async def leaders(
        self, group_id: str, partitions: Iterable[TopicPartition]
    ) -> tuple[list[SharePartitionLeader], dict[TopicPartition, int]]:
        """The leaders of a share session's partitions, and an error code for each one that
        cannot be led: UNKNOWN_TOPIC_ID for a topic id upstream does not have (deleted, or
        never), UNKNOWN_TOPIC_OR_PARTITION for a partition its topic does not have, the
        upstream's retriable error when it cannot answer; once a load has taken ``LOAD_WAIT_S``,
        the partitions after it that are not loaded yet get its error at once (each would wait
        as long)."""
        found: list[SharePartitionLeader] = []
        errors: dict[TopicPartition, int] = {}
        ready = self._partitions.ready
        waited_out: int | None = None  # a load ran past LOAD_WAIT_S: the others wait no more
        for tp in partitions:
            leader = ready(group_id, *tp)
            if leader is not None:
                found.append(leader)
                continue
            if waited_out is not None:
                errors[tp] = waited_out
                continue
            try:
                found.append(await self._partitions.leader(group_id, *tp))
            except ShareError as e:
                errors[tp] = e.code
            except LoadUnderWay as e:
                errors[tp] = waited_out = e.code
            except UpstreamError as e:  # one partition's, or one broker's: the others go on
                errors[tp] = e.code
        return found, errors

    async def acknowledge(
        self,
        group_id: str,
        member_id: str,
        acks: Mapping[TopicPartition, Sequence[AckBatch]],
    ) -> dict[TopicPartition, int]:
        """Each share-partition's acknowledgements, all at once (group commit takes them in
        one transaction), each answered with its own error code once durable."""
        if not acks:
            return {}
        if len(acks) == 1:  # most fetches: no task and gathering future for one partition
            ((tp, batches),) = acks.items()
            return {tp: await self._acknowledge_one(group_id, member_id, tp, batches)}
        jobs = [self._acknowledge_one(group_id, member_id, tp, acks[tp]) for tp in acks]
        return dict(zip(acks, await asyncio.gather(*jobs), strict=True))

    async def _acknowledge_one(
        self, group_id: str, member_id: str, tp: TopicPartition, batches: Sequence[AckBatch]
    ) -> int:
        leader = self._partitions.ready(group_id, *tp)
        if leader is None:
            try:
                leader = await self._partitions.leader(group_id, *tp)
            except ShareError as e:
                return e.code
            except UpstreamError as e:
                return e.code
        return await leader.acknowledge(member_id, batches)

    async def release(self, group_id: str, member_id: str) -> None:
        """The member's share session closed (epoch -1): its remaining locks end now."""
        await self._partitions.release_member(member_id, group_id)

    def lock_expiry_ms(self, group_id: str) -> int:
        """When an acquisition lock taken now ends (the group's share.record.lock.duration.ms)."""
        return self._clock_ms() + self._settings_for(group_id).record_lock_duration_ms

    # ------------------------------------------------------------------ acquiring
    async def acquire(
        self,
        leaders: Sequence[SharePartitionLeader],
        member_id: str,
        *,
        max_wait_ms: int,
        max_records: int,
        max_bytes: int,
        mode: AcquireMode,
        min_bytes: int = 1,
    ) -> dict[TopicPartition, Acquisition]:
        """Acquire for ``member_id`` from these share-partitions, waiting up to ``max_wait_ms``
        while there is nothing to give, or less than ``min_bytes`` to read (the long poll of
        ShareFetch and of HTTP fetch)."""
        deadline = self._clock_ms() + max_wait_ms
        got: dict[TopicPartition, Acquisition] = {}
        if not leaders or max_records <= 0 or max_bytes <= 0:  # nothing may be acquired
            await asyncio.sleep(max_wait_ms / 1000)
            return got
        while True:
            # interest first, then look: a change between the two cannot be missed
            changed = [leader.changed() for leader in leaders]
            # an unreachable upstream leaves the caches as they are: answered empty, retried
            with contextlib.suppress(UpstreamError):
                await self._feed.read(
                    leaders,
                    max_wait_ms=1,
                    room=(max_records, max_bytes),
                    give_up_at_ms=deadline + READ_WAIT_PAST_MAX_WAIT_MS,
                )
            budget, room = max_records, max_bytes
            remaining = deadline - self._clock_ms()
            if remaining > 0 and min_bytes > 1 and not _min_bytes_ready(leaders, min_bytes):
                # as Kafka: nothing is acquired until there is MinBytes or MaxWait ends; the
                # wait is an upstream long poll past what is cached
                step = min(remaining, TAIL_POLL_MS)
                started = self._clock_ms()
                with contextlib.suppress(UpstreamError):
                    await self._feed.read(
                        leaders,
                        max_wait_ms=step,
                        beyond_cache=True,
                        give_up_at_ms=started + step + READ_WAIT_PAST_MAX_WAIT_MS,
                    )
                if self._clock_ms() - started < step and not _min_bytes_ready(leaders, min_bytes):
                    # nothing to long-poll (no room for locks, say): wait for a change instead
                    await asyncio.wait(
                        changed, timeout=step / 1000, return_when=asyncio.FIRST_COMPLETED
                    )
                continue
            for leader in leaders:
                if budget <= 0 or room <= 0:
                    break
                if not self._partitions.leads(leader.key.topic_id, leader.key.partition):
                    # led elsewhere since the fetch began, or this node's lease may have
                    # lapsed while it waited (a paused process): another node may have
                    # claimed the state, and what this one holds of it is stale
                    continue
                a = await leader.acquire(member_id, budget, mode, room)
                if a.acquired:
                    self._feed.read_ahead(leader)
                    got[(leader.key.topic_id, leader.key.partition)] = a
                    budget -= sum(r.last_offset - r.first_offset + 1 for r in a.acquired)
                    room -= len(a.records)
            remaining = deadline - self._clock_ms()
            if got or remaining <= 0:
                return got
            # Wait for a release, timeout or acknowledgement on these partitions, or for new
            # upstream data (the shared tail poller fetches it); never spin.
            self._feed.watch(leaders)
            woken, _ = await asyncio.wait(
                changed, timeout=remaining / 1000, return_when=asyncio.FIRST_COMPLETED
            )
            if not woken:  # MaxWait ended and nothing changed: there is nothing new to look at
                return got


def _min_bytes_ready(leaders: Sequence[SharePartitionLeader], min_bytes: int) -> bool:
    """Whether the partitions' caches hold ``min_bytes`` to deliver (Kafka counts the log
    from each share-partition's next fetch offset)."""
    total = 0
    for leader in leaders:
        total += leader.bytes_ready_from_next_fetch()
        if total >= min_bytes:
            return True
    return False
