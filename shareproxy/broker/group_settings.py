"""The group configs in force for one share group, as the runtime reads them."""

from __future__ import annotations

from dataclasses import dataclass, field

from shareproxy.core.offset_reset import AutoOffsetReset, ResetStrategy
from shareproxy.core.share_partition import PartitionLimits


@dataclass(frozen=True, slots=True)
class GroupSettings:
    record_lock_duration_ms: int = 30_000
    delivery_count_limit: int = 5
    max_record_locks: int = 2_000
    auto_offset_reset: AutoOffsetReset = field(
        default_factory=lambda: AutoOffsetReset(ResetStrategy.LATEST)
    )
    isolation_level: int = 0  # 0 read_uncommitted, 1 read_committed
    session_timeout_ms: int = 45_000
    heartbeat_interval_ms: int = 5_000
    max_size: int = 200

    @property
    def limits(self) -> PartitionLimits:
        return PartitionLimits(
            self.record_lock_duration_ms, self.delivery_count_limit, self.max_record_locks
        )
