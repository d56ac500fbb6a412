"""Members joining a share group, on a real broker and store. The coordinator looks a joining
member's topics up afresh (Kafka's reads its current metadata), but joins share those lookups
instead of queueing for each other's: a burst of joins costs the cluster a couple of Metadata
requests, not one each, one after another. Only a join to an empty group writes to the store."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter

from shareproxy.runtime.groups.coordinator import Coordinator
from shareproxy.upstream.client import Upstream
from tests.support.runtime import BrokerRuntime

GROUP = "g-joins"
MEMBERS = 20


class CountedMetadata:
    """The real upstream's Metadata requests, counted as they are sent."""

    def __init__(self, upstream: Upstream) -> None:
        self.sent = 0
        self._read = upstream._read_metadata
        upstream._metadata_reads._read = self.read

    async def read(self, topics: list[str] | None) -> None:
        self.sent += 1
        await self._read(topics)


def coordinator_on(rt: BrokerRuntime) -> Coordinator:
    """A coordinator of every group, over the runtime's real parts."""
    return Coordinator(
        rt.store,
        rt.upstream,
        rt.partitions,
        rt.sessions,
        rt.settings_for,
        clock_ms=lambda: int(time.time() * 1000),
        forget_group=lambda group_id: None,
        coordinates=lambda group_id: True,
    )


async def join(coordinator: Coordinator, topic: str, member_id: str | None = None) -> None:
    result = await coordinator.heartbeat(
        GROUP,
        member_id or uuid.uuid4().hex[:22],
        0,
        subscribed=[topic],
        rack_id=None,
        client_id="joiner",
        client_host="127.0.0.1",
    )
    assert result.error is None


async def test_members_joining_together_share_the_lookups_of_their_topic(
    runtime: BrokerRuntime,
):
    topic = runtime.topic(partitions=6)
    counted = CountedMetadata(runtime.upstream)
    coordinator = coordinator_on(runtime)
    await asyncio.gather(*(join(coordinator, topic) for _ in range(MEMBERS)))
    group = coordinator.groups[GROUP]
    assert len(group.members) == MEMBERS
    topic_id, _ = group.topics[topic]
    # more members than partitions: each member's target is one partition, each shared evenly
    targets = Counter(p for m in group.members.values() for p in m.target[topic_id])
    assert sorted(targets.values()) == [3, 3, 3, 3, 4, 4]
    # one request for the first join, one shared by all that asked while it was out
    assert counted.sent <= 2
    assert await runtime.store.get_group(GROUP) is not None


async def test_a_join_to_a_group_emptied_and_deleted_meanwhile_brings_its_row_back(
    runtime: BrokerRuntime,
):
    """A batch repair (or an operator on another node) may delete a group once it is empty,
    before this node forgets it: the next member to join creates it again."""
    topic = runtime.topic()
    coordinator = coordinator_on(runtime)
    await join(coordinator, topic, "first-member-id-000001")
    left = await coordinator.heartbeat(
        GROUP,
        "first-member-id-000001",
        -1,
        subscribed=None,
        rack_id=None,
        client_id="",
        client_host="",
    )
    assert left.error is None and not coordinator.groups[GROUP].members
    assert await runtime.store.delete_group(GROUP)
    await join(coordinator, topic)
    assert await runtime.store.get_group(GROUP) is not None
    await coordinator.stop()
