"""The acquiring half of a share-partition: which records a ShareFetch locks for a member
(first deliveries past SPEO, redeliveries of Available records, poison throttling, redelivery
back-off, fair work, key order). core.share_partition.SharePartition is its only user; it holds
the state declared here. Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import islice

from shareproxy.core.acquisition import AcquisitionRun, BatchHeader, PartitionLimits
from shareproxy.core.errors import ErrorCode, ShareError
from shareproxy.core.inflight import AcquiredRange, InFlightRange, RangeList
from shareproxy.core.key_order import WHOLE_SPACE, KeyOrder
from shareproxy.core.keyed_acquisition import acquire_keyed
from shareproxy.core.schedule import DUE_NOW, Scheduled
from shareproxy.core.states import AcquireMode, RecordState

# the "now" of an acquisition when the group has no redelivery back-off: every back-off is over
# (one a group had before it was turned off too)
_NO_BACKOFF = 1 << 62


class Acquiring:
    """Acquisition on the in-flight records; SharePartition supplies the state and the rest."""

    limits: PartitionLimits
    spso: int
    speo: int
    key_order: KeyOrder
    unordered_until: int
    _inflight: RangeList
    _available_from: int  # no Available range starts below it (SharePartition keeps it)
    # records never delivered that wait for their delivery time (Available, delivery count
    # 0, a time set): the in-flight cap does not count them (SharePartition keeps it)
    _deferred: int
    _released_ms: int  # the times up to which waiting records are due (the latest clock seen)
    # Available records never delivered below this offset may have no time judged yet (read
    # again after a restart, or left waiting on their key): only there is a batch's time read
    # below SPEO
    _unjudged_below: int
    # (records, ms) first delivered this long after their delivery time, since the owner
    # last drained it (SharePartition keeps it)
    lateness: list[tuple[int, int]]
    scheduled: list[Scheduled]  # the same, of records read in with a time (core.schedule)
    # the waiting half's (core.waiting): records not due yet, and the times that come
    _acquire_scheduled: Callable[[AcquisitionRun, BatchHeader, int], bool]
    _release_due: Callable[[int], None]
    _append_deferred: Callable[[int, int, int], None]
    _defer: Callable[[int, int, int], None]

    @property
    def in_flight_count(self) -> int:
        """What the in-flight cap counts: SPSO..SPEO but the records waiting for their time."""
        return self.speo - self.spso - self._deferred

    def _archive_unreadable(self, first: int, last: int) -> None:
        raise NotImplementedError  # SharePartition's: offsets that deliver no record

    def acquire(
        self,
        member_id: str,
        batches: Sequence[BatchHeader],
        now_ms: int,
        max_records: int,
        mode: AcquireMode = AcquireMode.BATCH_OPTIMIZED,
        sharers: int = 1,
        owned: tuple[int, int] = WHOLE_SPACE,
    ) -> list[AcquiredRange]:
        """Lock records for ``member_id`` from the given log batches (ascending offsets).

        Available in-flight records (released or timed out) are taken where the batches cover
        them, then records past SPEO while the in-flight count is below the cap. In
        ``BATCH_OPTIMIZED`` mode ``max_records`` and the cap are checked at batch boundaries, so
        a batch is never cut (cutting it would still send the whole batch to the client); in
        ``RECORD_LIMIT`` mode both are exact (and in the key-ordered walk, record by record).
        A record on a late delivery narrows the acquisition (poison throttling); a record whose
        redelivery back-off has not ended is skipped.

        Fair work (beyond KIP-932): when ``sharers`` members fetch this share-partition, one
        acquisition takes at most an even share of what is acquirable and never more than
        ``max_records``, cutting batches where it must, so a member cannot take a whole large
        producer batch while others sit idle. ``RECORD_LIMIT`` is exact already: untouched.

        Key order (beyond KIP-932): with ``limits.key_ordered``, a keyed record is taken only
        when it is the earliest of its key still to process and its key hash is in ``owned``
        (core.key_order); the others stay Available, never delivered yet.
        """
        if max_records <= 0:
            raise ShareError(ErrorCode.INVALID_REQUEST, "max records must be positive")
        self._release_due(now_ms)
        run = AcquisitionRun(
            member_id,
            now_ms=now_ms if self.limits.redelivery_backoff.enabled else _NO_BACKOFF,
            deadline_ms=now_ms + self.limits.record_lock_duration_ms,
            max_records=max_records,
            limit=max_records,
            strict=mode == AcquireMode.RECORD_LIMIT,
            clock_ms=now_ms,
        )
        if sharers > 1 and not run.strict:
            run.limit = min(
                max_records, -(-self._acquirable(batches, run.now_ms, run.clock_ms) // sharers)
            )
            run.strict = True
        keyed = self.limits.key_ordered
        if keyed and len(self.key_order) > 4 * max(self.in_flight_count, 256):
            self.key_order.forget_below(self.spso)
        if (
            keyed
            and self.unordered_until >= 0
            and not any(
                r.state == RecordState.ACQUIRED and r.first <= self.unordered_until
                for r in self._inflight.ranges
            )
        ):
            self.unordered_until = -1
        for batch in batches:
            if batch.last_offset < self.spso:
                continue
            lo = max(batch.base_offset, self.spso)
            if not batch.delivers_records:
                self._archive_unreadable(lo, batch.last_offset)
                continue
            if keyed and batch.key_hashes is not None:
                if not acquire_keyed(self, run, batch, lo, owned, self.unordered_until < 0):
                    break
            elif self.limits.schedule.active:
                if not self._acquire_scheduled(run, batch, lo):
                    break
            elif not self._acquire_batch(run, batch, lo):
                break
            if run.count >= run.limit:
                break
        if run.lateness:
            self.lateness.extend(run.lateness)
        if run.scheduled:
            self.scheduled.extend(run.scheduled)
        return run.acquired

    def _acquire_batch(self, run: AcquisitionRun, batch: BatchHeader, lo: int) -> bool:
        """Acquire from one batch: its Available records, then its new ones."""
        if lo < self.speo and not self._acquire_available(run, lo, batch.last_offset):
            return False
        return batch.last_offset < self.speo or self._acquire_new(run, batch)

    def _acquirable(self, batches: Sequence[BatchHeader], now_ms: int, clock_ms: int) -> int:
        """How many records an acquisition from ``batches`` could take at most: the Available
        in-flight ones not held back, and new ones up to the in-flight cap (at least 1)."""
        if not batches:
            return 1
        available = sum(
            r.last - r.first + 1
            for r in islice(self._inflight.ranges, self._first_available(), None)
            if r.state == RecordState.AVAILABLE
            and r.available_at_ms <= (now_ms if r.delivery_count else clock_ms)
        )
        new = batches[-1].last_offset + 1 - max(self.speo, batches[0].base_offset)
        room = self.limits.max_record_locks - self.in_flight_count
        return max(1, available + max(0, min(new, room)))

    def _first_available(self) -> int:
        """Index of the first Available range not waiting for its delivery time (the count of
        ranges: none), searched from ``_available_from`` by bisect, which it then raises to what
        it found; a waiting range's time lowers it again (``_release_due``)."""
        ranges = self._inflight.ranges
        n = len(ranges)
        i = max(self._inflight.index_of(self._available_from), 0)
        released = self._released_ms
        while i < n and (
            ranges[i].state != RecordState.AVAILABLE
            or (ranges[i].delivery_count == 0 and ranges[i].available_at_ms > released)
        ):
            i += 1
        self._available_from = ranges[i].first if i < n else self.speo
        return i

    def _acquire_available(self, run: AcquisitionRun, lo: int, last: int) -> bool:
        """Acquire the Available in-flight records among ``lo..last`` (released or timed out,
        so on a redelivery); ``lo`` is below SPEO. False when the acquisition must end here."""
        hi = min(last, self.speo - 1)
        i = self._inflight.index_of(lo)
        ranges = self._inflight.ranges
        while i < len(ranges) and ranges[i].first <= hi:
            r = ranges[i]
            if r.state != RecordState.AVAILABLE or r.available_at_ms > (
                run.now_ms if r.delivery_count else run.clock_ms
            ):
                i += 1
                continue
            delivery_count = r.delivery_count + 1
            if not self._throttle(run, delivery_count):
                return False  # a throttled record starts an acquisition of its own
            start = max(r.first, lo)
            end = min(r.last, hi)
            if run.strict:
                end = min(end, start + (run.limit - run.count) - 1)
            i = self._lock_slice(run, i, start, end, delivery_count)
            if run.strict and run.count >= run.limit:
                return False
        return True

    def is_pending(self, offset: int) -> bool:
        """Whether the record at ``offset`` is still to process: Acquired or Available."""
        if not self.spso <= offset < self.speo:
            return False
        r = self._inflight.ranges[self._inflight.index_of(offset)]
        return r.state == RecordState.ACQUIRED or r.state == RecordState.AVAILABLE

    def _throttle(self, run: AcquisitionRun, delivery_count: int) -> bool:
        """Narrow the run for a record on a late delivery (poison throttling); False if the
        run already holds records it cannot go on with."""
        cap = self.limits.throttled_cap(delivery_count, run.max_records)
        if cap is None:
            return True
        if run.count and (not run.throttled or cap < run.limit):
            return False
        run.limit, run.strict, run.throttled = min(run.limit, cap), True, True
        return True

    def _lock_slice(
        self, run: AcquisitionRun, i: int, start: int, end: int, delivery_count: int
    ) -> int:
        """Acquire ``start..end`` of the Available range at index ``i``, cutting it where the
        slice ends inside it; the index of the range after the slice."""
        ranges = self._inflight.ranges
        r = ranges[i]
        if start > r.first:
            ranges.insert(i + 1, r.split(start))
            i += 1
            r = ranges[i]
        if end < r.last:
            ranges.insert(i + 1, r.split(end + 1))
        if r.delivery_count == 0 and r.available_at_ms:  # its time came
            self._deferred -= r.last - r.first + 1
            if r.available_at_ms != DUE_NOW:  # an operator's "now" is no lateness
                run.lateness.append((r.last - r.first + 1, run.clock_ms - r.available_at_ms))
        r.state = RecordState.ACQUIRED
        r.delivery_count = delivery_count
        r.member_id = run.member_id
        r.deadline_ms = run.deadline_ms
        run.acquired.append(AcquiredRange(r.first, r.last, delivery_count))
        run.count += r.last - r.first + 1
        return i + 1

    def _acquire_new(self, run: AcquisitionRun, batch: BatchHeader) -> bool:
        """Acquire the batch's records past SPEO (first deliveries) up to the in-flight cap,
        which holds exactly: a batch crossing it is cut there, in both acquire modes (Kafka
        takes the whole batch in batch-optimized mode; the cap's users and the KIP expect it
        to bound the locks). False when the acquisition must end here."""
        if batch.base_offset > self.speo:
            self._archive_unreadable(self.speo, batch.base_offset - 1)
        room = self.limits.max_record_locks - self.in_flight_count
        take = batch.last_offset - self.speo + 1
        take = min(take, room, run.limit - run.count) if run.strict else min(take, room)
        if take <= 0:
            return False
        self._append_acquired(run, self.speo, self.speo + take - 1)
        return self.speo > batch.last_offset  # else cut by the cap or the record limit

    def _append_acquired(self, run: AcquisitionRun, first: int, last: int) -> None:
        """Acquire first..last, new records at SPEO, extending the run this call acquired."""
        ranges = self._inflight.ranges
        tail = ranges[-1] if ranges else None
        acquired = run.acquired
        if (
            tail is not None
            and tail.last + 1 == first
            and tail.state == RecordState.ACQUIRED
            and tail.delivery_count == 1
            and tail.member_id == run.member_id
            and tail.deadline_ms == run.deadline_ms
            and acquired
            and acquired[-1].last_offset == tail.last
        ):
            tail.last = last  # extend the run this call just acquired
            acquired[-1] = AcquiredRange(acquired[-1].first_offset, last, 1)
        else:
            ranges.append(
                InFlightRange(first, last, RecordState.ACQUIRED, 1, run.member_id, run.deadline_ms)
            )
            acquired.append(AcquiredRange(first, last, 1))
        self.speo = last + 1
        run.count += last - first + 1

    def _append_waiting(self, offset: int) -> None:
        """A new record at SPEO left Available, never delivered (its key must wait)."""
        self._unjudged_below = offset + 1
        if self._append_available(offset, offset, 0):
            self._available_from = min(self._available_from, offset)

    def _append_available(self, first: int, last: int, at: int) -> bool:
        """New records first..last (from SPEO) left Available, never delivered, with ``at`` as
        their time (0: none judged); True when they start a range of their own."""
        ranges = self._inflight.ranges
        tail = ranges[-1] if ranges else None
        self.speo = last + 1
        if (
            tail is not None
            and tail.last + 1 == first
            and tail.state == RecordState.AVAILABLE
            and tail.delivery_count == 0
            and tail.available_at_ms == at
        ):
            tail.last = last
            return False
        ranges.append(InFlightRange(first, last, RecordState.AVAILABLE, 0, None, None, at))
        return True
