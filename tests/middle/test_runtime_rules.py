"""The runtime's rules in-process on the middle tier (in-memory store, scripted upstream,
virtual clock): the partitions registry, the leaders, the upstream feed, consumption and group
commit, each test following one rule a user relies on (ARCHITECTURE.md), from acquisition to
the stored state. Waits (a lock timeout, a long poll, a slow store) pass on the virtual clock."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from shareproxy.core.acknowledgement import AckBatch
from shareproxy.core.errors import ErrorCode, ShareError
from shareproxy.core.states import AcknowledgeType, AcquireMode
from shareproxy.runtime.consuming.consumers import FetchLimits
from shareproxy.runtime.consuming.partitions import LOAD_WAIT_S
from shareproxy.upstream.client import UpstreamError
from tests.support.middle import MiddleRuntime, on_middle_runtime
from tests.support.runtime import SlowWrites
from tests.support.share_calls import ACCEPT, GROUP, RELEASE, ack, acquire, fetch, key, ranges


@on_middle_runtime
async def test_accepted_records_are_stored_before_the_answer_and_never_delivered_again(
    runtime: MiddleRuntime,
):
    t = runtime.topic()
    runtime.produce(t, 10)
    tp = await runtime.partition(t)
    got = await acquire(runtime, "m1", tp)
    assert ranges(got) == [(0, 9, 1)]
    assert got is not None and got.records, "the upstream batches come with the ranges"
    assert await ack(runtime, "m1", tp, 0, 9, ACCEPT) == ErrorCode.NONE
    stored = await runtime.store.read(key(tp))
    assert stored is not None
    assert stored.state.start_offset == 10  # SPSO moved past them, in the store
    assert await fetch(runtime, "m2", tp, wait_ms=300) == []


@on_middle_runtime
async def test_acknowledging_records_another_member_holds_changes_nothing(runtime: MiddleRuntime):
    t = runtime.topic()
    runtime.produce(t, 5)
    tp = await runtime.partition(t)
    assert await fetch(runtime, "m1", tp) == [(0, 4, 1)]
    before = await runtime.store.read(key(tp))
    assert await ack(runtime, "m2", tp, 0, 4, ACCEPT) == ErrorCode.INVALID_RECORD_STATE
    assert await ack(runtime, "m2", tp, 7, 9, ACCEPT) == ErrorCode.INVALID_REQUEST  # never read
    assert await runtime.store.read(key(tp)) == before
    assert await ack(runtime, "m1", tp, 0, 4, ACCEPT) == ErrorCode.NONE  # m1 still holds them


@on_middle_runtime
async def test_renewing_where_the_group_turned_it_off_is_an_invalid_record_state(
    runtime: MiddleRuntime,
):
    """share.renew.acknowledge.enable false: a Renew is refused as Kafka refuses it, and the
    records stay acquired by their member, their lock untouched."""
    t = runtime.topic()
    runtime.produce(t, 5)
    tp = await runtime.partition(t)
    await runtime.configure(GROUP, renew_acknowledge=False)
    assert await fetch(runtime, "m1", tp) == [(0, 4, 1)]
    renew = (AcknowledgeType.RENEW,)
    assert await ack(runtime, "m1", tp, 0, 4, renew) == ErrorCode.INVALID_RECORD_STATE
    assert await ack(runtime, "m1", tp, 0, 4, ACCEPT) == ErrorCode.NONE  # still m1's


@on_middle_runtime
async def test_a_refused_write_drops_the_leader_and_the_next_use_reloads_the_stored_state(
    runtime: MiddleRuntime,
):
    t = runtime.topic()
    runtime.produce(t, 10)
    tp = await runtime.partition(t)
    assert await fetch(runtime, "m1", tp, max_records=4, mode=AcquireMode.RECORD_LIMIT) == [
        (0, 3, 1)
    ]
    assert await ack(runtime, "m1", tp, 0, 3, ACCEPT) == ErrorCode.NONE
    assert await fetch(runtime, "m1", tp) == [(4, 9, 1)]
    leader = runtime.partitions.loaded_leader(key(tp))
    taken = await runtime.store.claim(key(tp))  # another writer takes the share-partition over
    assert taken is not None and taken.state_epoch > leader.state_epoch
    assert await ack(runtime, "m1", tp, 4, 9, ACCEPT) == ErrorCode.FENCED_STATE_EPOCH
    assert not leader.valid
    assert runtime.partitions.loaded_leader(key(tp)) is None
    # reloaded from the store: the first acceptance held, the refused one never happened, and
    # acquired state was not durable, so 4-9 are on their first delivery again
    assert await fetch(runtime, "m2", tp) == [(4, 9, 1)]
    reloaded = runtime.partitions.loaded_leader(key(tp))
    assert reloaded is not leader
    assert reloaded.state_epoch == taken.state_epoch + 1


@on_middle_runtime
async def test_a_retired_leader_never_writes_nor_evicts_its_successor(runtime: MiddleRuntime):
    t = runtime.topic()
    runtime.produce(t, 5)
    tp = await runtime.partition(t)
    assert await fetch(runtime, "m1", tp) == [(0, 4, 1)]
    old = runtime.partitions.loaded_leader(key(tp))
    runtime.committer.store = SlowWrites(runtime.store)  # type: ignore[assignment]
    accepting = asyncio.create_task(ack(runtime, "m1", tp, 0, 4, ACCEPT))
    await asyncio.sleep(0.05)  # the acceptance is being written...
    runtime.partitions.evict([key(tp)])  # ...when an admin reset replaces the state
    new = await runtime.partitions.leader(GROUP, *tp)  # and a fetch loads it again
    assert await accepting == ErrorCode.FENCED_STATE_EPOCH
    assert runtime.partitions.loaded_leader(key(tp)) is new
    writes = runtime.committer.writes
    await old.release_member("m1")  # a holder of the retired leader changes nothing
    await old.log_start_moved(3)
    assert runtime.committer.writes == writes
    assert await fetch(runtime, "m2", tp) == [(0, 4, 1)]


@on_middle_runtime
async def test_concurrent_first_uses_load_a_share_partition_once(runtime: MiddleRuntime):
    t = runtime.topic()
    tp = await runtime.partition(t)
    loaded = await asyncio.gather(*(runtime.partitions.leader(GROUP, *tp) for _ in range(5)))
    assert all(leader is loaded[0] for leader in loaded)
    stored = await runtime.store.read(key(tp))
    assert stored is not None and stored.state_epoch == loaded[0].state_epoch == 1


@on_middle_runtime
async def test_a_load_the_cluster_holds_up_is_answered_retriable_and_goes_on(
    runtime: MiddleRuntime,
):
    """A cluster that hangs would hold a request on a share-partition's load for the
    upstream's request timeout: it waits ``LOAD_WAIT_S``, then the load goes on, once, for
    the requests after it."""
    t = runtime.topic()
    tp = await runtime.partition(t)
    answering = asyncio.Event()
    list_offset = runtime.cluster.list_offset

    async def held(*args: Any, **kwargs: Any) -> int | None:
        await answering.wait()
        return await list_offset(*args, **kwargs)

    runtime.cluster.list_offset = held  # type: ignore[method-assign]
    asked = runtime.now()
    with pytest.raises(UpstreamError) as refused:
        async with asyncio.timeout(2 * LOAD_WAIT_S):  # never past it
            await runtime.partitions.leader(GROUP, *tp)
    assert refused.value.code == ErrorCode.REQUEST_TIMED_OUT
    assert runtime.now() - asked == LOAD_WAIT_S
    answering.set()
    leader = await runtime.partitions.leader(GROUP, *tp)
    assert runtime.now() - asked == LOAD_WAIT_S  # the load under way ended at once
    assert leader.state_epoch == 1  # loaded once: its state claimed once


@on_middle_runtime
async def test_a_partition_that_cannot_load_does_not_hold_the_sessions_others_back(
    runtime: MiddleRuntime,
):
    """A load that fails at once (its broker says another leads it) is that partition's
    error; the session's other partitions load as ever. Only a load past ``LOAD_WAIT_S``
    spares the ones after it the wait."""
    t = runtime.topic(partitions=3)
    tps = [await runtime.partition(t, p) for p in range(3)]
    list_offset = runtime.cluster.list_offset
    answering = asyncio.Event()

    async def partition_0_moved_1_held(topic: str, partition: int, *a: Any, **k: Any) -> Any:
        if partition == 0:
            raise UpstreamError("not the leader", ErrorCode.NOT_LEADER_OR_FOLLOWER)
        if partition == 1:
            await answering.wait()
        return await list_offset(topic, partition, *a, **k)

    runtime.cluster.list_offset = partition_0_moved_1_held  # type: ignore[method-assign]
    found, errors = await runtime.consumption.leaders(GROUP, [tps[0], tps[2]])
    assert [leader.key.partition for leader in found] == [2]
    assert errors == {tps[0]: ErrorCode.NOT_LEADER_OR_FOLLOWER}
    asked = runtime.now()
    found, errors = await runtime.consumption.leaders(GROUP, [tps[1], tps[0]])
    assert runtime.now() - asked == LOAD_WAIT_S  # partition 0 is not asked: no second wait
    assert found == [] and errors == {tps[1]: ErrorCode.REQUEST_TIMED_OUT} | {
        tps[0]: ErrorCode.REQUEST_TIMED_OUT
    }
    answering.set()


@on_middle_runtime
async def test_a_long_poll_wakes_on_a_release(runtime: MiddleRuntime):
    # at the in-flight cap nothing is read upstream (the tail poll stays quiet): only the
    # release itself can wake the waiting fetch
    # m2 alone takes what m1 released (with fair work on, it would take a share with m1)
    await runtime.configure(GROUP, max_record_locks=5, fair_acquisition=False)
    t = runtime.topic()
    runtime.produce(t, 5)
    tp = await runtime.partition(t)
    assert await fetch(runtime, "m1", tp) == [(0, 4, 1)]
    waiting = asyncio.create_task(fetch(runtime, "m2", tp, wait_ms=20_000))
    await asyncio.sleep(5)
    assert not waiting.done(), "nothing was acquirable: the fetch should still wait"
    released = runtime.now()
    assert await ack(runtime, "m1", tp, 0, 4, RELEASE) == ErrorCode.NONE
    assert await waiting == [(0, 4, 2)]
    assert runtime.now() - released < 0.01  # at once, not at the end of the 20 s wait


@on_middle_runtime
async def test_a_long_poll_wakes_on_new_upstream_records(runtime: MiddleRuntime):
    t = runtime.topic()
    tp = await runtime.partition(t)
    waiting = asyncio.create_task(fetch(runtime, "m1", tp, wait_ms=20_000))
    await asyncio.sleep(5)
    assert not waiting.done()
    runtime.produce(t, 3)
    produced = runtime.now()
    assert await waiting == [(0, 2, 1)]
    # the tail poll's long poll returns with them, not the end of the 20 s wait
    assert runtime.now() - produced < 0.01


@on_middle_runtime
async def test_a_lock_timeout_makes_records_available_and_wakes_a_waiting_fetch(
    runtime: MiddleRuntime,
):
    await runtime.configure(GROUP, record_lock_duration_ms=400, fair_acquisition=False)
    t = runtime.topic()
    runtime.produce(t, 5)
    tp = await runtime.partition(t)
    assert await fetch(runtime, "m1", tp) == [(0, 4, 1)]
    acquired = runtime.now()
    waiting = asyncio.create_task(fetch(runtime, "m2", tp, wait_ms=20_000))
    assert await waiting == [(0, 4, 2)]
    # once the 400 ms lock ended, at the next sweep of the locks (every 50 ms)
    assert 0.4 <= runtime.now() - acquired <= 0.46
    stored = await runtime.store.read(key(tp))  # the timeout was written: delivery count 1
    assert stored is not None
    assert [(b.first_offset, b.last_offset, b.delivery_count) for b in stored.state.batches] == [
        (0, 4, 1)
    ]
    assert await ack(runtime, "m1", tp, 0, 4, ACCEPT) == ErrorCode.INVALID_RECORD_STATE


@on_middle_runtime
async def test_a_closed_session_releases_what_its_member_holds(runtime: MiddleRuntime):
    t = runtime.topic()
    runtime.produce(t, 5)
    tp = await runtime.partition(t)
    assert await fetch(runtime, "m1", tp) == [(0, 4, 1)]
    await runtime.consumption.release(GROUP, "m1")
    assert await fetch(runtime, "m2", tp, wait_ms=0) == [(0, 4, 2)]


@on_middle_runtime
async def test_state_replaced_by_a_batch_repair_is_reloaded(runtime: MiddleRuntime):
    t = runtime.topic()
    runtime.produce(t, 10)
    tp = await runtime.partition(t)
    assert await fetch(runtime, "m1", tp) == [(0, 9, 1)]
    leader = runtime.partitions.loaded_leader(key(tp))
    await runtime.store.reset(key(tp), 8, t)  # what reconcile --apply does
    assert await runtime.partitions.evict_replaced() == [key(tp)]
    assert not leader.valid
    assert await fetch(runtime, "m2", tp) == [(8, 9, 1)]
    assert await runtime.partitions.evict_replaced() == []


@on_middle_runtime
async def test_a_share_session_naming_unknown_partitions_gets_kafkas_errors(runtime: MiddleRuntime):
    t = runtime.topic()
    topic_id, _ = await runtime.partition(t)
    leaders, errors = await runtime.consumption.leaders(
        GROUP, [(uuid.uuid4(), 0), (topic_id, 7), (topic_id, 0)]
    )
    assert list(errors.values()) == [  # as Kafka: an unknown id, a partition the topic lacks
        ErrorCode.UNKNOWN_TOPIC_ID,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ]
    assert [(ld.key.topic_id, ld.key.partition) for ld in leaders] == [(topic_id, 0)]


@on_middle_runtime
async def test_http_and_kafka_consumers_share_a_group_without_sharing_a_record(
    runtime: MiddleRuntime,
):
    t = runtime.topic()
    runtime.produce(t, 10)
    tp = await runtime.partition(t)
    assert await fetch(runtime, "kafka", tp, max_records=4, mode=AcquireMode.RECORD_LIMIT) == [
        (0, 3, 1)
    ]
    (named,) = await runtime.consumers.named([t, t])
    assert (named.name, named.topic_id, named.partitions) == (t, tp[0], (0,))
    limits = FetchLimits(3_000, max_records=100, max_bytes=1 << 20, mode=AcquireMode.RECORD_LIMIT)
    got = await runtime.consumers.fetch(GROUP, "http-1", [tp], limits)
    assert [(where, ranges(a)) for where, a in got.items()] == [(tp, [(4, 9, 1)])]
    assert await runtime.store.get_group(GROUP) is not None  # HTTP fetch creates the group
    codes = await runtime.consumers.acknowledge(
        GROUP,
        "http-1",
        {tp: [AckBatch(0, 3, ACCEPT)], (tp[0], 5): [AckBatch(0, 0, ACCEPT)]},
    )
    assert codes == {
        tp: ErrorCode.INVALID_RECORD_STATE,  # the Kafka consumer holds 0-3
        (tp[0], 5): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    }
    codes = await runtime.consumers.acknowledge(GROUP, "http-1", {tp: [AckBatch(4, 9, ACCEPT)]})
    assert codes == {tp: ErrorCode.NONE}
    assert runtime.consumers.known(["no-such-topic"]) == []
    with pytest.raises(ShareError) as refused:
        await runtime.consumers.named(["no-such-topic"])
    assert refused.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


@on_middle_runtime
async def test_a_deleted_topic_is_neither_acknowledged_nor_delivered_again_when_recreated(
    runtime: MiddleRuntime,
):
    """Kafka removes a deleted topic's share-partitions: acknowledging its records answers
    UNKNOWN_TOPIC_ID, and a topic recreated under the same name (a new topic id) starts
    afresh: nothing of the old one is delivered again, under either id."""
    t = runtime.topic()
    runtime.produce(t, 10)
    old = await runtime.partition(t)
    assert await fetch(runtime, "m1", old) == [(0, 9, 1)]
    runtime.cluster.delete_topic(t)
    await runtime.upstream.refresh_metadata([t])  # what the coordinator does every few seconds
    assert await ack(runtime, "m1", old, 0, 9, ACCEPT) == ErrorCode.UNKNOWN_TOPIC_ID
    runtime.cluster.create_topic(t)
    runtime.produce(t, 3)
    new = await runtime.partition(t)
    assert new[0] != old[0]
    leaders, errors = await runtime.consumption.leaders(GROUP, [old])
    assert (leaders, errors) == ([], {old: ErrorCode.UNKNOWN_TOPIC_ID})
    assert await fetch(runtime, "m1", new) == [(0, 2, 1)]  # the new topic's records only


@on_middle_runtime
async def test_members_sharing_a_partition_each_get_an_even_share_unless_the_group_opts_out(
    runtime: MiddleRuntime,
):
    t = runtime.topic()
    runtime.produce(t, 10)
    tp = await runtime.partition(t)
    assert await fetch(runtime, "m1", tp) == [(0, 9, 1)]  # alone: whole batches
    assert await ack(runtime, "m1", tp, 0, 9, RELEASE) == ErrorCode.NONE
    # m1 asked a moment ago: m2 takes an even share of the ten records, not all of them
    assert await fetch(runtime, "m2", tp) == [(0, 4, 2)]
    await runtime.consumption.release(GROUP, "m1")  # m1 left: it shares nothing more
    assert await fetch(runtime, "m2", tp) == [(5, 9, 2)]
    await runtime.configure(GROUP, fair_acquisition=False)  # share.fair.acquisition.enable=false
    assert await ack(runtime, "m2", tp, 0, 9, RELEASE) == ErrorCode.NONE
    assert await fetch(runtime, "m1", tp) == [(0, 4, 3), (5, 9, 3)]  # m2 asked lately: all


async def _m1_and_m2_assigned(runtime: MiddleRuntime, topic: str):
    """A coordinator (no proxy around it) whose group has members m1 and m2 on ``topic``, and
    whose assignment the partitions registry reads."""
    from shareproxy.core.share_session import ShareSessionCache
    from shareproxy.runtime.groups.coordinator import Coordinator

    coordinator = Coordinator(
        runtime.store,
        runtime.upstream,
        runtime.partitions,
        ShareSessionCache(),
        runtime.settings_for,
        runtime.clock,
        forget_group=lambda group_id: None,
        coordinates=lambda group_id: True,
    )
    runtime.partitions.members_assigned = lambda k: coordinator.members_assigned(
        k.group_id, k.topic_id, k.partition
    )
    for member in ("m1", "m2"):
        joined = await coordinator.heartbeat(
            GROUP, member, 0, subscribed=[topic], rack_id=None, client_id="c", client_host="h"
        )
        assert joined.error is None
    return coordinator


@on_middle_runtime
async def test_members_the_coordinator_assigned_share_the_first_fetch_after_a_start(
    runtime: MiddleRuntime,
):
    """Before any other member has fetched, the first one to fetch is alone as a fetcher; the
    coordinator's assignment says who else will come, so it takes its share, not the backlog."""
    t = runtime.topic()
    runtime.produce(t, 10)
    tp = await runtime.partition(t)
    coordinator = await _m1_and_m2_assigned(runtime, t)
    assert coordinator.members_assigned(GROUP, *tp) == 2  # one partition, shared by both
    assert await fetch(runtime, "m1", tp) == [(0, 4, 1)]  # m2 has not asked yet: half
    assert await fetch(runtime, "m2", tp) == [(5, 7, 1)]  # an even share of what is left


@on_middle_runtime
async def test_a_member_id_the_group_does_not_know_takes_a_fair_share_of_a_partition(
    runtime: MiddleRuntime,
):
    """ShareFetch does not ask the group about its member (as Kafka's broker), so fair work and
    key order meet member ids the coordinator does not know: such a member is one more sharer,
    never a crash, and the members the coordinator assigned keep their share."""
    t = runtime.topic()
    runtime.produce(t, 10)
    tp = await runtime.partition(t)
    await runtime.configure(GROUP, key_ordering=True)
    await _m1_and_m2_assigned(runtime, t)
    assert await fetch(runtime, "stranger", tp) == [(0, 4, 1)]  # two assigned: half
    mine = await fetch(runtime, "m1", tp)  # its keys, of what the stranger does not hold
    assert mine and all(5 <= first <= last <= 9 for first, last, _ in mine), mine
    assert await ack(runtime, "stranger", tp, 0, 4, ACCEPT) == ErrorCode.NONE


@on_middle_runtime
async def test_records_waiting_on_their_key_do_not_stop_reading_upstream(runtime: MiddleRuntime):
    """Key order: the first Available record may be one waiting on its key; records of other
    keys produced after it must still be read from upstream and delivered."""

    def produce_keyed(topic: str, keys: list[bytes]) -> None:
        runtime.produce(topic, [(k, b"v") for k in keys])

    await runtime.configure(GROUP, key_ordering=True)
    t = runtime.topic()
    produce_keyed(t, [b"hot"] * 10)
    tp = await runtime.partition(t)
    assert await fetch(runtime, "m1", tp) == [(0, 0, 1)]  # hot@0; hot@1..9 wait on it
    produce_keyed(t, [b"k%d" % i for i in range(20)])
    got = await fetch(runtime, "m2", tp, wait_ms=5_000)
    assert got and all(first >= 10 for first, _, _ in got), got


@on_middle_runtime
async def test_a_fetch_reads_upstream_for_what_it_can_still_take_beyond_the_cache(
    runtime: MiddleRuntime,
):
    """KIP-932's worked example, "fetch records 110, 120": a released record is cached, the
    next one is upstream only; one ShareFetch takes both, as Kafka's broker reads its log up
    to MaxRecords / MaxBytes in one go (DelayedShareFetch), not only what is cached."""
    await runtime.configure(GROUP, fair_acquisition=False)
    t = runtime.topic()
    runtime.produce(t, 10)
    tp = await runtime.partition(t)
    assert await fetch(runtime, "m1", tp) == [(0, 9, 1)]
    assert await ack(runtime, "m1", tp, 1, 9, ACCEPT) == ErrorCode.NONE
    assert await ack(runtime, "m1", tp, 0, 0, RELEASE) == ErrorCode.NONE
    runtime.produce(t, 1)  # offset 10: upstream, not in the cache
    assert await fetch(runtime, "m1", tp, wait_ms=3_000) == [(0, 0, 2), (10, 10, 1)]


@on_middle_runtime
async def test_a_batch_larger_than_max_bytes_is_delivered_whole_and_alone(runtime: MiddleRuntime):
    """KIP-74, as Kafka's fetch reads its log: at least one batch, even past MaxBytes, and no
    second one beyond it."""
    t = runtime.topic()
    runtime.produce(t, [(None, b"x" * 1000)] * 5)
    runtime.produce(t, [(None, b"y" * 1000)] * 5)
    tp = await runtime.partition(t)
    assert await fetch(runtime, "m", tp, max_bytes=100) == [(0, 4, 1)]
    assert await fetch(runtime, "m", tp, max_bytes=100, epoch=1) == [(5, 9, 1)]
