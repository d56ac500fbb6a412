"""Upstream reads that overlap: answers arriving late and out of order (a busy machine) must
never leave the log cache with a hole, or records in that hole are archived unread (or, when
Available, never handed out). Driven through the runtime's own feed, leader and fetch loop over a
scripted upstream whose answers the test releases in the order it chooses."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from uuid import uuid4

from shareproxy.core.acknowledgement import AckBatch
from shareproxy.core.errors import ErrorCode
from shareproxy.core.group_settings import GroupSettings
from shareproxy.core.share_partition import SharePartition
from shareproxy.core.states import AcknowledgeType, AcquireMode
from shareproxy.core.store import SharePartitionKey
from shareproxy.runtime.consuming import consumption as consumption_module
from shareproxy.runtime.consuming.cache_budget import CacheBudget
from shareproxy.runtime.consuming.consumption import Consumption
from shareproxy.runtime.consuming.leader import SharePartitionLeader
from shareproxy.runtime.consuming.upstream_feed import UpstreamFeed
from shareproxy.upstream.client import PartitionData, TopicInfo
from tests.support.record_batches import batch

TOPIC = "t"


class ScriptedUpstream:
    """One partition's log, in whole batches; a fetch answers with at most ``per_fetch``
    batches from the one holding its offset (as a broker bounded by partition_max_bytes does)
    as the log is when it is asked, and an answer the test holds is handed back only when the
    test lets it go."""

    def __init__(self, per_fetch: int = 2) -> None:
        self.topic_id = uuid4()
        self.topics = {TOPIC: TopicInfo(TOPIC, self.topic_id, {0: 1})}
        self.topics_by_id = {self.topic_id: self.topics[TOPIC]}
        self.log: list[tuple[int, int, bytes]] = []  # (base, last, bytes)
        self.per_fetch = per_fetch
        self.hold_from: dict[int, asyncio.Event] = {}  # fetch offset -> gate
        self.hold_long_polls: asyncio.Event | None = None
        self.asked: list[int] = []

    def append(self, count: int) -> None:
        base = self.log[-1][1] + 1 if self.log else 0
        self.log.append((base, base + count - 1, batch(base, count)))

    async def fetch(
        self, wanted: dict[tuple[str, int], int], *, max_wait_ms: int = 0, **_: object
    ) -> dict[tuple[str, int], PartitionData]:
        ((tp, offset),) = wanted.items()
        self.asked.append(offset)
        held = [b for b in self.log if b[1] >= offset][: self.per_fetch]
        end = self.log[-1][1] + 1 if self.log else 0
        answer = PartitionData(ErrorCode.NONE, end, -1, 0, b"".join(raw for _, _, raw in held))
        gate = self.hold_long_polls if max_wait_ms > 1 else self.hold_from.pop(offset, None)
        if gate is not None:
            await gate.wait()  # answered already, handed back late
        return {tp: answer}


class AcceptingCommitter:
    async def commit(self, write: object) -> ErrorCode:
        return ErrorCode.NONE


class EveryPartitionLed:
    def leads(self, topic_id: object, partition: int) -> bool:
        return True


async def _settled(condition, what: str) -> None:  # type: ignore[no-untyped-def]
    for _ in range(200):
        if condition():
            return
        await asyncio.sleep(0.005)
    raise AssertionError(f"never happened: {what}")


def _one_partition() -> tuple[ScriptedUpstream, UpstreamFeed, SharePartitionLeader, Consumption]:
    """The runtime's feed, one leader and the fetch loop, over a scripted upstream."""
    upstream = ScriptedUpstream(per_fetch=2)
    now = [1_000]
    budget = CacheBudget(None)
    feed = UpstreamFeed(upstream, lambda: now[0], budget)  # type: ignore[arg-type]
    settings = GroupSettings()
    leader = SharePartitionLeader(
        SharePartitionKey("g", upstream.topic_id, 0),
        TOPIC,
        SharePartition(0, settings.limits),
        1,
        settings,
        AcceptingCommitter(),  # type: ignore[arg-type]
        lambda: now[0],
        lambda _: None,
        still_led=lambda: True,
        members_assigned=lambda: 0,
        cache_budget=budget,
    )
    consumption = Consumption(
        EveryPartitionLed(),  # type: ignore[arg-type]
        feed,
        None,  # type: ignore[arg-type]
        lambda _: settings,
        lambda: now[0],
    )
    return upstream, feed, leader, consumption


async def _acquired_at_once(
    consumption: Consumption, leader: SharePartitionLeader
) -> list[tuple[int, int]]:
    """What member "b" acquires (up to 5 records) without waiting, as (first, last) ranges."""
    got = await consumption.acquire(
        [leader],
        "b",
        max_wait_ms=0,
        max_records=5,
        max_bytes=1 << 20,
        mode=AcquireMode.BATCH_OPTIMIZED,
    )
    return [(r.first_offset, r.last_offset) for a in got.values() for r in a.acquired]


async def test_a_late_answer_never_leaves_a_hole_in_the_log_cache():
    upstream, feed, leader, consumption = _one_partition()

    async def fetch(member: str, max_records: int) -> list[tuple[int, int]]:
        got = await consumption.acquire(
            [leader],
            member,
            max_wait_ms=0,
            max_records=max_records,
            max_bytes=1 << 20,
            mode=AcquireMode.BATCH_OPTIMIZED,
        )
        return [(r.first_offset, r.last_offset) for a in got.values() for r in a.acquired]

    async def accept(member: str, first: int, last: int) -> None:
        ack = AckBatch(first, last, (AcknowledgeType.ACCEPT,))
        assert await leader.acknowledge(member, [ack]) == ErrorCode.NONE

    feed.start()
    try:
        # a fetch waiting on the partition has the tail poll read it from 0; the broker answers
        # with records 0-4, but the answer reaches the proxy late
        upstream.append(5)
        upstream.hold_long_polls = asyncio.Event()
        feed.watch([leader])
        await _settled(lambda: upstream.asked == [0], "the tail poll asked")
        # meanwhile other fetches read 0-4 themselves, and they are processed: SPSO moves past
        assert await fetch("b", 5) == [(0, 4)]
        await accept("b", 0, 4)
        assert leader.spso == 5 and not leader.cache.batches
        # more records arrive; a fetch takes 5-9, and a read-ahead goes for what follows the
        # cached 5-14, its answer late too
        for _ in range(3):
            upstream.append(5)
        upstream.hold_from[15] = read_ahead = asyncio.Event()
        assert await fetch("b", 5) == [(5, 9)]
        await _settled(lambda: upstream.asked[-1] == 15, "the read-ahead asked")
        # the late answers are taken in: first the tail poll's (records 0-4), then the read-ahead's
        upstream.hold_long_polls.set()
        await _settled(lambda: not feed._watched and leader.cache.end_offset == 5, "tail taken")
        read_ahead.set()
        await _settled(lambda: not feed._background, "the read-ahead taken")
        # every record is handed out once: 10-14 are not skipped (archived unread)
        got = [r for _ in range(4) for r in await fetch("b", 5)]
        assert got == [(10, 14), (15, 19)]
        assert [(r.first, r.last, r.state.name) for r in leader.ranges] == [
            (5, 9, "ACQUIRED"),
            (10, 14, "ACQUIRED"),
            (15, 19, "ACQUIRED"),
        ]
    finally:
        await feed.stop()


async def test_a_partition_read_to_its_end_is_left_to_the_tail_poll_under_way():
    """A consumer that has read a partition to its end, while it has records elsewhere, does
    not ask upstream for it on every fetch: the tail poll asks from that end meanwhile."""
    upstream, feed, leader, consumption = _one_partition()

    def fetch() -> Awaitable[list[tuple[int, int]]]:
        return _acquired_at_once(consumption, leader)

    feed.start()
    try:
        upstream.append(5)
        assert await fetch() == [(0, 4)]
        ack = AckBatch(0, 4, (AcknowledgeType.ACCEPT,))
        assert await leader.acknowledge("b", [ack]) == ErrorCode.NONE
        upstream.hold_long_polls = asyncio.Event()
        # read at 5, the end: nothing; the tail poll asks from 5 from now on
        assert await fetch() == []
        await _settled(lambda: upstream.asked == [0, 5, 5], "the tail poll asked")
        for _ in range(3):
            assert await fetch() == []
        assert upstream.asked == [0, 5, 5]  # no fetch asked upstream itself
        # the poll ends (empty, as it was asked): fetches read for themselves again
        upstream.append(5)
        upstream.hold_long_polls.set()
        await _settled(lambda: not feed._polled_from, "the tail poll ended")
        upstream.hold_long_polls = None
        assert await fetch() == [(5, 9)]
        assert upstream.asked[:4] == [0, 5, 5, 5]
    finally:
        await feed.stop()


async def test_a_partition_never_written_is_left_to_the_tail_poll_under_way():
    """A topic nobody has written to yet (its high watermark is 0) is waited on as a drained
    one is: fetches leave it to the tail poll under way, not one upstream read each."""
    upstream, feed, leader, consumption = _one_partition()

    def fetch() -> Awaitable[list[tuple[int, int]]]:
        return _acquired_at_once(consumption, leader)

    feed.start()
    try:
        upstream.hold_long_polls = asyncio.Event()
        assert await fetch() == []  # read at 0, the end: nothing
        await _settled(lambda: upstream.asked == [0, 0], "the tail poll asked")
        for _ in range(3):
            assert await fetch() == []
        assert upstream.asked == [0, 0]  # no fetch asked upstream itself
        upstream.append(5)
        upstream.hold_long_polls.set()
        await _settled(lambda: not feed._polled_from, "the tail poll ended")
        upstream.hold_long_polls = None
        assert await fetch() == [(0, 4)]
    finally:
        await feed.stop()


async def test_a_fetch_gives_up_on_an_upstream_read_that_never_answers(monkeypatch):
    """A cluster that hangs holds a Fetch for the upstream's request timeout; a request waits
    on its own read ``READ_WAIT_PAST_MAX_WAIT_MS`` past its MaxWait at most, then answers from
    the cache (here nothing), and the read is dropped."""
    monkeypatch.setattr(consumption_module, "READ_WAIT_PAST_MAX_WAIT_MS", 50)
    upstream, _feed, leader, consumption = _one_partition()
    upstream.append(5)
    upstream.hold_from[0] = asyncio.Event()  # never set: the broker never answers
    assert await asyncio.wait_for(_acquired_at_once(consumption, leader), 5) == []
    assert upstream.asked == [0]
    # once the cluster answers again, so does the next fetch
    assert await _acquired_at_once(consumption, leader) == [(0, 4)]
