"""Group administration through the runtime, on a node that coordinates its groups: what only
an empty group may undergo (an offset reset, offsets altered or deleted, the group deleted) is
done while no member can join, as Kafka's coordinator does it."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from shareproxy.core.errors import ErrorCode
from shareproxy.core.store import SharePartitionKey
from tests.support.middle import MiddleRuntime, on_middle_runtime
from tests.support.share_calls import ACCEPT, GROUP, ack, fetch


@on_middle_runtime(coordinates=True)
async def test_no_member_joins_while_an_offset_reset_writes(runtime: MiddleRuntime):
    """An empty group's reset writes each share-partition's new SPSO; a member whose heartbeat
    arrives meanwhile joins only once every write is done, so it never consumes from a
    partition that is still to be reset."""
    t = runtime.topic(partitions=3)
    for p in range(3):
        runtime.produce(t, 5, partition=p)
    await runtime.upstream.refresh_metadata([t])
    topic_id = runtime.upstream.topics[t].topic_id
    for p in range(3):  # the group has state for every partition, nothing acknowledged
        assert await fetch(runtime, "m0", (topic_id, p)) == [(0, 4, 1)]
        assert await ack(runtime, "m0", (topic_id, p), 0, 4, ACCEPT) == ErrorCode.NONE
    admin = runtime.runtime.group_admin
    written = []
    reset = runtime.store.reset

    async def slow_reset(key: SharePartitionKey, start_offset: int, topic: str | None = None):
        await asyncio.sleep(1.0)  # each write takes a second: the three take three
        written.append(key.partition)
        return await reset(key, start_offset, topic)

    runtime.store.reset = slow_reset  # type: ignore[method-assign]
    resetting = asyncio.create_task(
        admin.reset_offsets(GROUP, "earliest", dry_run=False, now=datetime.now(UTC))
    )
    await asyncio.sleep(1.5)  # the reset is writing; a consumer starts
    assert written == [0]
    joining = asyncio.create_task(
        runtime.coordinator.heartbeat(
            GROUP, "m1", 0, subscribed=[t], rack_id=None, client_id="c", client_host="h"
        )
    )
    done, _ = await asyncio.wait({resetting, joining}, return_when=asyncio.FIRST_COMPLETED)
    assert resetting in done, "a member joined while the reset was still writing"
    plan = resetting.result()
    assert [step.new_spso for step in plan] == [0, 0, 0]
    assert (await joining).error is None
    for p in range(3):
        stored = await runtime.store.read(SharePartitionKey(GROUP, topic_id, p))
        assert stored is not None and stored.state.start_offset == 0


@on_middle_runtime(coordinates=True)
async def test_offsets_carry_the_partition_leader_epoch_the_cluster_gives(runtime: MiddleRuntime):
    """DescribeShareGroupOffsets answers the leader epoch Kafka's state records: that of the
    partition leader, here the upstream partition's as last read, not a constant."""
    t = runtime.topic(partitions=2)
    runtime.cluster.leader_epochs[(t, 1)] = 7
    runtime.produce(t, 3, partition=1)
    await runtime.upstream.refresh_metadata([t])
    topic_id = runtime.upstream.topics[t].topic_id
    assert await fetch(runtime, "m0", (topic_id, 1)) == [(0, 2, 1)]
    rows = await runtime.runtime.group_admin.offsets(GROUP, [t])
    assert [(r.partition, r.leader_epoch) for r in rows] == [(0, 0), (1, 7)]
