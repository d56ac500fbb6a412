"""The runtime's rules that depend on time, on the virtual clock: redelivery back-off, the
acquisition lock and its renewal, the delivery count limit, and a store or cluster outage that
ends. Each wait is measured exactly, which the end-to-end tests (real clients, a loaded
machine) can only bound."""

from __future__ import annotations

import asyncio

from shareproxy.core.backoff import RedeliveryBackoff
from shareproxy.core.errors import ErrorCode
from shareproxy.core.states import AcknowledgeType, ArchiveReason
from tests.support.middle import MiddleRuntime, on_middle_runtime
from tests.support.share_calls import ACCEPT, GROUP, RELEASE, ack, fetch, key, share_fetch

# the lock sweep runs every 50 ms: a record whose wait ended is acquirable by the next one
SWEEP_S = 0.05


@on_middle_runtime
async def test_a_released_record_comes_back_after_a_back_off_growing_to_its_bound(
    runtime: MiddleRuntime,
):
    await runtime.configure(
        GROUP,
        redelivery_backoff=RedeliveryBackoff(initial_ms=400, multiplier=2.0, max_ms=1600),
        delivery_count_limit=6,
    )
    t = runtime.topic()
    runtime.produce(t, 1)
    tp = await runtime.partition(t)
    waits = []
    released_at = None
    for delivery in range(1, 7):
        assert await fetch(runtime, "m1", tp, wait_ms=30_000) == [(0, 0, delivery)]
        if released_at is not None:
            waits.append(runtime.now() - released_at)
        released_at = runtime.now()
        assert await ack(runtime, "m1", tp, 0, 0, RELEASE) == ErrorCode.NONE
    for waited, configured in zip(waits, [0.4, 0.8, 1.6, 1.6, 1.6], strict=True):
        # the runtime's clock counts whole milliseconds: a wait may read a millisecond short
        assert configured - 0.001 <= waited <= configured + SWEEP_S, waits
    # released on its last delivery: archived at once, never delivered again
    assert await fetch(runtime, "m1", tp, wait_ms=10_000) == []
    stored = await runtime.store.read(key(tp))
    assert stored is not None and stored.state.start_offset == 1
    [archived] = await runtime.store.archived_page(GROUP, None, 0, 10)
    assert (archived.first_offset, archived.delivery_count, archived.reason) == (
        0,
        6,
        ArchiveReason.DELIVERY_LIMIT,
    )


@on_middle_runtime
async def test_the_back_off_is_stored_and_holds_for_a_leader_loaded_again(
    runtime: MiddleRuntime,
):
    """A node that loads the share-partition after a crash finds the wait in the store."""
    await runtime.configure(GROUP, redelivery_backoff=RedeliveryBackoff(initial_ms=6_000))
    t = runtime.topic()
    runtime.produce(t, 1)
    tp = await runtime.partition(t)
    assert await fetch(runtime, "m1", tp) == [(0, 0, 1)]
    released_at = runtime.now()
    assert await ack(runtime, "m1", tp, 0, 0, RELEASE) == ErrorCode.NONE
    runtime.partitions.evict([key(tp)])  # as a node that starts afresh
    assert await fetch(runtime, "m2", tp, wait_ms=30_000) == [(0, 0, 2)]
    assert 6.0 - 0.001 <= runtime.now() - released_at <= 6.0 + SWEEP_S


@on_middle_runtime
async def test_an_acquisition_lock_times_out_and_a_renewal_holds_it_for_another_duration(
    runtime: MiddleRuntime,
):
    await runtime.configure(GROUP, record_lock_duration_ms=30_000, fair_acquisition=False)
    t = runtime.topic()
    runtime.produce(t, 2)
    tp = await runtime.partition(t)
    assert await fetch(runtime, "m1", tp) == [(0, 1, 1)]
    await asyncio.sleep(20)
    renew = (AcknowledgeType.RENEW,)
    assert await ack(runtime, "m1", tp, 1, 1, renew) == ErrorCode.NONE  # 1 held until t=50 s
    await asyncio.sleep(10.1)  # t = 30.1 s: 0's lock ended, 1's holds
    assert await fetch(runtime, "m2", tp, wait_ms=0) == [(0, 0, 2)]
    assert await ack(runtime, "m1", tp, 0, 0, ACCEPT) == ErrorCode.INVALID_RECORD_STATE
    assert await fetch(runtime, "m2", tp, wait_ms=19_800) == []  # t = 49.9 s: still m1's
    assert await fetch(runtime, "m2", tp, wait_ms=1_000) == [(1, 1, 2)]


@on_middle_runtime
async def test_a_late_acknowledgement_of_records_settled_since_is_answered_none(
    runtime: MiddleRuntime,
):
    """m1's lock ended and m2 accepted the records, so SPSO passed them: m1's acknowledgement,
    late, is passed over as Kafka passes over offsets below its start offset, not refused, and
    changes nothing; while they were still in flight it was INVALID_RECORD_STATE."""
    await runtime.configure(GROUP, record_lock_duration_ms=400, fair_acquisition=False)
    t = runtime.topic()
    runtime.produce(t, 5)
    tp = await runtime.partition(t)
    assert await fetch(runtime, "m1", tp) == [(0, 4, 1)]
    assert await fetch(runtime, "m2", tp, wait_ms=20_000) == [(0, 4, 2)]
    assert await ack(runtime, "m1", tp, 0, 4, ACCEPT) == ErrorCode.INVALID_RECORD_STATE
    assert await ack(runtime, "m2", tp, 0, 4, ACCEPT) == ErrorCode.NONE
    stored = await runtime.store.read(key(tp))
    assert await ack(runtime, "m1", tp, 0, 4, RELEASE) == ErrorCode.NONE
    assert await runtime.store.read(key(tp)) == stored
    assert await fetch(runtime, "m3", tp, wait_ms=1_000) == []


@on_middle_runtime
async def test_a_store_outage_refuses_acknowledgements_retriably_and_loses_nothing(
    runtime: MiddleRuntime,
):
    """A write the store refuses retires the share-partition's leader: its next use loads the
    stored state again, in which the records were only ever delivered, so they go out again
    (at least once) and the acknowledgement sent again is refused as for records not held."""
    t = runtime.topic()
    runtime.produce(t, 5)
    tp = await runtime.partition(t)
    assert await fetch(runtime, "m1", tp) == [(0, 4, 1)]
    runtime.store.outage = True
    assert await ack(runtime, "m1", tp, 0, 4, ACCEPT) == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert runtime.partitions.loaded_leader(key(tp)) is None
    await asyncio.sleep(10)
    runtime.store.outage = False
    assert await ack(runtime, "m1", tp, 0, 4, ACCEPT) == ErrorCode.INVALID_RECORD_STATE
    got = await fetch(runtime, "m2", tp)
    assert [(first, last) for first, last, _ in got] == [(0, 4)]
    assert await ack(runtime, "m2", tp, 0, 4, ACCEPT) == ErrorCode.NONE
    stored = await runtime.store.read(key(tp))
    assert stored is not None and stored.state.start_offset == 5


@on_middle_runtime
async def test_a_cluster_outage_is_retriable_and_delays_records_without_losing_them(
    runtime: MiddleRuntime,
):
    t = runtime.topic()
    tp = await runtime.partition(t)
    runtime.produce(t, 3)
    runtime.cluster.outage = True  # the proxy cannot reach the cluster
    fetched = await share_fetch(runtime, "m1", tp)
    assert fetched.errors == {tp: ErrorCode.REQUEST_TIMED_OUT}  # a client retries it
    await asyncio.sleep(10)
    runtime.cluster.outage = False
    assert await fetch(runtime, "m1", tp) == [(0, 2, 1)]
    assert await ack(runtime, "m1", tp, 0, 2, ACCEPT) == ErrorCode.NONE
