"""One batch of a key-ordered acquisition (core.key_order's rule), record by record: the
per-record walk is the price of the order, paid only by groups that ask for it. Pure."""

from __future__ import annotations

from typing import Protocol

from shareproxy.core.acquisition import AcquisitionRun, BatchHeader, PartitionLimits
from shareproxy.core.inflight import RangeList
from shareproxy.core.key_order import NO_KEY, KeyOrder
from shareproxy.core.schedule import NO_TIME
from shareproxy.core.states import RecordState


class _SharePartition(Protocol):
    """What of core.share_partition.SharePartition the walk uses (it is the only one)."""

    limits: PartitionLimits
    speo: int
    key_order: KeyOrder
    _inflight: RangeList

    @property
    def in_flight_count(self) -> int: ...
    def is_pending(self, offset: int) -> bool: ...
    def _archive_unreadable(self, first: int, last: int) -> None: ...
    def _append_acquired(self, run: AcquisitionRun, first: int, last: int) -> None: ...
    def _append_waiting(self, offset: int) -> None: ...
    def _append_deferred(self, first: int, last: int, due: int) -> None: ...
    def _defer(self, first: int, last: int, due: int) -> None: ...
    def _throttle(self, run: AcquisitionRun, delivery_count: int) -> bool: ...
    def _lock_slice(
        self, run: AcquisitionRun, i: int, start: int, end: int, delivery_count: int
    ) -> int: ...


def acquire_keyed(
    sp: _SharePartition,
    run: AcquisitionRun,
    batch: BatchHeader,
    lo: int,
    owned: tuple[int, int],
    keys_known: bool = True,
) -> bool:
    """Acquire what key order allows of ``batch`` from ``lo``; False when the acquisition must
    end here. Every record walked is learned first, so a later record of the same key, here
    or in a later batch, sees it. ``keys_known`` False: records acquired before key order was
    turned on are still held, keys unknown, so only records without a key go."""
    hashes = batch.key_hashes
    assert hashes is not None
    base, last = batch.base_offset, batch.last_offset
    order = sp.key_order
    owned_lo, owned_hi = owned
    schedule = sp.limits.schedule
    times = batch.deliver_at if schedule.headers else None

    def due(offset: int) -> int:  # 0 unless the group has a schedule (core.schedule)
        if not schedule.active:
            return 0
        return schedule.due_ms(
            batch.max_timestamp, NO_TIME if times is None else times[offset - base]
        )

    def free(offset: int, key: int) -> bool:
        if key == NO_KEY:
            return True
        if not keys_known:
            return False
        if not owned_lo <= key < owned_hi:
            return False
        first = order.first_pending(key, sp.is_pending)
        return first is None or first == offset

    if lo > sp.speo:
        sp._archive_unreadable(sp.speo, lo - 1)  # offsets no batch holds
    o = lo
    while o <= last:
        if o >= sp.speo:  # a new record: its first delivery, or Available until its key is free
            key = hashes[o - base]
            at = due(o)
            if at > run.clock_ms:  # not due yet: it holds its key until delivered
                sp._append_deferred(o, o, at)
                order.learn(o, key)
                o += 1
                continue
            if sp.in_flight_count >= sp.limits.max_record_locks:
                return False
            if run.strict and run.count >= run.limit:
                return False
            if free(o, key):
                sp._append_acquired(run, o, o)
            else:
                sp._append_waiting(o)
            order.learn(o, key)
            o += 1
            continue
        ranges = sp._inflight.ranges
        r = ranges[sp._inflight.index_of(o)]
        end = min(r.last, last)
        if r.state != RecordState.AVAILABLE:
            o = end + 1
            continue
        if schedule.active and r.delivery_count == 0 and not r.available_at_ms:
            for x in range(o, end + 1):  # never judged (read again after a restart): judge it
                if due(x) > run.clock_ms:
                    sp._defer(x, x, due(x))
            r = ranges[sp._inflight.index_of(o)]
            end = min(r.last, last)
        for x in range(o, end + 1):
            order.learn(x, hashes[x - base])
        if r.available_at_ms > (run.now_ms if r.delivery_count else run.clock_ms):
            # in its back-off, or waiting for its delivery time: it still holds its key
            o = end + 1
            continue
        delivery_count = r.delivery_count + 1
        x = o
        while x <= end:
            if not free(x, hashes[x - base]):
                x += 1
                continue
            y = x
            while y < end and free(y + 1, hashes[y + 1 - base]):
                y += 1
            if not sp._throttle(run, delivery_count):
                return False
            if run.strict:
                y = min(y, x + (run.limit - run.count) - 1)
            sp._lock_slice(run, sp._inflight.index_of(x), x, y, delivery_count)
            if run.strict and run.count >= run.limit:
                return False
            x = y + 1
        o = end + 1
    return True
