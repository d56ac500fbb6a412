"""Share-group membership at the coordinator, as Kafka's GroupMetadataManager keeps it: only a
join (epoch 0) makes a group, so a leave or a stale heartbeat for a group the node does not hold
creates nothing and brings no deleted group back."""

from __future__ import annotations

from shareproxy.core.share_group import HeartbeatError, HeartbeatResult
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
