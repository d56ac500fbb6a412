"""What one acquisition works with: the upstream batches it reads (``BatchHeader``), the group
configs that bound it (``PartitionLimits``) and its own progress (``AcquisitionRun``). Pure."""

from __future__ import annotations

from dataclasses import dataclass, field

from shareproxy.core.backoff import RedeliveryBackoff
from shareproxy.core.inflight import AcquiredRange
from shareproxy.core.schedule import DeliverySchedule, Scheduled


@dataclass(frozen=True, slots=True)
class BatchHeader:
    """What the leader needs of an upstream record batch: its offsets and whether it is data."""

    base_offset: int
    last_offset: int
    is_control: bool = False
    is_aborted: bool = False
    # the key hash of each offset base..last (core.key_order.NO_KEY: none), read only when the
    # group orders by key
    key_hashes: tuple[int, ...] | None = None
    # the batch's newest record's timestamp (ms): where a delay counts from
    max_timestamp: int = -1
    # each offset's own delivery time (core.schedule.NO_TIME: none), read only when the group
    # reads the header and the batch may hold it
    deliver_at: tuple[int, ...] | None = None

    @property
    def delivers_records(self) -> bool:
        return not (self.is_control or self.is_aborted)


@dataclass(frozen=True, slots=True)
class PartitionLimits:
    """The group configs the leader applies; replaced in place when a config changes."""

    record_lock_duration_ms: int = 30_000
    delivery_count_limit: int = 5
    max_record_locks: int = 2_000
    redelivery_backoff: RedeliveryBackoff = field(default_factory=RedeliveryBackoff)
    dead_letter: bool = False  # the group has a dead-letter topic (KIP-1191)
    key_ordered: bool = False  # records of one key go to one member at a time, in order
    schedule: DeliverySchedule = field(default_factory=DeliverySchedule)

    @property
    def throttle_threshold(self) -> int:
        """Delivery count from which a record is handed out in smaller batches (half the limit)."""
        return (self.delivery_count_limit + 1) // 2

    def throttled_cap(self, delivery_count: int, max_records: int) -> int | None:
        """How many records one acquisition may hold when it holds a record on this delivery."""
        if delivery_count < 2 or delivery_count < self.throttle_threshold:
            return None
        if delivery_count >= self.delivery_count_limit:
            return 1  # the last attempt goes out alone
        return max(1, max_records >> (delivery_count - self.throttle_threshold + 1))


@dataclass(slots=True)
class AcquisitionRun:
    """One call of ``SharePartition.acquire``: for whom, until when, and how far it got."""

    member_id: str
    now_ms: int
    deadline_ms: int
    max_records: int
    limit: int  # max_records, or less once a record on a late delivery narrows it
    strict: bool  # limits are exact (RECORD_LIMIT mode, or throttled)
    throttled: bool = False
    count: int = 0
    acquired: list[AcquiredRange] = field(default_factory=list)
    # the clock itself (``now_ms`` is past every back-off when the group has none): a record
    # not due yet waits on it whatever the back-off
    clock_ms: int = 0
    # (records, ms) delivered this long after their delivery time: the lateness histogram's
    lateness: list[tuple[int, int]] = field(default_factory=list)
    # records read in waiting for a time, or cut to the bound: reported by the owner
    scheduled: list[Scheduled] = field(default_factory=list)
