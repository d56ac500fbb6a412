"""What a share-partition still owes its group: in-flight records by state, and lag.

Lag is the number of records between SPSO and the high watermark that are neither Acknowledged
nor Archived: records not yet read from the log (SPEO onwards) count as well as Available and
Acquired ones, but not records waiting for their delivery time (core.schedule), which are owed
nothing yet and are counted apart.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from shareproxy.core.states import RecordState


@dataclass(frozen=True, slots=True)
class PartitionLag:
    spso: int
    speo: int
    high_watermark: int | None  # None: the upstream cluster could not say
    lag: int | None  # None: unknown without the high watermark
    in_flight: dict[str, int] = field(default_factory=dict)  # state name → records
    waiting: int = 0  # records whose delivery time is still ahead: not in the lag
    next_due_ms: int | None = None  # the earliest of their times


# (first, last, delivery time) of in-flight ranges whose delivery time is still ahead
Waiting = Sequence[tuple[int, int, int]]


def partition_lag(
    spso: int,
    speo: int,
    ranges: Iterable[tuple[int, int, RecordState]],
    high_watermark: int | None,
    waiting: Waiting = (),
) -> PartitionLag:
    """``ranges``: (first, last, state) of the in-flight records, SPSO ≤ first ≤ last < SPEO;
    ``waiting``: those of them whose delivery time is ahead. Without the high watermark the lag
    is unknown; the stored offsets are still known."""
    counts = {s.name.lower(): 0 for s in RecordState}
    settled = 0
    for first, last, state in ranges:
        counts[state.name.lower()] += last - first + 1
        if high_watermark is not None and state.is_terminal:
            settled += max(0, min(last, high_watermark - 1) - max(first, spso) + 1)
    held = sum(last - first + 1 for first, last, _ in waiting)
    lag = None if high_watermark is None else max(0, high_watermark - spso - settled - held)
    due = min((at for _, _, at in waiting), default=None)
    return PartitionLag(spso, speo, high_watermark, lag, counts, held, due)


def first_unacked(
    spso: int, ranges: Iterable[tuple[int, int, RecordState]], waiting: Waiting = ()
) -> int:
    """The first offset at or past SPSO that still counts towards the lag: an Available or
    Acquired record not waiting for its delivery time, or one not yet in flight (a gap, or
    SPEO onwards). ``ranges`` in offset order, ``waiting`` whole ranges of them. Since SPSO
    moves past the settled prefix, this is SPSO but for a moment, or while records wait."""
    held = {(first, last) for first, last, _ in waiting}
    offset = spso
    for first, last, state in ranges:
        if first > offset or not (state.is_terminal or (first, last) in held):
            if last >= offset:
                break
            continue
        offset = max(offset, last + 1)
    return offset


def oldest_unacked_age(
    first: int, high_watermark: int | None, timestamp_ms: int | None, now_ms: int
) -> float | None:
    """Seconds the oldest record not yet acknowledged has waited, by the timestamp of the
    batch holding ``first`` (its first record's: the age is an upper bound within a batch).
    0 when nothing waits; None when that is unknown (no high watermark, or no timestamp)."""
    if high_watermark is None:
        return None
    if first >= high_watermark:
        return 0.0
    if timestamp_ms is None:
        return None
    return max(0, now_ms - timestamp_ms) / 1000


@dataclass(frozen=True, slots=True)
class Backlog:
    """A group's (or any set of share-partitions') lag and oldest unacknowledged age."""

    lag: int | None  # None: some share-partition's lag is unknown
    oldest_unacked_age_s: float | None  # None: unknown for some share-partition that waits


def backlog(parts: Iterable[tuple[int | None, float | None]]) -> Backlog:
    """Sum the lags and take the oldest age of (lag, age) per share-partition; one unknown
    makes the whole unknown, since the missing one could be the largest. No share-partition:
    nothing waits."""
    total: int | None = 0
    oldest: float | None = 0.0
    for lag, age in parts:
        total = None if total is None or lag is None else total + lag
        oldest = None if oldest is None or age is None else max(oldest, age)
    return Backlog(total, oldest)
