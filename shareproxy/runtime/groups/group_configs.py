"""The group configs in force: proxy-wide defaults overridden by each group's stored configs.

Read on every fetch, heartbeat and lock, so they are cached in memory; a change is written to the
store first and then applied to the live share-partitions of the group, without a restart. A
change made through another proxy node reaches this one by ``refresh``: the store's configs
version moved, so every group's configs are read again and the changed ones applied.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping

from shareproxy.core import group_config
from shareproxy.core.group_settings import GroupSettings
from shareproxy.core.names import require_group_id
from shareproxy.core.store import ShareStateStore

log = logging.getLogger(__name__)

Listener = Callable[[str, GroupSettings], None]
READ_EVERY_S = 1.0  # how often each node asks the store whether any group's configs changed


class GroupConfigs:
    def __init__(
        self,
        store: ShareStateStore,
        defaults: GroupSettings,
        bounds: group_config.GroupBounds = group_config.KAFKA_BOUNDS,
    ) -> None:
        self.store = store
        self.defaults = defaults
        self.bounds = bounds
        self._stored: dict[str, dict[str, str]] = {}
        self._settings: dict[str, GroupSettings] = {}
        self._listeners: list[Listener] = []
        self._version: int | None = None  # the store's configs version last read
        # one reader or writer at a time: a read finishing after a local change must not put
        # back what it read before that change
        self._lock = asyncio.Lock()
        # reads begun, and the number of the last one finished: callers waiting together are
        # answered by one read that began after each of them asked
        self._reads_begun = 0
        self._read_done = 0

    async def load(self) -> None:
        self._version = None
        await self.refresh()

    async def refresh(self) -> None:
        """Read the configs again if the store's version moved; apply what changed. Cheap when
        nothing did (one read), so the nodes call it every second and before loading a
        share-partition, whose start offset may follow ``share.auto.offset.reset``. A read
        that began after this call and has finished answers it too: many share-partitions
        loading at once ask the store once, not once each."""
        asked = self._reads_begun
        async with self._lock:
            if self._read_done > asked:
                return
            self._reads_begun += 1
            number = self._reads_begun
            await self._read()
            self._read_done = number

    async def _read(self) -> None:
        """Read the configs again if the version moved (with ``_lock`` held)."""
        version = await self.store.configs_version()
        if version == self._version:
            return
        stored = {r.group_id: dict(r.configs) for r in await self.store.list_groups() if r.configs}
        changed = {
            g for g in stored.keys() | self._stored.keys() if stored.get(g) != self._stored.get(g)
        }
        self._stored = stored
        self._version = version
        for group_id in changed:
            self._settings.pop(group_id, None)
            settings = self.settings_for(group_id)
            for listener in self._listeners:
                listener(group_id, settings)
        if changed and self._listeners:
            log.info("group configs changed elsewhere", extra={"groups": sorted(changed)})

    def on_change(self, listener: Listener) -> None:
        self._listeners.append(listener)

    def settings_for(self, group_id: str) -> GroupSettings:
        settings = self._settings.get(group_id)
        if settings is None:
            stored = self._stored.get(group_id)
            settings = self.defaults.with_configs(stored) if stored else self.defaults
            self._settings[group_id] = settings
        return settings

    def overrides(self, group_id: str) -> dict[str, str]:
        return dict(self._stored.get(group_id, {}))

    async def alter(
        self, group_id: str, changes: Mapping[str, str | None], validate_only: bool = False
    ) -> dict[str, str]:
        """Validate (GroupConfigError on any bad name or value: nothing changes), persist,
        apply. Returns the group's overrides after the change."""
        require_group_id(group_id)
        merged = group_config.validate(
            changes, self._stored.get(group_id, {}), self.defaults.as_configs(), self.bounds
        )
        if validate_only:
            return merged
        async with self._lock:
            await self.store.set_group_configs(group_id, changes)
            self._stored[group_id] = merged
            self._settings.pop(group_id, None)
            settings = self.settings_for(group_id)
        for listener in self._listeners:
            listener(group_id, settings)
        log.info("group configs altered", extra={"group": group_id, "configs": dict(changes)})
        return merged

    def forget(self, group_id: str) -> None:
        self._stored.pop(group_id, None)
        self._settings.pop(group_id, None)
