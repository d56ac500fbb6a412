"""Refreshes of the group configs asked for together share one read of the store, and none is
answered by a read that began before it was asked; a stored value outlives narrowed bounds."""

from __future__ import annotations

import asyncio
from typing import Any

from shareproxy.core.group_config import GroupBounds
from shareproxy.core.group_settings import GroupSettings
from shareproxy.runtime.groups.group_configs import GroupConfigs
from tests.support.memory_store import MemoryStore


class CountingStore:
    """Only what a refresh reads; each version read waits until ``go`` is set."""

    def __init__(self) -> None:
        self.reads = 0
        self.version = 1
        self.go = asyncio.Event()

    async def configs_version(self) -> int:
        self.reads += 1
        seen = self.version
        await self.go.wait()
        return seen

    async def list_groups(self) -> list[Any]:
        return []


async def test_waiting_refreshes_share_one_read_begun_after_they_asked():
    store = CountingStore()
    configs = GroupConfigs(store, GroupSettings())  # type: ignore[arg-type]
    first = asyncio.create_task(configs.refresh())
    await asyncio.sleep(0)
    assert store.reads == 1  # the first read is under way
    store.version = 2  # a change the first read may have missed
    waiting = [asyncio.create_task(configs.refresh()) for _ in range(50)]
    await asyncio.sleep(0)
    store.go.set()
    await asyncio.gather(first, *waiting)
    assert store.reads == 2  # one more read, begun after the 50 asked, answered them all
    assert configs._version == 2
    await configs.refresh()
    assert store.reads == 3  # alone, a refresh reads


async def test_a_value_stored_before_the_bounds_narrowed_stays_in_force():
    """As on Kafka, whose brokers read a group's stored value as it is: narrowing the
    broker-level bounds later checks new values only."""
    store = MemoryStore()
    wide = GroupConfigs(store, GroupSettings(), GroupBounds(max_record_lock_duration_ms=60_000))
    await wide.load()
    await wide.alter("g", {"share.record.lock.duration.ms": "50000"})
    narrow = GroupConfigs(store, GroupSettings(), GroupBounds(max_record_lock_duration_ms=40_000))
    await narrow.load()
    assert narrow.settings_for("g").record_lock_duration_ms == 50_000
