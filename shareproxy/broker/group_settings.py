"""The group configs in force for one share group, as the runtime reads them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from shareproxy.core import group_config as gc
from shareproxy.core.offset_reset import AutoOffsetReset, parse_auto_offset_reset
from shareproxy.core.share_group import DEFAULT_MAX_SIZE
from shareproxy.core.share_partition import PartitionLimits

_ISOLATION = {"read_uncommitted": 0, "read_committed": 1}
_DEFAULT = {name: d.default for name, d in gc.DEFINITIONS.items()}


@dataclass(frozen=True, slots=True)
class GroupSettings:
    """Defaults are the configs' own (``core.group_config``); ``serve`` may override them."""

    record_lock_duration_ms: int = int(_DEFAULT[gc.LOCK_DURATION])
    delivery_count_limit: int = int(_DEFAULT[gc.DELIVERY_COUNT_LIMIT])
    max_record_locks: int = int(_DEFAULT[gc.MAX_RECORD_LOCKS])
    auto_offset_reset: AutoOffsetReset = field(
        default_factory=lambda: parse_auto_offset_reset(_DEFAULT[gc.AUTO_OFFSET_RESET])
    )
    isolation_level: int = _ISOLATION[_DEFAULT[gc.ISOLATION_LEVEL]]  # 1: read_committed
    session_timeout_ms: int = int(_DEFAULT[gc.SESSION_TIMEOUT])
    heartbeat_interval_ms: int = int(_DEFAULT[gc.HEARTBEAT_INTERVAL])
    max_size: int = DEFAULT_MAX_SIZE
    renew_acknowledge: bool = _DEFAULT[gc.RENEW_ACKNOWLEDGE] == "true"

    @property
    def limits(self) -> PartitionLimits:
        return PartitionLimits(
            self.record_lock_duration_ms, self.delivery_count_limit, self.max_record_locks
        )

    def with_configs(self, configs: Mapping[str, str]) -> GroupSettings:
        """These settings (the proxy-wide defaults) overridden by a group's stored configs."""
        changes: dict[str, object] = {}
        for name, value in configs.items():
            if name == gc.LOCK_DURATION:
                changes["record_lock_duration_ms"] = int(value)
            elif name == gc.DELIVERY_COUNT_LIMIT:
                changes["delivery_count_limit"] = int(value)
            elif name == gc.MAX_RECORD_LOCKS:
                changes["max_record_locks"] = int(value)
            elif name == gc.AUTO_OFFSET_RESET:
                changes["auto_offset_reset"] = parse_auto_offset_reset(value)
            elif name == gc.ISOLATION_LEVEL:
                changes["isolation_level"] = _ISOLATION[value]
            elif name == gc.SESSION_TIMEOUT:
                changes["session_timeout_ms"] = int(value)
            elif name == gc.HEARTBEAT_INTERVAL:
                changes["heartbeat_interval_ms"] = int(value)
            elif name == gc.RENEW_ACKNOWLEDGE:
                changes["renew_acknowledge"] = value == "true"
        return replace(self, **changes)  # type: ignore[arg-type]

    def as_configs(self) -> dict[str, str]:
        """The same settings under their config names, as strings (DescribeConfigs, REST)."""
        return {
            gc.LOCK_DURATION: str(self.record_lock_duration_ms),
            gc.DELIVERY_COUNT_LIMIT: str(self.delivery_count_limit),
            gc.MAX_RECORD_LOCKS: str(self.max_record_locks),
            gc.AUTO_OFFSET_RESET: str(self.auto_offset_reset),
            gc.ISOLATION_LEVEL: "read_committed" if self.isolation_level else "read_uncommitted",
            gc.SESSION_TIMEOUT: str(self.session_timeout_ms),
            gc.HEARTBEAT_INTERVAL: str(self.heartbeat_interval_ms),
            gc.RENEW_ACKNOWLEDGE: "true" if self.renew_acknowledge else "false",
        }
