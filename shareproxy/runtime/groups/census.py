"""What the store holds, counted every few seconds for the metrics: every share group and
share-partition, not only those this proxy has loaded since it started (a scrape cannot wait
for the store, so it reads the last count)."""

from __future__ import annotations

from shareproxy.core.store import ShareStateStore
from shareproxy.runtime.jobs import Periodic

COUNT_EVERY_S = 15.0


class StoredCensus:
    def __init__(self, store: ShareStateStore, every_s: float = COUNT_EVERY_S) -> None:
        self.store = store
        self.every_s = every_s
        self.group_ids: frozenset[str] = frozenset()
        self.partitions_of: dict[str, int] = {}  # group id -> its stored share-partitions
        self.rounds = Periodic(
            "stored-census", every_s, self.count, "counting stored groups and share-partitions"
        )

    async def count(self) -> None:
        groups = await self.store.list_groups()
        partitions = await self.store.count_partitions()
        self.group_ids = frozenset(g.group_id for g in groups)
        self.partitions_of = partitions

    def start(self) -> None:
        self.rounds.start()

    async def stop(self) -> None:
        await self.rounds.stop()
