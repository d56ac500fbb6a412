"""The runtime in-process on the real parts it talks to: a Tansu broker and a migrated SQLite
store, for what the middle tier's fakes stand in for (tests/middle covers the runtime's rules
on them): records read from a real log and stored, a real broker's long poll waking a waiting
fetch, and a topic deleted and created again under its name."""

from __future__ import annotations

import asyncio
import time

from shareproxy.core.errors import ErrorCode
from tests.support.runtime import BrokerRuntime
from tests.support.share_calls import ACCEPT, GROUP, ack, acquire, fetch, key, ranges


async def test_accepted_records_are_stored_before_the_answer_and_never_delivered_again(
    runtime: BrokerRuntime,
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


async def test_a_long_poll_wakes_on_new_upstream_records(runtime: BrokerRuntime):
    t = runtime.topic()
    tp = await runtime.partition(t)
    waiting = asyncio.create_task(fetch(runtime, "m1", tp, wait_ms=20_000))
    await asyncio.sleep(0.5)
    assert not waiting.done()
    await asyncio.to_thread(runtime.produce, t, 3)
    produced = time.monotonic()
    assert await asyncio.wait_for(waiting, 5) == [(0, 2, 1)]
    assert time.monotonic() - produced < 2.0  # the tail poll, not the 20 s wait


async def test_a_deleted_topic_is_neither_acknowledged_nor_delivered_again_when_recreated(
    runtime: BrokerRuntime,
):
    """Kafka removes a deleted topic's share-partitions: acknowledging its records answers
    UNKNOWN_TOPIC_ID, and a topic recreated under the same name (a new topic id) starts
    afresh: nothing of the old one is delivered again, under either id."""
    from confluent_kafka.admin import AdminClient, NewTopic

    t = runtime.topic()
    runtime.produce(t, 10)
    old = await runtime.partition(t)
    assert await fetch(runtime, "m1", old) == [(0, 9, 1)]
    admin = AdminClient({"bootstrap.servers": runtime.broker.bootstrap})
    for f in admin.delete_topics([t]).values():
        f.result(30)
    await runtime.upstream.refresh_metadata([t])  # what the coordinator does every few seconds
    assert await ack(runtime, "m1", old, 0, 9, ACCEPT) == ErrorCode.UNKNOWN_TOPIC_ID
    for f in admin.create_topics([NewTopic(t, 1, 1)]).values():
        f.result(30)
    runtime.produce(t, 3)
    new = await runtime.partition(t)
    assert new[0] != old[0]
    leaders, errors = await runtime.consumption.leaders(GROUP, [old])
    assert (leaders, errors) == ([], {old: ErrorCode.UNKNOWN_TOPIC_ID})
    assert await fetch(runtime, "m1", new) == [(0, 2, 1)]  # the new topic's records only
