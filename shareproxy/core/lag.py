"""What a share-partition still owes its group: in-flight records by state, and lag.

Lag is the number of records between SPSO and the high watermark that are neither Acknowledged
nor Archived: records not yet read from the log (SPEO onwards) count as well as Available and
Acquired ones.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from shareproxy.core.states import RecordState


@dataclass(frozen=True, slots=True)
class PartitionLag:
    spso: int
    speo: int
    high_watermark: int | None  # None: the upstream cluster could not say
    lag: int | None  # None: unknown without the high watermark
    in_flight: dict[str, int] = field(default_factory=dict)  # state name → records


def partition_lag(
    spso: int,
    speo: int,
    ranges: Iterable[tuple[int, int, RecordState]],
    high_watermark: int | None,
) -> PartitionLag:
    """``ranges``: (first, last, state) of the in-flight records, SPSO ≤ first ≤ last < SPEO.
    Without the high watermark the lag is unknown; the stored offsets are still known."""
    counts = {s.name.lower(): 0 for s in RecordState}
    settled = 0
    for first, last, state in ranges:
        counts[state.name.lower()] += last - first + 1
        if high_watermark is not None and state.is_terminal:
            settled += max(0, min(last, high_watermark - 1) - max(first, spso) + 1)
    lag = None if high_watermark is None else max(0, high_watermark - spso - settled)
    return PartitionLag(spso, speo, high_watermark, lag, counts)


def first_unacked(spso: int, ranges: Iterable[tuple[int, int, RecordState]]) -> int:
    """The first offset at or past SPSO that still counts towards the lag: an Available or
    Acquired record, or one not yet in flight (a gap, or SPEO onwards). ``ranges`` in offset
    order. Since SPSO moves past the settled prefix, this is SPSO but for a moment."""
    offset = spso
    for first, last, state in ranges:
        if first > offset or not state.is_terminal:
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
