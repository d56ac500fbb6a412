"""Redriving archived records: copies of them produced back to their source topic, once.

Pure: what a redrive request selects, what of it the archive log holds, what was redriven
before, and the headers that say where a copy came from. The archive log keeps ranges that may
overlap (a range logged again, longer); the rules here work on offsets, so an offset is
produced once however many ranges hold it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from shareproxy.core.store import SharePartitionKey

# Headers of a redriven copy: where it came from and when it was redriven (UTF-8 text; the
# time in epoch milliseconds). The original's own headers come first, unchanged.
HEADER_TOPIC = "__redrive.topic"
HEADER_PARTITION = "__redrive.partition"
HEADER_OFFSET = "__redrive.offset"
HEADER_GROUP = "__redrive.group"
HEADER_TIME = "__redrive.timestamp"

# Bounds of one call: the archived list's page, and the offsets one redrive may copy.
LIST_LIMIT_DEFAULT = 100
LIST_LIMIT_MAX = 1_000
REDRIVE_MAX_RECORDS = 10_000

Interval = tuple[int, int]  # first..last, inclusive


@dataclass(frozen=True, slots=True)
class ArchivedEntry:
    """One archive log range as stored."""

    key: SharePartitionKey
    first_offset: int
    last_offset: int
    delivery_count: int
    reason: str | None  # None: archived before the reason was kept
    archived_at: datetime
    redriven_at: datetime | None


@dataclass(frozen=True, slots=True)
class Selection:
    """Offsets first..last of one share-partition; None for both: all it has archived."""

    key: SharePartitionKey
    first: int | None = None
    last: int | None = None


@dataclass(slots=True)
class SelectionPlan:
    """What a selection comes to: offsets to redrive now, offsets redriven before, and
    offsets the archive log does not hold (the request is refused while any are)."""

    selection: Selection
    redrive: list[Interval] = field(default_factory=list)
    already: list[Interval] = field(default_factory=list)
    missing: list[Interval] = field(default_factory=list)

    @property
    def records(self) -> int:
        return count(self.redrive)

    @property
    def empty(self) -> bool:
        """Nothing selected is archived (a whole partition with no archived records)."""
        return not self.redrive and not self.already


def merged(intervals: Iterable[Interval]) -> list[Interval]:
    """Sorted, overlapping and adjacent intervals joined."""
    out: list[Interval] = []
    for first, last in sorted(intervals):
        if out and first <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], last))
        else:
            out.append((first, last))
    return out


def minus(intervals: Sequence[Interval], removed: Sequence[Interval]) -> list[Interval]:
    """The offsets of ``intervals`` not in ``removed`` (both merged)."""
    out = []
    for first, last in intervals:
        lo = first
        for a, b in removed:
            if b < lo or a > last:
                continue
            if a > lo:
                out.append((lo, a - 1))
            lo = max(lo, b + 1)
        if lo <= last:
            out.append((lo, last))
    return out


def clipped(intervals: Sequence[Interval], first: int, last: int) -> list[Interval]:
    return [(max(a, first), min(b, last)) for a, b in intervals if b >= first and a <= last]


def count(intervals: Iterable[Interval]) -> int:
    return sum(b - a + 1 for a, b in intervals)


def plan(selection: Selection, entries: Sequence[ArchivedEntry]) -> SelectionPlan:
    """The plan of one selection over the archive log ranges of its share-partition."""
    archived = merged((e.first_offset, e.last_offset) for e in entries)
    redriven = merged((e.first_offset, e.last_offset) for e in entries if e.redriven_at)
    if selection.first is None or selection.last is None:
        wanted = archived
    else:
        wanted = [(selection.first, selection.last)]
    found = [i for first, last in wanted for i in clipped(archived, first, last)]
    return SelectionPlan(
        selection,
        redrive=minus(found, redriven),
        already=[i for first, last in found for i in clipped(redriven, first, last)],
        missing=minus(wanted, archived),
    )


def claimed_pieces(entry: ArchivedEntry, claim: Interval) -> list[tuple[Interval, bool]]:
    """How an unredriven entry splits when ``claim`` (within it) is redriven: each piece's
    offsets and whether it is the redriven one."""
    first, last = claim
    pieces = []
    if entry.first_offset < first:
        pieces.append(((entry.first_offset, first - 1), False))
    pieces.append(((first, last), True))
    if last < entry.last_offset:
        pieces.append(((last + 1, entry.last_offset), False))
    return pieces


def redrive_headers(
    topic: str, partition: int, offset: int, group_id: str, now_ms: int
) -> list[tuple[str, bytes]]:
    """The headers a redriven copy adds to the original's."""
    return [
        (HEADER_TOPIC, topic.encode()),
        (HEADER_PARTITION, str(partition).encode()),
        (HEADER_OFFSET, str(offset).encode()),
        (HEADER_GROUP, group_id.encode()),
        (HEADER_TIME, str(now_ms).encode()),
    ]


class ArchiveLog(Protocol):
    """The archive log as the redrive use cases see it (``persistence.archive_log``)."""

    async def archived_page(
        self,
        group_id: str,
        keys: Sequence[SharePartitionKey] | None,
        from_offset: int,
        limit: int,
    ) -> list[ArchivedEntry]:
        """Ranges of these share-partitions (all of the group's for None) ending at or after
        ``from_offset``, in key and offset order, at most ``limit``."""
        ...

    async def claim_redrive(
        self, selections: Sequence[Selection], dry_run: bool, max_records: int
    ) -> list[SelectionPlan]:
        """Plan every selection in one transaction and, unless ``dry_run``, an offset is
        missing or more than ``max_records`` would go, mark what each redrives as redriven
        before anything is produced: a second call finds them redriven."""
        ...

    async def release_redrive(self, key: SharePartitionKey, intervals: Sequence[Interval]) -> None:
        """The produce of a claimed redrive failed: its offsets may be redriven again."""
        ...

    async def explain_rejection(self, key: SharePartitionKey, offset: int, reason: str) -> bool:
        """Say why one rejected record was rejected, in more words than "rejected" (a push
        endpoint's status); False if the log holds no such record archived alone."""
        ...
