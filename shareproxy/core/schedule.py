"""Scheduled delivery (beyond KIP-932): when a record becomes deliverable. A record may name its
time in an ``x-deliver-at`` header, and a group may delay every record (a delay queue); a
record not due yet stays Available, never delivered, and SPSO waits at it while the records
after it flow. Pure: the caller gives the time.

A batch's time is its newest record's (the batch header's max timestamp): a delay counts from
it and the bound is measured from it, so no record is read for a delay queue and none is ever
early (each record's own timestamp is at most the batch's).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import NamedTuple

DELIVER_AT_HEADER = "x-deliver-at"
# a record without the header, or with one that is not a time (delivered as if it had none)
NO_TIME = -1
# the longest a record may wait, by default: a week
DEFAULT_MAX_DELAY_MS = 7 * 24 * 3600 * 1000
# the time an operator's "deliver now" gives a record never delivered: its own time, read
# from the log, no longer holds it back; the only delivery time the store is given (the others
# are read again from the log)
DUE_NOW = 1
# digits of the largest time a header may name (year 2286 in ms has 13; 18 stays in an int64)
_MAX_DIGITS = 18
# delivery times are rounded up to this step: records falling due within one step share a
# range of the in-flight records (one per step, not one per record), and the lock sweep that
# wakes waiting fetches runs at the same step, so a record is never early and the rounding
# adds nothing a fetch could notice
TICK_MS = 50


def parse_deliver_at(value: bytes | None) -> int | None:
    """The time (ms since the epoch) a header value names; None when it is not ASCII digits."""
    if not value or len(value) > _MAX_DIGITS or not value.isdigit():
        return None
    return int(value)


class Scheduled(NamedTuple):
    """A run of records read in with a delivery time still ahead, or cut to the bound: what
    the owner reports (the bound, and a time past the topic's retention)."""

    records: int
    timestamp_ms: int  # their batch's
    due_ms: int
    cut: bool  # the bound, not their own time or the delay, set it


@dataclass(frozen=True, slots=True)
class DeliverySchedule:
    """A group's schedule configs: its delay (0: none), the bound on any wait, and whether
    records' own ``x-deliver-at`` headers are read."""

    delay_ms: int = 0
    max_delay_ms: int = DEFAULT_MAX_DELAY_MS
    headers: bool = False

    @property
    def active(self) -> bool:
        return self.delay_ms > 0 or self.headers

    def due_ms(self, timestamp_ms: int, deliver_at_ms: int = NO_TIME) -> int:
        """When a record of a batch with this timestamp becomes deliverable (0: at once): the
        later of the delay and its own time, but no later than the bound."""
        due = timestamp_ms + self.delay_ms if self.delay_ms else 0
        if deliver_at_ms > due:
            due = deliver_at_ms
        if due <= 0:
            return 0
        due = min(due, max(timestamp_ms, 0) + self.max_delay_ms)
        return -(-due // TICK_MS) * TICK_MS

    def beyond_bound(self, timestamp_ms: int, deliver_at_ms: int = NO_TIME) -> bool:
        """Whether a record's own time, or the delay, lies past the bound: it is due at the
        bound."""
        limit = max(timestamp_ms, 0) + self.max_delay_ms
        return deliver_at_ms > limit or (self.delay_ms > 0 and timestamp_ms + self.delay_ms > limit)

    def runs(
        self,
        lo: int,
        last: int,
        base: int,
        timestamp_ms: int,
        deliver_at: tuple[int, ...] | None,
    ) -> Iterator[tuple[int, int, int, bool]]:
        """Offsets lo..last of a batch (first offset ``base``) as (first, last, due, cut) runs
        of one due time each, cut when the bound set it: one run for a batch whose records
        name no time."""
        if deliver_at is None or not self.headers:
            yield lo, last, self.due_ms(timestamp_ms), self.beyond_bound(timestamp_ms)
            return
        limit = max(timestamp_ms, 0) + self.max_delay_ms
        delay_cut = self.beyond_bound(timestamp_ms)
        start = lo
        at = deliver_at[lo - base]
        due, cut = self.due_ms(timestamp_ms, at), delay_cut or at > limit
        for offset in range(lo + 1, last + 1):
            at = deliver_at[offset - base]
            d, c = self.due_ms(timestamp_ms, at), delay_cut or at > limit
            if d != due or c != cut:
                yield start, offset - 1, due, cut
                start, due, cut = offset, d, c
        yield start, last, due, cut
