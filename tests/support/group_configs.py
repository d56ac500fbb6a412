"""Group configs set as a Kafka admin client sets them (IncrementalAlterConfigs)."""

from __future__ import annotations

from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)


def alter_group_configs(proxy, group: str, configs: dict[str, str]) -> None:
    admin = AdminClient({"bootstrap.servers": proxy.bootstrap})
    entries = [
        ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
        for name, value in configs.items()
    ]
    futures = admin.incremental_alter_configs(
        [ConfigResource(ResourceType.GROUP, group, incremental_configs=entries)]
    )
    for f in futures.values():
        f.result(30)
