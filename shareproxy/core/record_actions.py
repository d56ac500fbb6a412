"""What an operator may see and do with single in-flight records (beyond KIP-932, which gives
an operator only counts): the ranges between SPSO and SPEO page by page, and a release, accept
(skip) or reject of chosen offsets, each applied all or nothing and written like an
acknowledgement.

Which states each action moves a record from:

- release: Acquired only (any member's lock), to Available (Archived at the delivery limit),
  its delivery count kept, as a lock that ends when a share session closes;
- accept: Available or Acquired, to Acknowledged: a record skipped, never delivered again;
- reject: Available or Acquired, to Archived (Archiving while the group has a dead-letter
  topic), as a consumer's Reject: a poison record no one holds can be given up on too.

A record already Acknowledged, Archiving or Archived is refused with INVALID_RECORD_STATE, as
ShareAcknowledge refuses records that are not acquired by the member.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from itertools import islice

from shareproxy.core.acquisition import PartitionLimits
from shareproxy.core.errors import ErrorCode, ShareError
from shareproxy.core.inflight import InFlightRange, RangeList
from shareproxy.core.persisted import ArchivedRun, StateDelta
from shareproxy.core.schedule import DUE_NOW
from shareproxy.core.states import ArchiveReason, RecordState, archived_state

# how many rows one page of the view holds: by default, and at most
DEFAULT_PAGE = 100
MAX_PAGE = 1000


class RecordAction(StrEnum):
    RELEASE = "release"
    ACCEPT = "accept"
    REJECT = "reject"
    DELIVER = "deliver"  # a record waiting for its delivery time is deliverable now


ACTION_SOURCES: dict[RecordAction, frozenset[RecordState]] = {
    RecordAction.RELEASE: frozenset({RecordState.ACQUIRED}),
    RecordAction.ACCEPT: frozenset({RecordState.AVAILABLE, RecordState.ACQUIRED}),
    RecordAction.REJECT: frozenset({RecordState.AVAILABLE, RecordState.ACQUIRED}),
    RecordAction.DELIVER: frozenset({RecordState.AVAILABLE}),
}


@dataclass(frozen=True, slots=True)
class RecordRun:
    """Offsets first..last sharing one state; member and lock deadline while Acquired."""

    first: int
    last: int
    state: RecordState
    delivery_count: int
    member_id: str | None
    lock_deadline_ms: int | None
    available_at_ms: int = 0  # an Available run's delivery time or end of back-off (0: none)


@dataclass(frozen=True, slots=True)
class RecordsPage:
    spso: int
    speo: int
    runs: list[RecordRun]
    next_offset: int | None  # where the next page starts; None: this one reached SPEO


def check_page(from_offset: int | None, limit: int) -> None:
    """A page request the view can answer (INVALID_REQUEST otherwise)."""
    if from_offset is not None and from_offset < 0:
        raise ShareError(ErrorCode.INVALID_REQUEST, f"from_offset {from_offset} is negative")
    if not 1 <= limit <= MAX_PAGE:
        raise ShareError(ErrorCode.INVALID_REQUEST, f"limit must be 1 to {MAX_PAGE}, not {limit}")


def page_of(
    ranges: Sequence[InFlightRange], spso: int, speo: int, from_offset: int | None, limit: int
) -> RecordsPage:
    """Up to ``limit`` runs from ``from_offset`` (SPSO when absent or below it), the first one
    cut to start there."""
    check_page(from_offset, limit)
    start = spso if from_offset is None else max(from_offset, spso)
    runs: list[RecordRun] = []
    at = max(bisect_right(ranges, start, key=_first) - 1, 0)
    for r in islice(ranges, at, None):
        if r.last < start:
            continue
        if len(runs) == limit:
            break
        acquired = r.state == RecordState.ACQUIRED
        runs.append(
            RecordRun(
                max(r.first, start),
                r.last,
                r.state,
                r.delivery_count,
                r.member_id if acquired else None,
                r.deadline_ms if acquired else None,
                r.available_at_ms
                if r.state == RecordState.AVAILABLE and r.available_at_ms > DUE_NOW
                else 0,
            )
        )
    following = runs[-1].last + 1 if runs else speo
    return RecordsPage(spso, speo, runs, following if following < speo else None)


def _first(r: InFlightRange) -> int:
    return r.first


class RecordActions:
    """The operator's actions on the in-flight records; SharePartition supplies the state."""

    limits: PartitionLimits
    spso: int
    speo: int
    dead_letter_pending: bool
    archived_log: list[ArchivedRun]
    _inflight: RangeList
    _dirty: list[tuple[int, int]]
    _deferred: int

    # the waiting half's (core.waiting)
    _count_deferred: Callable[[], int]
    _wait_until: Callable[[int, int], None]

    def _end_lock(self, r: InFlightRange, now_ms: int) -> None:
        raise NotImplementedError  # SharePartition's: a lock ending without acceptance

    def _advance_spso(self) -> None:
        raise NotImplementedError  # SharePartition's

    def _take_delta(self) -> StateDelta:
        raise NotImplementedError  # SharePartition's

    def page(self, from_offset: int | None, limit: int) -> RecordsPage:
        return page_of(self._inflight.ranges, self.spso, self.speo, from_offset, limit)

    def held_by(self, member_id: str) -> list[tuple[int, int]]:
        """The offset runs the member holds acquisition locks on, in order."""
        return [
            (r.first, r.last)
            for r in self._inflight.ranges
            if r.state == RecordState.ACQUIRED and r.member_id == member_id
        ]

    def act(self, action: RecordAction, first: int, last: int, now_ms: int) -> StateDelta:
        """Apply ``action`` to offsets first..last, all of them or none and a ShareError; SPSO
        moves past a prefix that became terminal. The write returned must be committed before
        the change is reported."""
        if first > last:
            raise ShareError(ErrorCode.INVALID_REQUEST, f"offsets {first}-{last}: first > last")
        if first < self.spso or last >= self.speo:
            raise ShareError(
                ErrorCode.INVALID_RECORD_STATE,
                f"offsets {first}-{last} are not all in flight (SPSO {self.spso}, SPEO "
                f"{self.speo}): only records the proxy has read and not finished with can change",
            )
        allowed = ACTION_SOURCES[action]
        for r in self._inflight.overlapping(first, last):
            if r.state not in allowed:
                names = " or ".join(sorted(s.name.capitalize() for s in allowed))
                raise ShareError(
                    ErrorCode.INVALID_RECORD_STATE,
                    f"offsets {max(r.first, first)}-{min(r.last, last)} are "
                    f"{r.state.name.capitalize()}: {action.value} needs {names} records; "
                    "nothing was changed",
                )
        start, stop = self._inflight.span(first, last)
        for r in self._inflight.ranges[start:stop]:
            if action == RecordAction.RELEASE:
                self._end_lock(r, now_ms)
                continue
            if action == RecordAction.DELIVER:
                # its time (or back-off) is now; a record never delivered keeps a time, so that
                # its own delivery time, read again from the log, does not hold it back again
                r.available_at_ms = DUE_NOW if r.delivery_count == 0 else 0
                self._wait_until(DUE_NOW, r.first)  # found by the next acquisition
                continue
            if action == RecordAction.ACCEPT:
                r.state = RecordState.ACKNOWLEDGED
            else:
                r.state = archived_state(self.limits.dead_letter)
                self.dead_letter_pending |= r.state == RecordState.ARCHIVING
                self.archived_log.append(
                    ArchivedRun(r.first, r.last, r.delivery_count, ArchiveReason.OPERATOR)
                )
            r.member_id = None
            r.deadline_ms = None
        self._dirty.append((first, last))
        self._advance_spso()
        self._deferred = self._count_deferred()
        return self._take_delta()
