"""Share-group membership at the coordinator, as Kafka's GroupMetadataManager keeps it: only a
join (epoch 0) makes a group, so a leave or a stale heartbeat for a group the node does not hold
creates nothing and brings no deleted group back."""

from __future__ import annotations

import asyncio

from shareproxy.core.share_group import HeartbeatError, HeartbeatResult
from shareproxy.runtime.groups.share_group_ids import REMEMBERED_MS
from tests.support.middle import MiddleRuntime, on_middle_runtime

GROUP = "g-membership"


async def heartbeat(
    runtime: MiddleRuntime, member: str, epoch: int, topic: str | None = None
) -> HeartbeatResult:
    return await runtime.coordinator.heartbeat(
        GROUP,
        member,
        epoch,
        subscribed=[topic] if topic else None,
        rack_id=None,
        client_id="c",
        client_host="h",
    )


@on_middle_runtime(coordinates=True)
async def test_a_leave_or_a_stale_heartbeat_for_no_group_creates_nothing(runtime: MiddleRuntime):
    for epoch in (-1, 3):
        answer = await heartbeat(runtime, "m", epoch)
        assert answer.error is HeartbeatError.GROUP_ID_NOT_FOUND, epoch
    assert GROUP not in runtime.coordinator.groups
    assert await runtime.store.get_group(GROUP) is None


@on_middle_runtime(coordinates=True)
async def test_a_deleted_group_does_not_come_back_with_a_stale_heartbeat(runtime: MiddleRuntime):
    t = runtime.topic()
    joined = await heartbeat(runtime, "m", 0, t)
    assert joined.error is None
    assert (await heartbeat(runtime, "m", -1)).error is None
    await runtime.runtime.group_admin.delete_group(GROUP)
    stale = await heartbeat(runtime, "m", joined.member_epoch)
    assert stale.error is HeartbeatError.GROUP_ID_NOT_FOUND
    assert await runtime.store.get_group(GROUP) is None


@on_middle_runtime(coordinates=True)
async def test_a_member_of_a_group_held_elsewhere_before_is_unknown_and_rejoins(
    runtime: MiddleRuntime,
):
    t = runtime.topic()
    joined = await heartbeat(runtime, "m", 0, t)
    runtime.coordinator.groups.clear()  # as a node that just took the group over knows it
    stale = await heartbeat(runtime, "m", joined.member_epoch)
    assert stale.error is HeartbeatError.UNKNOWN_MEMBER_ID
    assert (await heartbeat(runtime, "m", 0, t)).error is None


@on_middle_runtime(coordinates=True)
async def test_a_share_group_cannot_take_an_id_the_upstream_holds(runtime: MiddleRuntime):
    """One namespace, as in Kafka's coordinator: a consumer group of the cluster keeps its id."""
    t = runtime.topic()
    runtime.cluster.consumer_groups.add(GROUP)
    refused = await heartbeat(runtime, "m", 0, t)
    assert (refused.error, refused.message) == (
        HeartbeatError.GROUP_ID_NOT_FOUND,
        f"Group {GROUP} is not a share group.",
    )
    assert GROUP not in runtime.coordinator.groups
    assert await runtime.store.get_group(GROUP) is None


@on_middle_runtime(coordinates=True)
async def test_a_new_group_waits_while_the_upstream_cannot_say_whether_its_id_is_taken(
    runtime: MiddleRuntime,
):
    t = runtime.topic()
    runtime.cluster.outage = True
    waiting = await heartbeat(runtime, "m", 0, t)
    assert waiting.error is HeartbeatError.COORDINATOR_NOT_AVAILABLE  # retriable: joins again
    assert await runtime.store.get_group(GROUP) is None
    runtime.cluster.outage = False
    assert (await heartbeat(runtime, "m", 0, t)).error is None


@on_middle_runtime(coordinates=True)
async def test_share_group_ids_are_known_at_once_here_and_within_seconds_from_elsewhere(
    runtime: MiddleRuntime,
):
    """The consumer-group APIs ask on every request, so the answer is remembered a few seconds:
    a group this node coordinates is known at once, one another node made a little later."""
    admin = runtime.runtime.group_admin
    assert not await admin.is_share_group(GROUP)
    assert (await heartbeat(runtime, "m", 0, runtime.topic())).error is None
    assert await admin.is_share_group(GROUP)
    other = "g-made-elsewhere"
    assert not await admin.is_share_group(other)
    await runtime.store.ensure_group(other)  # as another node's join stores it
    assert not await admin.is_share_group(other)
    await asyncio.sleep(REMEMBERED_MS / 1000)
    assert await admin.is_share_group(other)
    assert not await admin.is_share_group("bad\x00id")  # no group can have it
