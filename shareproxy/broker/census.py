"""What the store holds, counted every few seconds for the metrics: every share group and
share-partition, not only those this proxy has loaded since it started (a scrape cannot wait
for the store, so it reads the last count)."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from shareproxy.core.store import ShareStateStore

log = logging.getLogger(__name__)

COUNT_EVERY_S = 15.0


class StoredCensus:
    def __init__(self, store: ShareStateStore, every_s: float = COUNT_EVERY_S) -> None:
        self.store = store
        self.every_s = every_s
        self.group_ids: frozenset[str] = frozenset()
        self.partitions = 0
        self._task: asyncio.Task[None] | None = None

    async def count(self) -> None:
        groups = await self.store.list_groups()
        partitions = await self.store.count_partitions()
        self.group_ids = frozenset(g.group_id for g in groups)
        self.partitions = sum(partitions.values())

    def start(self) -> None:
        self._task = asyncio.create_task(self._forever(), name="stored-census")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _forever(self) -> None:
        while True:
            try:
                await self.count()
            except Exception as exc:  # the store unreachable: the last count stands
                log.warning("counting stored groups and share-partitions failed: %s", exc)
            await asyncio.sleep(self.every_s)
