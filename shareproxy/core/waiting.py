"""The waiting half of a share-partition (scheduled delivery, beyond KIP-932): records read
from the log before their delivery time (core.schedule) stay Available, never delivered, with
that time; a heap of their times lets acquisition pass over them and come back at each time.
core.share_partition.SharePartition is its only user; it holds the state declared here. Pure:
no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from heapq import heappop, heappush
from itertools import islice

from shareproxy.core.acquisition import AcquisitionRun, BatchHeader, PartitionLimits
from shareproxy.core.inflight import RangeList
from shareproxy.core.schedule import Scheduled
from shareproxy.core.states import RecordState

# how many in-flight ranges cache_floor looks at, at most
_FLOOR_WALK = 4_096
# records falling due within this long keep their batches cached: a delay queue's next
# second is not read again (what it holds: that second's records, at the rate they fall due)
CACHE_HORIZON_MS = 1_000


class WaitingRecords:
    """Records waiting for their delivery time; SharePartition supplies the state and the
    acquisition it hands due records to."""

    limits: PartitionLimits
    spso: int
    speo: int
    _inflight: RangeList
    _available_from: int
    # records never delivered that wait for their delivery time (Available, delivery count
    # 0, a time set): the in-flight cap does not count them
    _deferred: int
    # (delivery time, first offset) of each range made to wait, soonest first
    _due: list[tuple[int, int]]
    _released_ms: int  # the times up to which waiting records are due (the latest clock seen)
    # Available records never delivered below this offset may have no time judged yet (read
    # again after a restart, or left waiting on their key): only there is a batch's time read
    # below SPEO
    _unjudged_below: int
    # Acquiring's, which takes the records that are due
    _acquire_available: Callable[[AcquisitionRun, int, int], bool]
    _acquire_batch: Callable[[AcquisitionRun, BatchHeader, int], bool]
    _archive_unreadable: Callable[[int, int], None]
    _first_available: Callable[[], int]
    _append_available: Callable[[int, int, int], bool]

    @property
    def deferred_count(self) -> int:
        """Records never delivered yet that have a delivery time (due or not)."""
        return self._deferred

    def next_due(self, now_ms: int) -> int | None:
        """The earliest delivery time still ahead (None: nothing waits for one)."""
        return min((at for _, _, at in self.waiting_runs(now_ms)), default=None)

    def cache_floor(self) -> int:
        """The lowest offset whose bytes the log cache keeps: SPSO, but past records waiting
        for a delivery time more than ``CACHE_HORIZON_MS`` ahead (read again when it comes)
        and those done around them. The walk stops at a few thousand ranges: the cache keeps
        more rather than search on."""
        if not self._deferred:
            return self.spso
        released = self._released_ms + CACHE_HORIZON_MS
        for r in islice(self._inflight.ranges, _FLOOR_WALK):
            if r.state.is_terminal:
                continue
            waiting = not r.delivery_count and r.available_at_ms > released
            if r.state == RecordState.AVAILABLE and waiting:
                continue
            return r.first
        ranges = self._inflight.ranges
        return self.speo if len(ranges) <= _FLOOR_WALK else ranges[_FLOOR_WALK].first

    def times_wanted_from(self) -> int:
        """The first offset whose delivery time acquisition may still read from its batch:
        SPEO, or SPSO while some record below SPEO may have none judged."""
        return self.spso if self.spso < self._unjudged_below else self.speo

    def _wait_until(self, due: int, first: int) -> None:
        """A range from ``first`` waits until ``due``: its time is indexed."""
        heappush(self._due, (due, first))

    def waiting_runs(self, now_ms: int) -> list[tuple[int, int, int]]:
        """(first, last, delivery time) of the in-flight ranges whose time is still ahead."""
        if not self._deferred:
            return []
        return [
            (r.first, r.last, r.available_at_ms)
            for r in self._inflight.ranges
            if r.state == RecordState.AVAILABLE
            and r.delivery_count == 0
            and r.available_at_ms > now_ms
        ]

    def _count_deferred(self) -> int:
        return sum(
            r.last - r.first + 1
            for r in self._inflight.ranges
            if r.state == RecordState.AVAILABLE and r.delivery_count == 0 and r.available_at_ms
        )

    def _acquire_scheduled(self, run: AcquisitionRun, batch: BatchHeader, lo: int) -> bool:
        """Acquire from a batch of a group with a schedule (core.schedule): the records due by
        now as any others, the rest left Available until their time, never delivered yet. A
        record's time, once judged, stands (it is kept with the record, not read again)."""
        if batch.base_offset > self.speo:
            self._archive_unreadable(self.speo, batch.base_offset - 1)
        if lo < self.speo:  # in flight already: a judged record waits on its own time
            hi = min(batch.last_offset, self.speo - 1)
            if lo < self._unjudged_below:
                self._judge(batch, lo, min(hi, self._unjudged_below - 1), run.clock_ms)
            if not self._acquire_available(run, lo, hi):
                return False
            if batch.last_offset < self.speo:
                return True
            lo = self.speo
        for first, last, due, cut in self.limits.schedule.runs(
            lo, batch.last_offset, batch.base_offset, batch.max_timestamp, batch.deliver_at
        ):
            if due > run.clock_ms or cut:
                run.scheduled.append(Scheduled(last - first + 1, batch.max_timestamp, due, cut))
            if due > run.clock_ms:
                self._append_deferred(first, last, due)
                continue
            part = batch
            if (first, last) != (batch.base_offset, batch.last_offset):
                part = replace(batch, base_offset=first, last_offset=last)
            before = len(run.acquired)
            go_on = self._acquire_batch(run, part, first)
            if due:
                firsts = sum(
                    a.last_offset - a.first_offset + 1
                    for a in run.acquired[before:]
                    if a.delivery_count == 1
                )
                if firsts:
                    run.lateness.append((firsts, run.clock_ms - due))
            if not go_on or run.count >= run.limit:
                return False
        return True

    def _release_due(self, now_ms: int) -> None:
        """Records whose time came by ``now_ms`` may be acquired: the search for the first
        Available record starts at them again."""
        self._released_ms = max(self._released_ms, now_ms)
        due = self._due
        while due and due[0][0] <= now_ms:
            _, first = heappop(due)
            if first < self._available_from:
                self._available_from = first

    def _judge(self, batch: BatchHeader, lo: int, hi: int, now_ms: int) -> None:
        """Give the never-judged Available records among lo..hi (below SPEO: read again after
        a restart, or left waiting on their key) the time the batch names, where it is ahead."""
        ranges = self._inflight.ranges
        i = max(self._inflight.index_of(lo), 0)
        unjudged = []
        while i < len(ranges) and ranges[i].first <= hi:
            r = ranges[i]
            if r.state == RecordState.AVAILABLE and not r.delivery_count and not r.available_at_ms:
                unjudged.append((max(r.first, lo), min(r.last, hi)))
            i += 1
        for first, last in unjudged:
            for a, b, due, _ in self.limits.schedule.runs(
                first, last, batch.base_offset, batch.max_timestamp, batch.deliver_at
            ):
                if due > now_ms:
                    self._defer(a, b, due)

    def _defer(self, first: int, last: int, due: int) -> None:
        """In-flight offsets first..last (below SPEO) are not due before ``due``: those that
        are Available and never judged (read again after a restart, or left waiting on their
        key) take it."""
        ranges = self._inflight.ranges
        i = max(self._inflight.index_of(first), 0)
        while i < len(ranges) and ranges[i].first <= last:
            r = ranges[i]
            if r.state != RecordState.AVAILABLE or r.delivery_count or r.available_at_ms:
                i += 1
                continue
            if r.first < first:
                ranges.insert(i + 1, r.split(first))
                i += 1
                r = ranges[i]
            if r.last > last:
                ranges.insert(i + 1, r.split(last + 1))
            r.available_at_ms = due
            self._deferred += r.last - r.first + 1
            self._wait_until(due, r.first)
            i += 1

    def _append_deferred(self, first: int, last: int, due: int) -> None:
        """New records first..last (from SPEO) left Available until ``due``."""
        if self._append_available(first, last, due):
            self._wait_until(due, first)
        self._deferred += last - first + 1
