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
