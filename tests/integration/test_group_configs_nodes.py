"""Group configs on several proxy nodes sharing one store: a change made through one node, or a
group deleted through one, applies on the others once they read the store's configs version."""

from __future__ import annotations

from shareproxy.core.group_config import LOCK_DURATION
from shareproxy.core.group_settings import GroupSettings
from shareproxy.persistence.repository import SqlShareStateStore
from shareproxy.runtime.groups.group_configs import GroupConfigs


async def test_a_change_through_one_node_applies_on_the_other(store: SqlShareStateStore):
    one, two = GroupConfigs(store, GroupSettings()), GroupConfigs(store, GroupSettings())
    await one.load()
    await two.load()
    heard: list[tuple[str, int]] = []
    two.on_change(lambda g, s: heard.append((g, s.record_lock_duration_ms)))

    await one.alter("g", {LOCK_DURATION: "15000"})
    assert two.settings_for("g").record_lock_duration_ms == 30_000  # not read yet
    await two.refresh()
    assert two.settings_for("g").record_lock_duration_ms == 15_000
    assert two.overrides("g") == {LOCK_DURATION: "15000"}
    assert heard == [("g", 15_000)]  # its live share-partitions are told

    await two.refresh()  # the version did not move: nothing read, nobody told again
    assert heard == [("g", 15_000)]

    await store.delete_group("g")
    await one.refresh()
    await two.refresh()
    assert one.settings_for("g").record_lock_duration_ms == 30_000
    assert two.overrides("g") == {}
    assert heard[-1] == ("g", 30_000)


async def test_the_configs_version_moves_with_every_change_and_deletion(
    store: SqlShareStateStore,
):
    start = await store.configs_version()
    await store.set_group_configs("a", {LOCK_DURATION: "15000"})
    await store.set_group_configs("a", {LOCK_DURATION: None})
    assert await store.configs_version() == start + 2
    assert await store.delete_group("a")
    assert not await store.delete_group("a")  # nothing deleted: the version stays
    assert await store.configs_version() == start + 3
