"""The durable shape of a share-partition: KIP-932's ShareSnapshot / ShareUpdate values.

A ``StateDelta`` is what one WriteShareGroupState carries (StartOffset, or -1 when it did not
move, plus the state batches that changed). ``PersistedState`` folds deltas into a snapshot; the
store and the engine's reload both use it, so "what was written" and "what is read back" cannot
disagree.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from shareproxy.core.states import ArchiveReason, RecordState

NO_START_OFFSET = -1
# Kafka's share.coordinator.snapshot.update.records.per.snapshot: updates folded into a new
# snapshot. A fold is a transaction of five statements (~6 ms of the node's CPU), so folding
# every 50 updates cost ~120 µs per write.
DEFAULT_FOLD_EVERY = 500


class PersistedBatch(NamedTuple):
    """One stored state batch: FirstOffset, LastOffset, DeliveryState, DeliveryCount, and, beyond
    KIP-932, when an Available batch under a redelivery back-off may be acquired again (epoch
    ms; 0 at once). Stored as ``[first, last, state, count]``, with the fifth value only when set.

    A tuple, because a reload builds one per stored range (100k of them must load fast)."""

    first_offset: int
    last_offset: int
    delivery_state: RecordState
    delivery_count: int
    available_at_ms: int = 0

    def to_row(self) -> list[int]:
        row = [self.first_offset, self.last_offset, int(self.delivery_state), self.delivery_count]
        if self.available_at_ms:
            row.append(self.available_at_ms)
        return row


_STATE_OF = {int(s): s for s in RecordState}


class ArchivedRun(NamedTuple):
    """Delivered records archived together (first..last), for the archive log: how often
    they were delivered and why they were given up on."""

    first: int
    last: int
    delivery_count: int
    reason: ArchiveReason


def batches_from_rows(rows: Iterable[Sequence[int]]) -> list[PersistedBatch]:
    """Decode stored ``[first, last, state, count(, available at)]`` rows; unknown states
    raise KeyError."""
    state_of = _STATE_OF
    make = tuple.__new__  # NamedTuple's own __new__ is a Python call per row: 3x slower here
    cls = PersistedBatch
    out: list[PersistedBatch] = []
    append = out.append
    for row in rows:
        if len(row) == 4:
            f, la, s, c = row
            append(make(cls, (f, la, state_of[s], c, 0)))
        else:
            f, la, s, c, at = row
            append(make(cls, (f, la, state_of[s], c, int(at))))
    return out


@dataclass(frozen=True, slots=True)
class StateDelta:
    """The persistence delta of one state change; empty means nothing needs writing."""

    start_offset: int = NO_START_OFFSET
    state_batches: tuple[PersistedBatch, ...] = ()

    @property
    def is_empty(self) -> bool:
        return self.start_offset == NO_START_OFFSET and not self.state_batches


def coalesce(batches: Iterable[PersistedBatch]) -> list[PersistedBatch]:
    """Merge adjacent batches with equal state, delivery count and back-off (input sorted,
    disjoint)."""
    out: list[PersistedBatch] = []
    for b in batches:
        if out:
            p = out[-1]
            if (
                p.last_offset + 1 == b.first_offset
                and p.delivery_state == b.delivery_state
                and p.delivery_count == b.delivery_count
                and p.available_at_ms == b.available_at_ms
            ):
                out[-1] = p._replace(last_offset=b.last_offset)
                continue
        out.append(b)
    return out


@dataclass(slots=True)
class PersistedState:
    """A share-partition's durable state: start offset (SPSO) and sorted, disjoint batches."""

    start_offset: int = NO_START_OFFSET
    batches: list[PersistedBatch] = field(default_factory=list)

    @property
    def end_offset(self) -> int:
        """Last offset covered by the stored state (SPSO - 1 when no batch is stored)."""
        if self.batches:
            return self.batches[-1].last_offset
        return self.start_offset - 1

    def apply(self, delta: StateDelta) -> None:
        """Fold one delta in: a newer batch overrides the stored state of the offsets it covers."""
        if delta.start_offset != NO_START_OFFSET:
            self.start_offset = delta.start_offset
        for batch in delta.state_batches:
            self._overlay(batch)
        self._trim_below_start()

    def _overlay(self, batch: PersistedBatch) -> None:
        batches = self.batches
        if not batches or batches[-1].last_offset < batch.first_offset:
            batches.append(batch)  # the common case: state written past the stored end
            return
        lo = bisect_left(batches, batch.first_offset, key=_last_offset)
        hi = bisect_right(batches, batch.last_offset, key=_first_offset)
        replacement: list[PersistedBatch] = []
        if lo < hi:
            head, tail = batches[lo], batches[hi - 1]
            if head.first_offset < batch.first_offset:
                replacement.append(head._replace(last_offset=batch.first_offset - 1))
            replacement.append(batch)
            if tail.last_offset > batch.last_offset:
                replacement.append(tail._replace(first_offset=batch.last_offset + 1))
        else:
            replacement.append(batch)
        batches[lo:hi] = replacement

    def _trim_below_start(self) -> None:
        start = self.start_offset
        batches = self.batches
        if not batches or batches[0].first_offset >= start:
            return
        idx = bisect_right(batches, start - 1, key=_last_offset)
        del batches[:idx]
        if batches and batches[0].first_offset < start:
            batches[0] = batches[0]._replace(first_offset=start)

    def canonical(self) -> list[PersistedBatch]:
        """Coalesced batches with trailing "first delivery" (Available, count 0) dropped.

        Two states that differ only there describe the same records: an offset past the stored
        end is read from the log as Available with delivery count 0 anyway.
        """
        out = coalesce(self.batches)
        while (
            out and out[-1].delivery_state == RecordState.AVAILABLE and out[-1].delivery_count == 0
        ):
            out.pop()
        return out


def write_intervals(
    dirty: Iterable[tuple[int, int]], spso: int, persisted_end: int
) -> tuple[list[tuple[int, int]], int]:
    """The offset intervals one write must carry, and the stored end after it: the changed
    intervals (sorted) at or past SPSO, merged, with any stretch between the stored end and them
    filled in so the stored state stays contiguous (first deliveries read as Available)."""
    persisted_end = max(persisted_end, spso - 1)
    intervals: list[tuple[int, int]] = []
    for first, last in dirty:
        first = max(first, spso)
        if first > last:
            continue
        if intervals and first <= intervals[-1][1] + 1:
            if last > intervals[-1][1]:
                intervals[-1] = (intervals[-1][0], last)
        else:
            intervals.append((first, last))
    if intervals and intervals[-1][1] > persisted_end:
        gap_first = persisted_end + 1
        # every interval past the stored end joins one stretch from gap_first
        keep = [iv for iv in intervals if iv[1] < gap_first]
        tail_first = min(gap_first, *(iv[0] for iv in intervals if iv[1] >= gap_first))
        keep.append((tail_first, intervals[-1][1]))
        intervals = keep
        persisted_end = intervals[-1][1]
    return intervals, persisted_end


def _first_offset(b: PersistedBatch) -> int:
    return b.first_offset


def _last_offset(b: PersistedBatch) -> int:
    return b.last_offset
