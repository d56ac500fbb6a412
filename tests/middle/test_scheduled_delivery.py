"""Scheduled delivery through the runtime, on the virtual clock: a fetch waiting for records
is woken when a record's delivery time comes, and gets it then, not before; what is due
meanwhile flows; lag counts only what is owed now."""

from __future__ import annotations

from shareproxy.core.schedule import DELIVER_AT_HEADER
from shareproxy.core.store import SharePartitionKey
from tests.support.middle import MiddleRuntime, on_middle_runtime
from tests.support.share_calls import ACCEPT, GROUP, ack, fetch


def at(ms: int) -> list[tuple[str, bytes]]:
    return [(DELIVER_AT_HEADER, b"%d" % ms)]


@on_middle_runtime
async def test_a_waiting_fetch_gets_a_record_at_its_time_and_the_rest_at_once(
    runtime: MiddleRuntime,
):
    await runtime.configure(GROUP, deliver_at_header=True)
    t = runtime.topic()
    start = runtime.loop.clock_ms()
    runtime.produce(t, [(None, b"a"), (None, b"b", at(start + 5_000)), (None, b"c")])
    tp = await runtime.partition(t)
    assert await fetch(runtime, "m1", tp) == [(0, 0, 1), (2, 2, 1)]
    assert await ack(runtime, "m1", tp, 0, 0, ACCEPT) == 0
    assert await ack(runtime, "m1", tp, 2, 2, ACCEPT) == 0
    lag = (await runtime.runtime.group_admin.offsets(GROUP, None))[0].offsets
    assert lag is not None and (lag.lag, lag.waiting, lag.next_due_ms) == (0, 1, start + 5_000)
    assert await fetch(runtime, "m2", tp, wait_ms=4_000) == []  # never early
    waited_from = runtime.now()
    assert await fetch(runtime, "m2", tp, wait_ms=10_000) == [(1, 1, 1)]
    came = runtime.loop.clock_ms()
    assert start + 5_000 <= came <= start + 5_100, came - start  # woken within a sweep
    assert runtime.now() > waited_from


@on_middle_runtime
async def test_a_delay_queue_delivers_each_batch_its_delay_after_it_was_produced(
    runtime: MiddleRuntime,
):
    await runtime.configure(GROUP, delivery_delay_ms=3_000)
    t = runtime.topic()
    start = runtime.loop.clock_ms()
    runtime.produce(t, 5)
    tp = await runtime.partition(t)
    assert await fetch(runtime, "m1", tp, wait_ms=2_900) == []
    leader = runtime.partitions.loaded_leader(SharePartitionKey(GROUP, tp[0], 0))
    assert leader is not None and not leader.cache.batches  # the bytes of what waits: not kept
    reads = len(runtime.cluster.fetches)
    assert await fetch(runtime, "m1", tp, wait_ms=1_000) == [(0, 4, 1)]
    assert start + 3_000 <= runtime.loop.clock_ms() <= start + 3_100
    assert any(0 in f.values() for f in runtime.cluster.fetches[reads:])  # read again
