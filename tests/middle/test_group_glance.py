"""Every group at a glance (``group_summaries``): its lag and the age of its oldest record not
yet acknowledged, read from the stored state and the batch headers upstream, on the virtual
clock, so an age is exact."""

from __future__ import annotations

import asyncio
from typing import Any

from shareproxy.core.errors import ErrorCode
from shareproxy.runtime.groups.group_summaries import Listed, summarize
from shareproxy.runtime.groups.partition_views import LOG_END_WAIT_S
from tests.support.middle import MiddleRuntime, on_middle_runtime
from tests.support.share_calls import ACCEPT, GROUP, ack, fetch


async def glance(runtime: MiddleRuntime) -> tuple[int | None, float | None]:
    [summary] = await summarize(
        {GROUP: Listed("Stable", 1)},
        runtime.store,
        runtime.partitions,
        runtime.upstream,
        runtime.clock(),
    )
    return summary.lag, summary.oldest_unacked_age_s


@on_middle_runtime
async def test_the_lag_and_the_age_follow_the_records_timestamps(runtime: MiddleRuntime):
    t = runtime.topic()
    produced = runtime.clock()
    runtime.produce(t, 4)
    await asyncio.sleep(1)
    runtime.produce(t, 6)  # a second batch, a second later
    tp = await runtime.partition(t)
    assert await fetch(runtime, "m1", tp) == [(0, 9, 1)]
    assert await ack(runtime, "m1", tp, 0, 1, ACCEPT) == ErrorCode.NONE
    await asyncio.sleep(5)
    # 2..9 wait; the oldest (2) is in the first batch, stamped when it was produced
    assert await glance(runtime) == (8, (runtime.clock() - produced) / 1000)
    assert await ack(runtime, "m1", tp, 2, 3, ACCEPT) == ErrorCode.NONE
    assert await glance(runtime) == (6, 5.0)  # the second batch's stamp
    assert await ack(runtime, "m1", tp, 4, 9, ACCEPT) == ErrorCode.NONE
    assert await glance(runtime) == (0, 0.0)  # nothing waits


@on_middle_runtime
async def test_a_broker_that_answers_a_header_read_without_records_is_asked_again(
    runtime: MiddleRuntime,
):
    """A broker may answer a Fetch that does not wait with no records although it holds them
    (Tansu does under load): the age is then read again with a wait, not shown unknown."""
    t = runtime.topic()
    runtime.produce(t, 3)
    tp = await runtime.partition(t)
    assert await fetch(runtime, "m1", tp) == [(0, 2, 1)]
    await asyncio.sleep(2)
    runtime.cluster.slow_reads = 1
    assert await glance(runtime) == (3, 2.0)
    assert runtime.cluster.slow_reads == 0  # the first read was the slow one


@on_middle_runtime
async def test_a_cluster_that_does_not_answer_leaves_the_lag_unknown_within_the_wait(
    runtime: MiddleRuntime,
):
    """A broker that takes the header read and never answers would hold the list for the
    upstream's request timeout: it waits ``LOG_END_WAIT_S``, as an offsets view does, and
    the lag and the age are unknown."""
    t = runtime.topic()
    runtime.produce(t, 3)
    tp = await runtime.partition(t)
    assert await fetch(runtime, "m1", tp) == [(0, 2, 1)]
    answering = asyncio.Event()
    fetch_upstream = runtime.cluster.fetch

    async def held(*args: Any, **kwargs: Any) -> Any:
        await answering.wait()
        return await fetch_upstream(*args, **kwargs)

    runtime.cluster.fetch = held  # type: ignore[method-assign]
    asked = runtime.now()
    async with asyncio.timeout(2 * LOG_END_WAIT_S):  # never past it
        assert await glance(runtime) == (None, None)
    assert runtime.now() - asked == LOG_END_WAIT_S
    answering.set()
    assert await glance(runtime) == (3, LOG_END_WAIT_S)  # answered: known, as old as the wait
