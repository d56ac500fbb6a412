"""The group configs in force: proxy-wide defaults overridden by each group's stored configs.

Read on every fetch, heartbeat and lock, so they are cached in memory; a change is written to the
store first and then applied to the live share-partitions of the group, without a restart.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from shareproxy.core import group_config
from shareproxy.core.group_config import GroupSettings
from shareproxy.core.names import require_group_id
from shareproxy.core.store import ShareStateStore

log = logging.getLogger(__name__)

Listener = Callable[[str, GroupSettings], None]


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

    async def load(self) -> None:
        for record in await self.store.list_groups():
            if record.configs:
                self._stored[record.group_id] = dict(record.configs)

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
