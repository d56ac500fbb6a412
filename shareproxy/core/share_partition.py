"""The share-partition leader's state machine for one topic-partition of one share group.

Pure: no I/O, no clock. Every operation that changes durable state returns the ``StateDelta``
the store must commit before the outcome is reported (an acknowledgement is durable before it is
answered). Acquisition changes nothing durable: an Acquired record is stored as it was before.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import islice

from shareproxy.core.acknowledgement import AckBatch, AckRun, normalize_acks
from shareproxy.core.acquiring import Acquiring
from shareproxy.core.acquisition import PartitionLimits
from shareproxy.core.dead_letter import DeadLetterRun, cause_of
from shareproxy.core.errors import ErrorCode, ShareError
from shareproxy.core.inflight import InFlightRange, RangeList
from shareproxy.core.key_order import KeyOrder
from shareproxy.core.persisted import (
    NO_START_OFFSET,
    ArchivedRun,
    PersistedBatch,
    PersistedState,
    StateDelta,
    coalesce,
    write_intervals,
)
from shareproxy.core.record_actions import RecordActions
from shareproxy.core.schedule import Scheduled
from shareproxy.core.states import (
    ACK_TARGET,
    AcknowledgeType,
    ArchiveReason,
    RecordState,
    archived_state,
    released_state,
)
from shareproxy.core.waiting import WaitingRecords


class SharePartition(RecordActions, WaitingRecords, Acquiring):
    """In-flight records between SPSO and SPEO, their locks, and what must be persisted."""

    def __init__(self, start_offset: int, limits: PartitionLimits | None = None) -> None:
        self.limits = limits or PartitionLimits()
        self.spso = start_offset
        self.speo = start_offset  # exclusive: the next offset to read from the log
        self.log_start_offset = start_offset
        self._inflight = RangeList()
        # no Available range starts below this offset: the search for the first one starts
        # here, not at SPSO, so it does not walk again the ranges acquired or delivered
        self._available_from = start_offset
        self._deferred = 0  # records waiting for their delivery time (core.schedule)
        self._due: list[tuple[int, int]] = []  # their times, soonest first (Acquiring's)
        self._released_ms = 0
        self._unjudged_below = 0
        self.lateness: list[tuple[int, int]] = []  # drained by the owner: a histogram's
        self.scheduled: list[Scheduled] = []  # drained by the owner: what it reports
        # What the store holds: its start offset and the last offset it has state for.
        self._persisted_spso = start_offset
        self._persisted_end = start_offset - 1
        self._dirty: list[tuple[int, int]] = []
        # Ever, for metrics: records whose acquisition lock expired; records archived on
        # reaching the delivery count limit (poison records).
        self.lock_timeouts = 0
        self.archived_at_limit = 0
        # Delivered records archived since the owner last drained it (rejected, or at the
        # delivery limit), with why: SPSO soon moves past them and the state forgets them, so
        # the store keeps a log for the poison report and redrives.
        self.archived_log: list[ArchivedRun] = []
        # whether some records may be Archiving: the dead-letter writer looks only then
        self.dead_letter_pending = False
        # key-ordered delivery: the offsets of each key still to process (core.key_order)
        self.key_order = KeyOrder()
        # the last offset acquired before key order was turned on (-1: none): while any of
        # those records is still Acquired, their keys are unknown, so keyed records wait
        self.unordered_until = -1

    # ----------------------------------------------------------------- construction
    @classmethod
    def initialized(
        cls, start_offset: int, limits: PartitionLimits | None = None
    ) -> tuple[SharePartition, StateDelta]:
        """A new share-partition at ``start_offset`` and the write that records it."""
        sp = cls(start_offset, limits)
        return sp, StateDelta(start_offset=start_offset)

    @classmethod
    def from_persisted(
        cls, state: PersistedState, limits: PartitionLimits | None = None
    ) -> SharePartition:
        """Rebuild exactly the engine state that was persisted (nothing is Acquired after it)."""
        sp = cls(state.start_offset, limits)
        expected = state.start_offset
        ranges = sp._inflight.ranges
        available = RecordState.AVAILABLE
        for first, last, delivery_state, delivery_count, available_at in state.batches:
            if first != expected:  # the store is contiguous; a hole reads as new records
                ranges.append(InFlightRange(expected, first - 1, available, 0))
            ranges.append(
                InFlightRange(first, last, delivery_state, delivery_count, None, None, available_at)
            )
            expected = last + 1
        sp.speo = expected
        sp.dead_letter_pending = any(r.state == RecordState.ARCHIVING for r in ranges)
        sp._deferred = sp._count_deferred()
        for r in ranges:
            if r.state == RecordState.AVAILABLE and r.delivery_count == 0:
                if r.available_at_ms:
                    sp._wait_until(r.available_at_ms, r.first)
                else:
                    sp._unjudged_below = r.last + 1
        sp._persisted_end = expected - 1
        sp._advance_spso()
        sp._persisted_spso = sp.spso
        return sp

    # ----------------------------------------------------------------- inspection
    @property
    def ranges(self) -> Sequence[InFlightRange]:
        return self._inflight.ranges

    def next_fetch_offset(self, now_ms: int | None = None) -> int:
        """Where the next read from the log should start: the first Available record not
        waiting for its delivery time (by ``now_ms``, else the latest time seen), else SPEO."""
        if now_ms is not None:
            self._release_due(now_ms)
        i = self._first_available()
        ranges = self._inflight.ranges
        return ranges[i].first if i < len(ranges) else self.speo

    def has_acquirable(self, now_ms: int | None = None) -> bool:
        """Whether an acquisition could hand anything out given enough log data."""
        if now_ms is not None:
            self._release_due(now_ms)
        if self.in_flight_count < self.limits.max_record_locks:
            return True
        return self._first_available() < len(self._inflight.ranges)

    def unwritten(self) -> bool:
        """Whether the next write has something to carry already (records archived while
        acquiring, which no write has taken yet)."""
        return bool(self._dirty) or self.spso != self._persisted_spso

    def holds(self, member_id: str) -> bool:
        """Whether the member holds any acquisition lock here."""
        return any(
            r.member_id == member_id and r.state == RecordState.ACQUIRED
            for r in self._inflight.ranges
        )

    def holders(self) -> set[str]:
        """The members holding acquisition locks here (busy with records of this partition)."""
        return {
            r.member_id
            for r in self._inflight.ranges
            if r.state == RecordState.ACQUIRED and r.member_id is not None
        }

    def backoff_ended(self, since_ms: int, now_ms: int) -> bool:
        """Whether a redelivery back-off ended, or a delivery time came, in (since_ms, now_ms]:
        waiting fetches may now acquire what it held back."""
        if self._due and self._due[0][0] <= now_ms:
            return True  # taken off the index by the acquisition it wakes
        return any(
            since_ms < r.available_at_ms <= now_ms
            for r in islice(self._inflight.ranges, self._first_available(), None)
            if r.state == RecordState.AVAILABLE
        )

    def next_lock_deadline(self) -> int | None:
        deadlines = [
            r.deadline_ms
            for r in self._inflight.ranges
            if r.state == RecordState.ACQUIRED and r.deadline_ms is not None  # every lock has one
        ]
        return min(deadlines) if deadlines else None

    def take_archived_log(self) -> tuple[ArchivedRun, ...]:
        """The delivered records archived since the last call, for the poison report: the
        caller writes them with the next delta, and they are not handed out again."""
        archived = tuple(self.archived_log)
        self.archived_log.clear()
        return archived

    def change_limits(self, limits: PartitionLimits) -> None:
        """A group config changed. Turning key order on, the records already acquired were
        handed out without it: their keys are unknown, so keyed records wait until they end."""
        if limits.key_ordered and not self.limits.key_ordered:
            self.unordered_until = self.speo - 1
        self.limits = limits

    def persisted_view(self) -> PersistedState:
        """The state as the store would hold it if every change so far had been written."""
        return PersistedState(self.spso, coalesce(r.persisted() for r in self._inflight.ranges))

    # ----------------------------------------------------------------- unreadable offsets
    def _archive_unreadable(self, first: int, last: int) -> None:
        """Control records, aborted transactions and offsets no batch holds are never delivered."""
        if last >= self.speo:
            start = max(first, self.speo)
            if start > self.speo:
                self._inflight.append(InFlightRange(self.speo, start - 1, RecordState.ARCHIVED, 0))
            self._inflight.append(InFlightRange(start, last, RecordState.ARCHIVED, 0))
            self.speo = last + 1
            self._dirty.append((start, last))
            last = start - 1
        if first <= last:
            for r in self._inflight.overlapping(first, last):
                if r.state == RecordState.AVAILABLE:
                    a, b = self._inflight.span(max(r.first, first), min(r.last, last))
                    for rr in self._inflight.ranges[a:b]:
                        rr.state = RecordState.ARCHIVED
                    self._dirty.append((max(r.first, first), min(r.last, last)))
        self._advance_spso()

    # ----------------------------------------------------------------- acknowledgement
    def acknowledge(self, member_id: str, batches: Sequence[AckBatch], now_ms: int) -> StateDelta:
        """Apply a member's acknowledgements atomically: all of them, or none and an error.
        Judged batch by batch as Kafka's ``SharePartition.acknowledge`` judges them: offsets
        below SPSO are settled already and skipped, whoever held them (a retry, a late answer,
        a batch SPSO moved into); past the last offset in flight nothing was delivered."""
        runs, spso = normalize_acks(batches), self.spso
        for b in batches:
            self._check_acknowledgeable(member_id, b.first_offset, b.last_offset)
        for run in runs:
            if run.last_offset >= spso:
                first = max(run.first_offset, spso)
                self._apply(AckRun(first, run.last_offset, run.ack_type), now_ms)
        self._advance_spso()
        return self._take_delta()

    def _check_acknowledgeable(self, member_id: str, first: int, last: int) -> None:
        if last < self.spso:
            return
        if self.spso == self.speo:  # Kafka finds no cached batch at all
            raise ShareError(ErrorCode.INVALID_RECORD_STATE, f"{first}-{last}: none in flight")
        if last >= self.speo:
            raise ShareError(
                ErrorCode.INVALID_REQUEST, f"offsets past {self.speo - 1} were never delivered"
            )
        first = max(first, self.spso)
        for r in self._inflight.overlapping(first, last):
            if r.state != RecordState.ACQUIRED or r.member_id != member_id:
                raise ShareError(
                    ErrorCode.INVALID_RECORD_STATE,
                    f"offsets {max(r.first, first)}-{min(r.last, last)} "
                    f"are {r.state.name} and not acquired by this member",
                )

    def _apply(self, run: AckRun, now_ms: int) -> None:
        start, stop = self._inflight.span(run.first_offset, run.last_offset)
        ranges = self._inflight.ranges
        if run.ack_type == AcknowledgeType.RENEW:
            deadline = now_ms + self.limits.record_lock_duration_ms
            for r in ranges[start:stop]:
                r.deadline_ms = deadline
            return
        target = ACK_TARGET[run.ack_type]
        if run.ack_type == AcknowledgeType.REJECT:
            target = archived_state(self.limits.dead_letter)
        for r in ranges[start:stop]:
            if target == RecordState.AVAILABLE:
                self._end_lock(r, now_ms)
            else:
                r.state = target
                r.member_id = None
                r.deadline_ms = None
                if target == RecordState.ARCHIVING:
                    self.dead_letter_pending = True
                if run.ack_type == AcknowledgeType.REJECT:
                    self.archived_log.append(
                        ArchivedRun(r.first, r.last, r.delivery_count, ArchiveReason.REJECTED)
                    )
        self._dirty.append((run.first_offset, run.last_offset))

    def _end_lock(self, r: InFlightRange, now_ms: int) -> None:
        """A lock ends without acceptance: Available again (after the redelivery back-off, if
        any), or Archived (Archiving, with a dead-letter topic) at the delivery limit, or
        Archived when retention has removed the record."""
        limits = self.limits
        if r.last < self.log_start_offset:
            r.state = RecordState.ARCHIVED
        else:
            r.state = released_state(
                r.delivery_count, limits.delivery_count_limit, limits.dead_letter
            )
            if r.state != RecordState.AVAILABLE:
                self.dead_letter_pending |= r.state == RecordState.ARCHIVING
                self.archived_at_limit += r.last - r.first + 1
                self.archived_log.append(
                    ArchivedRun(r.first, r.last, r.delivery_count, ArchiveReason.DELIVERY_LIMIT)
                )
            else:
                delay = self.limits.redelivery_backoff.delay_ms(r.delivery_count)
                r.available_at_ms = now_ms + delay if delay else 0
                self._available_from = min(self._available_from, r.first)
        r.member_id = None
        r.deadline_ms = None

    # ----------------------------------------------------------------- dead letters
    def dead_letters(self) -> list[DeadLetterRun]:
        """The Archiving runs the dead-letter topic must still get, in offset order."""
        limit = self.limits.delivery_count_limit
        runs = [
            DeadLetterRun(r.first, r.last, r.delivery_count, cause_of(r.delivery_count, limit))
            for r in self._inflight.ranges
            if r.state == RecordState.ARCHIVING
        ]
        self.dead_letter_pending = bool(runs)
        return runs

    def dead_lettered(self, first: int, last: int) -> StateDelta:
        """Offsets first..last are in the dead-letter topic (or the group no longer has one):
        their Archiving records are Archived; others are left as they are."""
        for r in self._inflight.overlapping(first, last):
            if r.state != RecordState.ARCHIVING:
                continue
            lo, hi = max(r.first, first), min(r.last, last)
            a, b = self._inflight.span(lo, hi)
            for rr in self._inflight.ranges[a:b]:
                rr.state = RecordState.ARCHIVED
            self._dirty.append((lo, hi))
        self._advance_spso()
        return self._take_delta()

    # ----------------------------------------------------------------- lock endings
    def expire_locks(self, now_ms: int) -> StateDelta:
        """Acquisition locks whose deadline has passed end as if released."""

        def due(r: InFlightRange) -> bool:
            return r.deadline_ms is not None and r.deadline_ms <= now_ms

        delta, ended = self._end_locks_where(due, now_ms)
        self.lock_timeouts += ended
        return delta

    def release_member(self, member_id: str, now_ms: int) -> StateDelta:
        """Release everything a member holds (its share session closed or it left the group)."""
        return self._end_locks_where(lambda r: r.member_id == member_id, now_ms)[0]

    def _end_locks_where(
        self, predicate: Callable[[InFlightRange], bool], now_ms: int
    ) -> tuple[StateDelta, int]:
        """End the locks of the Acquired ranges matching; (the write, records ended)."""
        self._cut_at_log_start()
        ended = 0
        for r in self._inflight.ranges:
            if r.state == RecordState.ACQUIRED and predicate(r):
                ended += r.last - r.first + 1
                self._end_lock(r, now_ms)
                self._dirty.append((r.first, r.last))
        self._advance_spso()
        return self._take_delta(), ended

    def _cut_at_log_start(self) -> None:
        """Split the range that straddles the log start so each side can end its own way."""
        if self.spso < self.log_start_offset < self.speo:
            self._inflight.cut(self.log_start_offset)

    # ----------------------------------------------------------------- the log moving
    def update_log_start_offset(self, log_start_offset: int) -> StateDelta:
        """Retention or DeleteRecords moved the log start: records below it cannot be read, so
        Available ones are archived and SPSO jumps forward (Acquired ones stay until they end)."""
        if log_start_offset <= self.log_start_offset:
            return StateDelta()
        self.log_start_offset = log_start_offset
        if log_start_offset > self.spso:
            self._cut_at_log_start()
            for r in self._inflight.ranges:
                if r.first >= log_start_offset:
                    break
                if r.state == RecordState.AVAILABLE:
                    r.state = RecordState.ARCHIVED
                    self._dirty.append((r.first, r.last))
            self._deferred = self._count_deferred()
            if log_start_offset > self.speo:
                if self._inflight.ranges:
                    self._inflight.append(
                        InFlightRange(self.speo, log_start_offset - 1, RecordState.ARCHIVED, 0)
                    )
                    self._dirty.append((self.speo, log_start_offset - 1))
                self.speo = log_start_offset
            self._advance_spso()
        return self._take_delta()

    # ----------------------------------------------------------------- SPSO and deltas
    def _advance_spso(self) -> None:
        self._inflight.drop_terminal_prefix()
        ranges = self._inflight.ranges
        self.spso = ranges[0].first if ranges else self.speo

    def _take_delta(self) -> StateDelta:
        """Build the write for everything changed since the last one, as the KIP's example does:
        changed offsets at or past SPSO, with any stretch between the stored end and them filled
        in (first deliveries read as Available, delivery count 0) so the store stays contiguous."""
        dirty = sorted(self._dirty)
        self._dirty = []
        spso = self.spso
        start_offset = NO_START_OFFSET
        if spso != self._persisted_spso:
            start_offset = spso
            self._persisted_spso = spso
        intervals, self._persisted_end = write_intervals(dirty, spso, self._persisted_end)
        batches: list[PersistedBatch] = []
        for first, last in intervals:
            batches.extend(self._persisted_slice(first, last))
        return StateDelta(start_offset, tuple(coalesce(batches)))

    def _persisted_slice(self, first: int, last: int) -> list[PersistedBatch]:
        out = []
        for r in self._inflight.overlapping(first, last):
            b = r.persisted()
            out.append(
                b._replace(
                    first_offset=max(b.first_offset, first), last_offset=min(b.last_offset, last)
                )
            )
        return out
