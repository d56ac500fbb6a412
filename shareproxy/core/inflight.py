"""In-flight records as offset ranges.

Every offset in [SPSO, SPEO) belongs to exactly one ``InFlightRange``; the list is sorted and
contiguous. A range is uniform (one state, delivery count, owner and lock deadline) and is split
only where an acknowledgement, a timeout or an acquisition cuts it, so the work of the leader is
per range, not per record.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass
from operator import attrgetter

from shareproxy.core.persisted import PersistedBatch
from shareproxy.core.schedule import DUE_NOW
from shareproxy.core.states import RecordState


class InFlightRange:
    """Offsets first..last (inclusive) sharing one state; member/deadline set while Acquired;
    ``available_at_ms`` set when a lock ended under a redelivery back-off (kept while Acquired
    again, as the store still holds it)."""

    __slots__ = (
        "available_at_ms",
        "deadline_ms",
        "delivery_count",
        "first",
        "last",
        "member_id",
        "state",
    )

    def __init__(
        self,
        first: int,
        last: int,
        state: RecordState,
        delivery_count: int,
        member_id: str | None = None,
        deadline_ms: int | None = None,
        available_at_ms: int = 0,
    ) -> None:
        self.first = first
        self.last = last
        self.state = state
        self.delivery_count = delivery_count
        self.member_id = member_id
        self.deadline_ms = deadline_ms
        self.available_at_ms = available_at_ms

    def split(self, offset: int) -> InFlightRange:
        """Cut before ``offset``: self keeps first..offset-1, the returned range the rest."""
        tail = InFlightRange(
            offset,
            self.last,
            self.state,
            self.delivery_count,
            self.member_id,
            self.deadline_ms,
            self.available_at_ms,
        )
        self.last = offset - 1
        return tail

    def persisted(self) -> PersistedBatch:
        """How the store sees this range: an Acquired record is stored as it was before its
        acquisition, i.e. Available with one delivery fewer (0 on its first delivery) and the
        back-off it had then (over by now; kept so the engine and the store agree). A record
        never delivered is stored without its delivery time, which a restart reads again from
        the log (so waiting records coalesce in the store), unless an operator made it due."""
        if self.state == RecordState.ACQUIRED or self.state == RecordState.AVAILABLE:
            count = self.delivery_count - (self.state == RecordState.ACQUIRED)
            at = self.available_at_ms
            if count == 0 and at != DUE_NOW:
                at = 0
            if at:
                return PersistedBatch(self.first, self.last, RecordState.AVAILABLE, count, at)
            return PersistedBatch(self.first, self.last, RecordState.AVAILABLE, count)
        return PersistedBatch(self.first, self.last, self.state, self.delivery_count)

    def __repr__(self) -> str:
        owner = f", {self.member_id}@{self.deadline_ms}" if self.member_id is not None else ""
        if self.available_at_ms:
            owner += f", from {self.available_at_ms}"
        return (
            f"InFlightRange({self.first}-{self.last}, {self.state.name}, "
            f"dc={self.delivery_count}{owner})"
        )


@dataclass(frozen=True, slots=True)
class AcquiredRange:
    """What ShareFetch reports per acquired run: FirstOffset, LastOffset, DeliveryCount."""

    first_offset: int
    last_offset: int
    delivery_count: int


# the bisect key: attrgetter runs in C, where a Python function is a frame per probe
_first = attrgetter("first")


class RangeList:
    """The sorted, contiguous list of in-flight ranges with the cuts the leader needs."""

    __slots__ = ("ranges",)

    def __init__(self) -> None:
        self.ranges: list[InFlightRange] = []

    def __len__(self) -> int:
        return len(self.ranges)

    def index_of(self, offset: int) -> int:
        """Index of the range holding ``offset`` (the caller knows it is in flight)."""
        return bisect_right(self.ranges, offset, key=_first) - 1

    def cut(self, offset: int) -> int:
        """Make a range start exactly at ``offset``; return that range's index.

        ``offset`` may equal the end of the window, in which case ``len(self)`` is returned.
        """
        ranges = self.ranges
        if not ranges or offset > ranges[-1].last:
            return len(ranges)
        i = self.index_of(offset)
        r = ranges[i]
        if r.first == offset:
            return i
        ranges.insert(i + 1, r.split(offset))
        return i + 1

    def span(self, first: int, last: int) -> tuple[int, int]:
        """Cut at both ends of first..last and return the [start, stop) indexes covering it."""
        start = self.cut(first)
        stop = self.cut(last + 1)
        return start, stop

    def overlapping(self, first: int, last: int) -> list[InFlightRange]:
        """The ranges that hold any offset of first..last, without cutting anything."""
        ranges = self.ranges
        if not ranges:
            return []
        i = max(self.index_of(first), 0)
        out = []
        while i < len(ranges) and ranges[i].first <= last:
            if ranges[i].last >= first:
                out.append(ranges[i])
            i += 1
        return out

    def append(self, r: InFlightRange) -> None:
        self.ranges.append(r)

    def drop_terminal_prefix(self) -> None:
        """Forget the leading Acknowledged/Archived ranges: SPSO moves past them."""
        ranges = self.ranges
        k = 0
        n = len(ranges)
        while k < n and ranges[k].state.is_terminal:
            k += 1
        if k:
            del ranges[:k]
