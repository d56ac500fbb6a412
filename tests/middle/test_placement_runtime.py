"""A share-partition leader and the live nodes changing under it: a node that stops leading a
partition while it loads, or while a fetch waits, keeps nothing of it and acquires nothing
from it."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from shareproxy.core.errors import ErrorCode, ShareError
from shareproxy.core.states import AcquireMode
from shareproxy.node import holdings
from tests.support.middle import MiddleRuntime, on_middle_runtime


def placement(runtime: MiddleRuntime) -> dict[str, bool]:
    """Whether this node leads, as the live nodes would decide it, switched by the test."""
    here = {"leads": True}
    runtime.partitions.leads = lambda topic_id, partition: here["leads"]
    return here


@on_middle_runtime
async def test_a_partition_that_moves_away_while_it_loads_is_not_kept(runtime: MiddleRuntime):
    placement_ = placement(runtime)
    t = runtime.topic()
    runtime.produce(t, 5)
    tid, p = await runtime.partition(t)
    loading = asyncio.create_task(runtime.partitions.leader("g", tid, p))
    await asyncio.sleep(0)  # the load is under way (it waits on the broker and the store)
    placement_["leads"] = False  # the live nodes changed: another node leads it now
    runtime.partitions.let_go()
    with pytest.raises(ShareError) as refused:
        await loading
    assert refused.value.code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert runtime.partitions.loaded() == []
    placement_["leads"] = True  # back here later: loaded afresh, not a stale object
    again = await runtime.partitions.leader("g", tid, p)
    assert again.valid and again.still_led()


@on_middle_runtime
async def test_a_fetch_that_waited_acquires_nothing_once_the_partition_moved(
    runtime: MiddleRuntime,
):
    placement_ = placement(runtime)
    t = runtime.topic()
    tid, p = await runtime.partition(t)
    leader = await runtime.partitions.leader("g", tid, p)
    member = uuid.uuid4().hex
    waiting = asyncio.create_task(
        runtime.consumption.acquire(
            [leader], member, max_wait_ms=3000, max_records=100, max_bytes=1 << 20,
            mode=AcquireMode.BATCH_OPTIMIZED,
        )
    )  # fmt: skip
    await asyncio.sleep(0.3)
    placement_["leads"] = False  # its lease lapsed, say, while the fetch waited
    runtime.produce(t, 5)  # records arrive: the waiting fetch wakes up
    assert await waiting == {}
    got = await leader.acquire(member, 100, AcquireMode.BATCH_OPTIMIZED, 1 << 20)
    assert got.acquired == []  # nor directly: the check is made under the leader's mutex
    placement_["leads"] = True
    assert (await leader.acquire(member, 100, AcquireMode.BATCH_OPTIMIZED, 1 << 20)).acquired


@on_middle_runtime
async def test_readiness_the_node_directory_and_the_gauges_count_what_this_node_leads_alike(
    runtime: MiddleRuntime,
):
    t = runtime.topic(partitions=3)
    keys = [await runtime.partition(t, p) for p in range(3)]
    kept, retired, moved = [await runtime.partitions.leader("g", tid, p) for tid, p in keys]
    retired.invalidate()  # its stored state was replaced: it is reloaded on next use
    # and the live nodes changed: this node leads only the first partition now
    runtime.partitions.leads = lambda topic_id, partition: partition == kept.key.partition

    def leads_here() -> dict[str, object]:
        owned = holdings.owned(runtime.nodes, runtime.partitions, runtime.coordinator)
        figures = holdings.live_state(
            runtime.nodes, runtime.partitions, runtime.coordinator, runtime.runtime.census,
            runtime.sessions, [], runtime.upstream,
        )  # fmt: skip
        return {
            "readyz": owned["share_partitions_led"],
            "nodes": runtime.runtime.directory.this_node().share_partitions_led,
            "gauge": figures.partitions_led,
        }

    assert moved.valid  # loaded, not retired, but no longer this node's
    assert leads_here() == {"readyz": [f"g/{t}/{kept.key.partition}"], "nodes": 1, "gauge": 1}


@on_middle_runtime(coordinates=True)
async def test_the_nodes_group_and_share_partition_gauges_add_up_to_the_clusters(
    runtime: MiddleRuntime,
):
    """Each node counts the groups it coordinates, with their stored share-partitions, so the
    dashboards' sums over the nodes count each once (they took the largest node's before)."""
    t = runtime.topic(partitions=2)
    keys = [await runtime.partition(t, p) for p in range(2)]
    for group in ("a", "b", "c"):
        await runtime.store.ensure_group(group)
        for tid, p in keys:
            await runtime.partitions.leader(group, tid, p)
    await runtime.runtime.census.count()

    def figures_of_a_node_coordinating(groups: set[str]) -> tuple[int, int]:
        runtime.nodes.coordinates = lambda group_id: group_id in groups  # type: ignore[method-assign]
        figures = holdings.live_state(
            runtime.nodes, runtime.partitions, runtime.coordinator, runtime.runtime.census,
            runtime.sessions, [], runtime.upstream,
        )  # fmt: skip
        return sum(figures.groups_by_state.values()), figures.partitions

    one, other = figures_of_a_node_coordinating({"a"}), figures_of_a_node_coordinating({"b", "c"})
    assert (one, other) == ((1, 2), (2, 4))
