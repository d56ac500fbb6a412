"""An operator's use cases on single in-flight records (GroupAdmin's ``records``): a page of a
share-partition's ranges, a release, accept or reject of chosen offsets, and the release of
everything a member holds in a group.

The live state of a share-partition is its leader's, on the node placement names (which may
not be the group's coordinator): ``led_elsewhere`` tells the admin API where to pass a call
about one share-partition on to. A member's locks are held by the leaders of the partitions it
fetched from, on any node: each node releases those it holds.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from uuid import UUID

from shareproxy.core.errors import ErrorCode, ShareError
from shareproxy.core.persisted import StateDelta
from shareproxy.core.record_actions import MAX_PAGE, RecordAction, RecordsPage, check_page
from shareproxy.core.share_partition import SharePartition
from shareproxy.core.store import SharePartitionKey, ShareStateStore
from shareproxy.runtime.cluster import NodeAddress
from shareproxy.runtime.consuming.leader import SharePartitionLeader
from shareproxy.runtime.consuming.partitions import SharePartitions
from shareproxy.upstream.client import Upstream
from shareproxy.upstream.lookups import topic_named


@dataclass(frozen=True, slots=True)
class Released:
    """The offset runs of one share-partition whose locks a member's release ended."""

    topic: str
    partition: int
    offsets: list[tuple[int, int]]


class InFlightRecords:
    def __init__(
        self,
        store: ShareStateStore,
        partitions: SharePartitions,
        upstream: Upstream,
        require_group: Callable[[str], Awaitable[None]],
        leader_at: Callable[[UUID, int], NodeAddress | None],
    ) -> None:
        self.store = store
        self.partitions = partitions
        self.upstream = upstream
        self.require_group = require_group  # GROUP_ID_NOT_FOUND for a group that has none
        self.leader_at = leader_at  # the node leading a partition, when not this one

    async def led_elsewhere(self, topic: str, partition: int) -> NodeAddress | None:
        """The live node leading the partition's share-partitions when not this one: the admin
        API passes a call about one of them on to it. UNKNOWN_TOPIC_OR_PARTITION for a
        partition the cluster does not have."""
        _, topic_id = await self._partition(topic, partition)
        return self.leader_at(topic_id, partition)

    async def page(
        self, group_id: str, topic: str, partition: int, from_offset: int | None, limit: int
    ) -> RecordsPage:
        """The live records where this node has the share-partition loaded, else as stored
        (nothing is Acquired then); nothing is loaded or claimed to answer."""
        check_page(from_offset, limit)
        key = await self._key(group_id, topic, partition)
        leader = self.partitions.loaded_leader(key)
        if leader is not None and leader.valid:
            return await leader.page(from_offset, limit)
        loaded = await self.store.read(key)
        if loaded is None:
            raise _no_state(group_id, topic, partition)
        return SharePartition.from_persisted(loaded.state).page(from_offset, limit)

    async def act(
        self,
        group_id: str,
        topic: str,
        partition: int,
        action: RecordAction,
        first: int,
        last: int,
    ) -> RecordsPage:
        """Apply ``action`` to offsets first..last, all or none, durable before it returns;
        the records from ``first`` as they are now."""
        key = await self._key(group_id, topic, partition)
        loaded = self.partitions.loaded_leader(key)
        if (loaded is None or not loaded.valid) and await self.store.read(key) is None:
            raise _no_state(group_id, topic, partition)  # not created by a refused call
        leader = await self.partitions.leader(group_id, key.topic_id, partition)

        def change(sp: SharePartition, now_ms: int) -> tuple[StateDelta, None]:
            return sp.act(action, first, last, now_ms), None

        await leader.operator_change(change)
        now = await leader.page(first, min(last - first + 1, MAX_PAGE))
        return RecordsPage(now.spso, now.speo, [r for r in now.runs if r.first <= last], None)

    async def release_member(
        self, group_id: str, member_id: str, authorize: Callable[[list[str]], None]
    ) -> list[Released]:
        """End every lock the member holds in the group's share-partitions this node leads,
        as when its share session closes (delivery counts kept). ``authorize`` gets the names
        of the topics involved before anything changes, and raises to refuse."""
        await self.require_group(group_id)
        holding = [ld for ld in self.partitions.leaders_of(group_id) if ld.holds(member_id)]
        authorize(sorted({ld.topic for ld in holding}))
        out = []
        for leader in sorted(holding, key=lambda ld: (ld.topic, ld.key.partition)):
            runs = await _release(leader, member_id)
            if runs:
                out.append(Released(leader.topic, leader.key.partition, runs))
        return out

    @staticmethod
    def require_released_or_member(
        group_id: str, member_id: str, released: int, known: Iterable[bool | None]
    ) -> None:
        """A release that ended no lock on any node is UNKNOWN_MEMBER_ID where the group's
        coordinator (a ``known`` that is not None) does not have the member: a mistyped id is
        refused, not answered with nothing. A member of the group that held no lock releases
        nothing, and so does any member while no coordinator answered."""
        said = [k for k in known if k is not None]
        if released or not said or any(said):
            return
        raise ShareError(
            ErrorCode.UNKNOWN_MEMBER_ID,
            f"share group {group_id!r} has no member {member_id!r} and no node holds locks for it "
            "(`groups describe` lists its members)",
        )

    async def _partition(self, topic: str, partition: int) -> tuple[str, UUID]:
        info = await topic_named(self.upstream, topic)
        if partition not in info.leaders:
            missing = f"topic {topic!r} has no partition {partition}"
            raise ShareError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, missing)
        return topic, info.topic_id

    async def _key(self, group_id: str, topic: str, partition: int) -> SharePartitionKey:
        await self.require_group(group_id)
        _, topic_id = await self._partition(topic, partition)
        return SharePartitionKey(group_id, topic_id, partition)


async def _release(leader: SharePartitionLeader, member_id: str) -> list[tuple[int, int]]:
    def change(sp: SharePartition, now_ms: int) -> tuple[StateDelta, list[tuple[int, int]]]:
        held = sp.held_by(member_id)
        return sp.release_member(member_id, now_ms), held

    try:
        return await leader.operator_change(change)
    except ShareError as e:
        if e.code == ErrorCode.NOT_LEADER_OR_FOLLOWER:
            return []  # let go meanwhile: its locks ended with it
        raise


def _no_state(group_id: str, topic: str, partition: int) -> ShareError:
    return ShareError(
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        f"share group {group_id!r} has no state for {topic}:{partition} (never consumed there)",
    )
