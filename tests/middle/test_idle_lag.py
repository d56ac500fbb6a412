"""Lag counts what is produced while no consumer reads: the share-partition gauges, the alerts
and an autoscaler scaled to zero read it, and an idle share-partition hears where its log ends
only by asking (``LogEnds``)."""

from __future__ import annotations

import asyncio

from shareproxy.core.errors import ErrorCode
from shareproxy.node import holdings
from shareproxy.runtime.consuming.log_ends import LOG_END_CHECK_MS
from tests.support.middle import MiddleRuntime, on_middle_runtime
from tests.support.share_calls import ACCEPT, GROUP, ack, fetch


def lag_gauge(runtime: MiddleRuntime, topic: str) -> int:
    figures = holdings.live_state(
        runtime.nodes, runtime.partitions, runtime.coordinator, runtime.runtime.census,
        runtime.sessions, [], runtime.upstream,
    )  # fmt: skip
    return figures.partitions_detail[(GROUP, topic, 0)]["lag"]


async def lag_within(runtime: MiddleRuntime, topic: str, wanted: int, seconds: float) -> float:
    """Seconds of virtual time until the gauge shows ``wanted``; fails past ``seconds``."""
    started = runtime.now()
    while lag_gauge(runtime, topic) != wanted:
        assert runtime.now() - started <= seconds, (lag_gauge(runtime, topic), wanted)
        await asyncio.sleep(0.5)
    return runtime.now() - started


@on_middle_runtime
async def test_records_produced_after_every_consumer_left_show_as_lag(runtime: MiddleRuntime):
    t = runtime.topic()
    runtime.produce(t, 3)
    tp = await runtime.partition(t)
    assert await fetch(runtime, "m1", tp) == [(0, 2, 1)]
    assert await ack(runtime, "m1", tp, 0, 2, ACCEPT) == ErrorCode.NONE
    assert lag_gauge(runtime, t) == 0
    runtime.produce(t, 7)  # nobody fetches any more
    # a round notes where the log ended, the next asks (what a read moved is not asked)
    await lag_within(runtime, t, 7, 2 * LOG_END_CHECK_MS / 1000)
    runtime.produce(t, 5)
    await lag_within(runtime, t, 12, 2 * LOG_END_CHECK_MS / 1000)
    # a consumer back reads them all
    assert await fetch(runtime, "m2", tp) == [(3, 14, 1)]
