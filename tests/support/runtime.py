"""The runtime as ``Proxy.start`` composes it for share consumption, for in-process tests."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any
from uuid import UUID

from shareproxy.broker.consumers import ShareConsumers
from shareproxy.broker.consumption import Consumption
from shareproxy.broker.coordinator import Coordinator
from shareproxy.broker.group_commit import GroupCommitter
from shareproxy.broker.nodes import ClusterNodes
from shareproxy.broker.partitions import SharePartitions
from shareproxy.broker.upstream_feed import UpstreamFeed
from shareproxy.core.errors import ErrorCode
from shareproxy.core.group_settings import GroupSettings
from shareproxy.core.offset_reset import AutoOffsetReset, ResetStrategy
from shareproxy.core.share_session import ShareSessionCache
from shareproxy.core.store import PartitionWrite, SharePartitionKey
from shareproxy.embedded import TansuBroker
from shareproxy.persistence.nodes import NodeRecords
from shareproxy.persistence.repository import SqlShareStateStore
from shareproxy.upstream.client import Upstream, UpstreamSettings
from tests.support.topics import create_topic, produce

# consumers of the tests' topics read from the start, as the e2e proxies are configured
DEFAULTS = GroupSettings(auto_offset_reset=AutoOffsetReset(ResetStrategy.EARLIEST))


def clock_ms() -> int:
    return time.time_ns() // 1_000_000


class Runtime:
    """What ``Proxy.start`` composes for share consumption, on a real broker and store."""

    def __init__(self, broker: TansuBroker, store: SqlShareStateStore) -> None:
        self.broker = broker
        self.store = store
        self.settings: dict[str, GroupSettings] = {}
        self.upstream = Upstream(UpstreamSettings(broker.bootstrap))
        self.committer = GroupCommitter(store)
        self.partitions = SharePartitions(
            store, self.committer, self.upstream, self.settings_for, clock_ms
        )
        self.feed = UpstreamFeed(self.upstream, clock_ms)
        self.consumption = Consumption(
            self.partitions, self.feed, store, self.settings_for, clock_ms
        )
        self.sessions = ShareSessionCache()
        self.coordinator = Coordinator(
            store, self.upstream, self.partitions, self.sessions, self.settings_for, clock_ms
        )
        # a node that has not joined coordinates no group: share sessions are trusted, as on
        # a partition leader that is not the group's coordinator
        nodes = ClusterNodes(NodeRecords(store.engine), 0, 10_000, lambda why: None)
        self.consumers = ShareConsumers(
            self.consumption, self.sessions, self.coordinator, nodes, clock_ms
        )

    async def start(self) -> Runtime:
        await self.upstream.start()
        self.committer.start()
        self.partitions.start()
        self.feed.start()
        return self

    async def stop(self) -> None:
        """In the order ``Proxy.stop`` keeps."""
        await self.feed.stop()
        await self.partitions.stop()
        await self.committer.stop()
        await self.upstream.close()

    def settings_for(self, group_id: str) -> GroupSettings:
        return self.settings.get(group_id, DEFAULTS)

    def configure(self, group_id: str, **changes: object) -> None:
        """Group configs, as an IncrementalAlterConfigs would set them."""
        changed = replace(self.settings_for(group_id), **changes)  # type: ignore[arg-type]
        self.settings[group_id] = changed
        self.partitions.apply_settings(group_id, changed)

    def topic(self, partitions: int = 1) -> str:
        return create_topic(self.broker.bootstrap, partitions)

    def produce(self, topic: str, count: int, partitions: int = 1) -> None:
        produce(self.broker.bootstrap, topic, count, partitions)

    async def partition(self, topic: str, partition: int = 0) -> tuple[UUID, int]:
        """The (topic id, partition) a ShareFetch would name."""
        await self.upstream.refresh_metadata([topic])
        return self.upstream.topics[topic].topic_id, partition


class SlowWrites:
    """The real store, each transaction taking a while (a busy database)."""

    def __init__(self, store: SqlShareStateStore) -> None:
        self.store = store

    async def write(self, writes: Sequence[PartitionWrite]) -> dict[SharePartitionKey, ErrorCode]:
        await asyncio.sleep(0.3)
        return await self.store.write(writes)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)
