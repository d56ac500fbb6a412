"""The runtime as ``Proxy.start`` builds it (``shareproxy.node.wiring.build_runtime``), for
in-process tests: on a real broker and store, or on the middle tier's fakes."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, Self
from uuid import UUID

from shareproxy.core.errors import ErrorCode
from shareproxy.core.group_settings import GroupSettings
from shareproxy.core.nodes import NodeRegistry
from shareproxy.core.offset_reset import AutoOffsetReset, ResetStrategy
from shareproxy.core.store import PartitionWrite, SharePartitionKey
from shareproxy.demo.tansu import TansuBroker
from shareproxy.node.wiring import RuntimeStore, build_runtime, clock_ms
from shareproxy.persistence.nodes import NodeRecords
from shareproxy.persistence.repository import SqlShareStateStore
from shareproxy.runtime.cluster import ClusterNodes
from shareproxy.settings.model import Settings
from shareproxy.upstream.client import Upstream, UpstreamSettings
from tests.support.topics import create_topic, produce

# consumers of the tests' topics read from the start, as the e2e proxies are configured
DEFAULTS = GroupSettings(auto_offset_reset=AutoOffsetReset(ResetStrategy.EARLIEST))


class ThisNodeOnly(ClusterNodes):
    """This node leads every partition; it coordinates every group or none. Coordinating
    none, share sessions are trusted, as on a partition leader that is not the group's
    coordinator; coordinating all, the node knows each group's members, as a node alone."""

    coordinating = False

    def leads(self, topic_id: UUID, partition: int) -> bool:
        return True

    def coordinates(self, group_id: str) -> bool:
        return self.coordinating


class Runtime:
    """What ``Proxy.start`` composes, for a node that leads every partition and coordinates
    no group, or every group (``coordinates``); it does not join the live nodes. On a real
    broker and store (``BrokerRuntime``), or on the middle tier's scripted upstream and
    in-memory store (``middle.MiddleRuntime``). ``settings``: the node's, as ``serve`` takes
    them."""

    def __init__(
        self,
        store: RuntimeStore,
        upstream: Upstream,
        registry: NodeRegistry,
        clock: Callable[[], int] = clock_ms,
        *,
        coordinates: bool = False,
        **settings: Any,
    ) -> None:
        self.store = store
        self.upstream = upstream
        self.clock = clock
        self.nodes = ThisNodeOnly(registry, 0, 10_000, self._cannot_go_on)
        self.nodes.coordinating = coordinates
        self.runtime = build_runtime(
            Settings(bootstrap_servers=upstream.settings.bootstrap_servers, **settings),
            store,
            upstream,
            self.nodes,
            defaults=DEFAULTS,
            clock=clock,
        )
        self.committer = self.runtime.committer
        self.partitions = self.runtime.partitions
        self.feed = self.runtime.feed
        self.consumption = self.runtime.consumption
        self.coordinator = self.runtime.coordinator
        self.sessions = self.runtime.sessions
        self.consumers = self.runtime.consumers
        self.settings_for = self.runtime.settings_for

    @staticmethod
    def _cannot_go_on(reason: str) -> None:
        raise AssertionError(reason)

    async def start(self) -> Self:
        """In the order ``Proxy.start`` keeps."""
        await self.runtime.configs.load()
        await self.upstream.start()
        await self.runtime.start()
        return self

    async def stop(self) -> None:
        """In the order ``Proxy.stop`` keeps."""
        await self.runtime.stop()
        await self.upstream.close()

    async def configure(self, group_id: str, **changes: object) -> None:
        """Group configs, as another node or a batch job sets them: stored, then read back
        (unchecked against the bounds, so a test may set a short lock)."""
        changed = replace(self.settings_for(group_id), **changes)  # type: ignore[arg-type]
        await self.store.set_group_configs(group_id, changed.as_configs())
        await self.runtime.configs.refresh()

    async def partition(self, topic: str, partition: int = 0) -> tuple[UUID, int]:
        """The (topic id, partition) a ShareFetch would name."""
        await self.upstream.refresh_metadata([topic])
        return self.upstream.topics[topic].topic_id, partition


class BrokerRuntime(Runtime):
    """The runtime on a real broker (Tansu) and a real SQL store."""

    def __init__(self, broker: TansuBroker, store: SqlShareStateStore) -> None:
        self.broker = broker
        super().__init__(
            store, Upstream(UpstreamSettings(broker.bootstrap)), NodeRecords(store.engine)
        )

    def topic(self, partitions: int = 1) -> str:
        return create_topic(self.broker.bootstrap, partitions)

    def produce(self, topic: str, count: int, partitions: int = 1) -> None:
        produce(self.broker.bootstrap, topic, count, partitions)


class SlowWrites:
    """The real store, each transaction taking a while (a busy database)."""

    def __init__(self, store: RuntimeStore) -> None:
        self.store = store

    async def write(self, writes: Sequence[PartitionWrite]) -> dict[SharePartitionKey, ErrorCode]:
        await asyncio.sleep(0.3)
        return await self.store.write(writes)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)
