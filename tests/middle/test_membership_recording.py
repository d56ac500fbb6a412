"""The coordinator's membership record (on the in-memory store, whose membership rules
tests/integration/test_store.py checks against the SQL stores): concurrent heartbeats of one
group must leave the latest view stored, whatever order their writes would finish in."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from shareproxy.core.group_settings import GroupSettings
from shareproxy.core.share_group import ShareGroup
from shareproxy.runtime.groups.coordinator import Coordinator
from tests.support.memory_store import MemoryStore
from tests.support.virtual_clock import virtual_clock


class FirstWriteSlow:
    """The store, with its first membership write held back: the race made certain."""

    def __init__(self, store: MemoryStore) -> None:
        self.store = store
        self.writes = 0

    async def record_membership(self, group_id: str, topics: Sequence[str], now: datetime) -> None:
        self.writes += 1
        if self.writes == 1:
            await asyncio.sleep(0.3)
        await self.store.record_membership(group_id, topics, now)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)


def _coordinator(store: MemoryStore, group: ShareGroup) -> Coordinator:
    coordinator = Coordinator(
        FirstWriteSlow(store),  # type: ignore[arg-type]
        upstream=None,  # type: ignore[arg-type]  # not used to record membership
        partitions=None,  # type: ignore[arg-type]
        sessions=None,  # type: ignore[arg-type]
        settings_for=lambda _: GroupSettings(),
        clock_ms=lambda: 1_700_000_000_000,
        forget_group=lambda group_id: None,
        coordinates=lambda group_id: True,
    )
    coordinator.groups[group.group_id] = group
    return coordinator


@virtual_clock
async def test_concurrent_heartbeats_leave_the_latest_membership_stored():
    store = MemoryStore()
    await store.ensure_group("g1")
    group = ShareGroup("g1")
    coordinator = _coordinator(store, group)
    group.heartbeat("m1", 0, 0, subscribed_topics=["a"])
    first = asyncio.create_task(coordinator._record_membership(group))  # writes ("a",), slowly
    await asyncio.sleep(0.05)
    group.heartbeat("m1", -1, 0)  # the member leaves: the group is empty
    await coordinator._record_membership(group)
    await first
    [stored] = await store.memberships()
    assert (stored.subscribed_topics, stored.empty_since is not None) == ((), True)


@virtual_clock
async def test_writes_queued_or_in_flight_when_their_group_is_deleted_do_not_bring_it_back():
    """Two quick heartbeats queue two writes; the group is deleted (an admin, or expiry) while
    the first is on its way and the second waits: neither may recreate the deleted row."""
    store = MemoryStore()
    await store.ensure_group("g1")  # as the coordinator does when the group is created
    group = ShareGroup("g1")
    coordinator = _coordinator(store, group)
    group.heartbeat("m1", 0, 0, subscribed_topics=["a"])
    first = asyncio.create_task(coordinator._record_membership(group))  # writes ("a",), slowly
    await asyncio.sleep(0.05)
    group.heartbeat("m1", -1, 0)
    second = asyncio.create_task(coordinator._record_membership(group))  # waits for the first
    await asyncio.sleep(0.05)
    async with coordinator.held():
        assert await store.delete_group("g1")
        coordinator.bury("g1")
    await asyncio.gather(first, second)
    assert group.state.value == "Dead"
    assert await store.memberships() == []
