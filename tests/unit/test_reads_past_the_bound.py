"""The log caches' bound holds when many partitions are read at once: read-aheads started in one
turn each see the room the others took, once the caches are past the bound the requests' own
reads (never refused) take turns instead of all bringing a batch together, and a long poll's
answer may bring no more than the room left. Driven through the runtime's feed and leaders over
a scripted upstream that counts the reads under way."""

from __future__ import annotations

import asyncio
from uuid import uuid4

import pytest

from shareproxy.core.errors import ErrorCode
from shareproxy.runtime.consuming.cache_budget import MIN_READ_BYTES, OVER_BOUND_READS, CacheBudget
from shareproxy.runtime.consuming.leader import SharePartitionLeader
from shareproxy.runtime.consuming.upstream_feed import UpstreamFeed
from shareproxy.upstream.client import FETCH_MAX_BYTES, PartitionData, TopicInfo
from tests.support.budgeted import budgeted_leader
from tests.support.record_batches import batch

TOPIC = "t"
PARTITIONS = 20
LOG_RECORDS = 10  # each partition's log: one batch


class CountingUpstream:
    """Every partition holds one batch of LOG_RECORDS; a fetch answers after a moment (as a
    broker over the network), with the batches of the partitions asked from their start."""

    def __init__(self) -> None:
        self.topic_id = uuid4()
        self.topics = {TOPIC: TopicInfo(TOPIC, self.topic_id, dict.fromkeys(range(PARTITIONS), 1))}
        self.topics_by_id = {self.topic_id: self.topics[TOPIC]}
        self.under_way = 0
        self.most_under_way = 0
        self.fetches = 0
        self.max_bytes: list[int] = []

    async def fetch(
        self, wanted: dict[tuple[str, int], int], *, max_bytes: int, **_: object
    ) -> dict[tuple[str, int], PartitionData]:
        self.fetches += 1
        self.max_bytes.append(max_bytes)
        self.under_way += 1
        self.most_under_way = max(self.most_under_way, self.under_way)
        try:
            await asyncio.sleep(0.005)
        finally:
            self.under_way -= 1
        return {
            tp: PartitionData(
                ErrorCode.NONE, LOG_RECORDS, -1, 0, batch(0, LOG_RECORDS) if offset == 0 else b""
            )
            for tp, offset in wanted.items()
        }


def _fed(
    limit: int,
) -> tuple[CountingUpstream, CacheBudget, UpstreamFeed, list[SharePartitionLeader]]:
    """The runtime's feed under a bound of ``limit`` bytes, and a leader for each partition."""
    upstream = CountingUpstream()
    budget = CacheBudget(limit)
    feed = UpstreamFeed(upstream, lambda: 0, budget)  # type: ignore[arg-type]
    leaders = [budgeted_leader(budget, upstream.topic_id, p, TOPIC) for p in range(PARTITIONS)]
    return upstream, budget, feed, leaders


async def test_read_aheads_started_in_one_turn_see_each_others_room():
    _, budget, feed, leaders = _fed(MIN_READ_BYTES)  # room for one read-ahead
    for leader in leaders:  # low on records, more upstream: each would read ahead
        leader.took_in(PartitionData(ErrorCode.NONE, 100, -1, 0, batch(0, 1)))
    for leader in leaders:  # all in one turn, as a fetch answering many partitions does
        feed.read_ahead(leader)
    assert sum(leader.reading_ahead for leader in leaders) == 1
    assert budget.reserved == MIN_READ_BYTES
    await feed.stop()  # cancelled before it ran: its room is given back all the same
    assert budget.reserved == 0 and not any(leader.reading_ahead for leader in leaders)


@pytest.mark.parametrize(
    ("others_hold", "most_at_once"),
    [(1 << 20, OVER_BOUND_READS), (0, PARTITIONS)],
    ids=["past the bound: in turns, none refused", "under it: all at once"],
)
async def test_requests_reads_take_turns_past_the_bound(others_hold: int, most_at_once: int):
    upstream, budget, feed, leaders = _fed(1 << 20)
    if others_hold:
        budget.hold(id(object()), others_hold)  # other caches' frames
    await asyncio.gather(*(feed.read([leader], max_wait_ms=0) for leader in leaders))
    assert upstream.fetches == PARTITIONS
    assert upstream.most_under_way == most_at_once
    assert all(leader.cache.end_offset == LOG_RECORDS for leader in leaders)


async def test_a_long_poll_of_many_partitions_asks_no_more_than_the_room_left():
    upstream, budget, feed, leaders = _fed(16 << 20)
    await feed.read(leaders[:2], max_wait_ms=250)  # the tail poll's kind of read
    assert upstream.max_bytes[-1] == 16 << 20
    budget.hold(id(object()), 12 << 20)
    room = budget.limit - budget.held  # type: ignore[operator]
    await feed.read(leaders[2:4], max_wait_ms=250)
    assert upstream.max_bytes[-1] == room < 4 << 20
    budget.hold(id(object()), 8 << 20)  # past the bound: the least, never nothing
    await feed.read(leaders[4:6], max_wait_ms=250)
    assert upstream.max_bytes[-1] == MIN_READ_BYTES
    await feed.read(leaders[6:8], max_wait_ms=0)  # a request's own read: it takes turns
    assert upstream.max_bytes[-1] == FETCH_MAX_BYTES
    assert CacheBudget(None).response_bytes(FETCH_MAX_BYTES) == FETCH_MAX_BYTES
