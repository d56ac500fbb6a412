"""Record batches read from upstream for one share-partition, kept until SPSO passes them, so
consumers sharing a partition do not read the same bytes from the cluster again."""

from __future__ import annotations

import dataclasses
from bisect import bisect_right
from collections.abc import Callable, Sequence
from operator import attrgetter
from typing import Protocol

from shareproxy.core.acquisition import BatchHeader
from shareproxy.core.errors import ErrorCode
from shareproxy.core.inflight import AcquiredRange
from shareproxy.core.record_views import RecordViews
from shareproxy.protocol.record_batch import (
    ABORT_MARKER,
    BatchInfo,
    control_marker,
    first_timestamp,
    scan_batches,
)
from shareproxy.protocol.record_keys import batch_key_hashes
from shareproxy.protocol.record_schedule import batch_deliver_at
from shareproxy.runtime.consuming.cache_budget import CacheBudget, FrameRefs, frame_of
from shareproxy.upstream.client import PartitionData


class CachedBatch:
    """One upstream batch: a view into the fetched bytes (``raw``, at ``info.start``) so that
    neighbours read together can be handed on as one view, without copying."""

    __slots__ = ("data", "decided", "header", "info", "raw", "size_to")

    def __init__(
        self, info: BatchInfo, raw: memoryview, header: BatchHeader, size_to: int = 0
    ) -> None:
        self.info = info
        self.raw = raw
        self.data = raw[info.start : info.end]
        self.header = header
        self.decided = True  # False: transactional, its producer's marker not read yet
        # the bytes ever cached up to the end of this batch: what is cached past an offset is
        # a difference of two of these, not a sum over the batches
        self.size_to = size_to


class CachedLog(Protocol):
    """What others read of a leader's log cache (where to read upstream next, how far it is
    read ahead); only its leader changes it."""

    @property
    def batches(self) -> Sequence[CachedBatch]: ...
    @property
    def end_offset(self) -> int: ...
    @property
    def high_watermark(self) -> int: ...
    @property
    def log_start_offset(self) -> int: ...
    @property
    def answered(self) -> bool: ...
    @property
    def keyed(self) -> bool: ...
    def covers(self, offset: int) -> bool: ...
    def bytes_from(self, offset: int) -> int: ...
    def waiting_on_transaction(self, offset: int) -> bool: ...
    def timestamp_from(self, offset: int) -> int | None: ...


class LogCache:
    """Batches in offset order. Under read_committed a transactional batch is delivered only
    once its producer's marker is in the log: COMMIT delivers it, ABORT archives it, and until
    then it (and everything after it) waits, as the last stable offset would. The markers are
    read from the log itself, so this holds on brokers that do not report aborted
    transactions, and the broker's list is honoured where it does."""

    def __init__(
        self,
        isolation_level: int = 0,
        keyed: bool = False,
        *,
        budget: CacheBudget,
        timed: bool = False,
        on_not_a_time: Callable[[int], None] | None = None,
    ) -> None:
        self.isolation_level = isolation_level
        self.keyed = keyed  # read each record's key (key-ordered delivery)
        # read each record's x-deliver-at header (scheduled delivery); told of each offset
        # whose header is not a time
        self.timed = timed
        self.on_not_a_time = on_not_a_time
        # the first offset whose time may still be wanted: batches wholly below it (read again
        # for records whose time is judged) are not parsed for it
        self.times_from = 0
        self.batches: list[CachedBatch] = []
        self.high_watermark = 0
        self.answered = False  # upstream has told where the log ends (an empty log ends at 0)
        self.last_stable_offset = -1
        self.log_start_offset = 0
        # where the cached stretch of the log begins (meaningful while batches are cached): the
        # batches hold every record from here to end_offset, with no hole another read left
        self.start_offset = 0
        self._open: dict[int, list[CachedBatch]] = {}  # producer id -> undecided batches
        self._size = 0  # bytes ever cached (CachedBatch.size_to)
        # the frames the batches are views into, counted against the node's bound
        self._frames = FrameRefs(budget, self)

    def heard_end(self, high_watermark: int) -> None:
        """A later log end than any read told, from a probe while nobody reads: lag grows."""
        self.high_watermark = max(self.high_watermark, high_watermark)

    @property
    def end_offset(self) -> int:
        """One past the last cached offset (0 when empty)."""
        return self.batches[-1].info.last_offset + 1 if self.batches else 0

    def bytes_from(self, offset: int) -> int:
        """Cached bytes at and after ``offset``: how much is read ahead."""
        i = self._index(offset)
        if i >= len(self.batches):
            return 0
        b = self.batches[i]
        return self._size - (b.size_to - len(b.data))

    def _index(self, offset: int) -> int:
        """Index of the first batch with records at or past ``offset`` (len: none)."""
        batches = self.batches
        i = bisect_right(batches, offset, key=_base) - 1
        if i < 0:
            return 0
        return i if batches[i].info.last_offset >= offset else i + 1

    def covers(self, offset: int) -> bool:
        i = bisect_right(self.batches, offset, key=_base) - 1
        return 0 <= i < len(self.batches) and self.batches[i].info.last_offset >= offset

    def add(
        self,
        data: PartitionData,
        fetch_offset: int | None = None,
        isolation_level: int | None = None,
    ) -> bool:
        """Take in the batches of a fetch from ``fetch_offset`` (by default where its first batch
        starts); True if any batch was new.

        The cache is one stretch of the log, never with a hole: reads overlap and their answers
        may be taken in late and out of order (a tail poll or read-ahead asked before SPSO moved
        or the cache was rebuilt lower), so a fetch that does not join on to the cached stretch,
        from below it or from past its end, replaces it. Appended past a hole, its batches would
        make the records in the hole look absent from the log: archived unread past SPEO, never
        handed out again when Available."""
        if isolation_level is not None:
            self.isolation_level = isolation_level
        if data.error_code != ErrorCode.NONE:
            return False
        self.high_watermark = data.high_watermark
        self.answered = True
        self.last_stable_offset = data.last_stable_offset
        if data.log_start_offset >= 0:
            self.log_start_offset = data.log_start_offset
        raw = memoryview(data.records)  # batches are views into the fetched bytes: no copies
        infos = scan_batches(raw)
        reported = _aborted_batches(infos, data.aborted) if self.isolation_level == 1 else set()
        if not infos:
            return False
        start = infos[0].base_offset
        if fetch_offset is not None:
            start = min(start, fetch_offset)  # none of the log between them holds a batch
        if self.batches and not self.start_offset <= start <= self.end_offset:
            # records below the cached stretch are wanted again (a release), or this answer is
            # of a later stretch: start over from it, keeping the log order that transaction
            # tracking relies on
            self._frames.clear()
            self.batches.clear()
            self._open.clear()
        if not self.batches:
            self.start_offset = start
        end = self.end_offset
        fresh = []
        for info in infos:
            if info.last_offset < end:
                continue  # already cached (fetches overlap at the batch holding their offset)
            deliver_at = None
            if self.timed and not info.is_control and info.last_offset >= self.times_from:
                deliver_at, invalid = batch_deliver_at(
                    raw[info.start : info.end], info.base_offset, info.last_offset
                )
                if invalid and self.on_not_a_time is not None:
                    for offset in invalid:
                        self.on_not_a_time(offset)
            header = BatchHeader(
                info.base_offset,
                info.last_offset,
                is_control=info.is_control,
                is_aborted=info.base_offset in reported,
                key_hashes=(
                    batch_key_hashes(raw[info.start : info.end], info.base_offset, info.last_offset)
                    if self.keyed and not info.is_control
                    else None
                ),
                max_timestamp=info.max_timestamp,
                deliver_at=deliver_at,
            )
            self._size += info.end - info.start
            batch = CachedBatch(info, raw, header, self._size)
            if self.isolation_level == 1 and info.is_transactional:
                self._track_transaction(batch, raw)
            fresh.append(batch)
            end = info.last_offset + 1
        if fresh:
            self._frames.add(*frame_of(data.records), len(fresh))
            self.batches.extend(fresh)
        return bool(fresh)

    def _track_transaction(self, batch: CachedBatch, raw: memoryview) -> None:
        pid = batch.info.producer_id
        if not batch.info.is_control:
            batch.decided = False
            self._open.setdefault(pid, []).append(batch)
            return
        aborted = control_marker(raw, batch.info) == ABORT_MARKER
        for b in self._open.pop(pid, []):
            b.decided = True
            if aborted:
                b.header = dataclasses.replace(b.header, is_aborted=True)

    def from_offset(self, offset: int, max_bytes: int) -> list[CachedBatch]:
        """Contiguous cached batches from the one holding ``offset``, within ``max_bytes``
        (at least one batch, so a large batch is never stuck), stopping before a transaction
        whose outcome is not in the log yet; none when the cached stretch begins past
        ``offset`` (what the log holds there is not known here: it must be read)."""
        if offset < self.start_offset:
            return []
        batches = self.batches
        i = self._index(offset)
        n = len(batches)
        if i >= n:
            return []
        # bytes up to a batch's end are a difference of size_to: bisect for the last that fits
        stop = i + 1
        if max_bytes > len(batches[i].data):
            limit = batches[i].size_to - len(batches[i].data) + max_bytes
            stop = max(stop, bisect_right(batches, limit, lo=i, key=_size_to))
        for j in range(i, stop):
            if not batches[j].decided:
                return batches[i:j]
        return batches[i:stop]

    def timestamp_from(self, offset: int) -> int | None:
        """The timestamp (ms) of the first cached batch holding records at or past ``offset``:
        how old the oldest of them is, at most. None when the cache does not hold that stretch
        (not read yet, or dropped to stay under the bound)."""
        if offset < self.start_offset:
            return None
        i = self._index(offset)
        return first_timestamp(self.batches[i].data) if i < len(self.batches) else None

    def waiting_on_transaction(self, offset: int) -> bool:
        """True when the next batch to deliver belongs to a transaction still open."""
        batches = self.from_offset(offset, 1)
        if batches:
            return False
        i = max(bisect_right(self.batches, offset, key=_base) - 1, 0)
        return any(not b.decided for b in self.batches[i : i + 1])

    def trim(self, below: int) -> None:
        """Drop the batches wholly below ``below``; the cached stretch begins where the first
        kept batch does (an offset below it is read again before it is delivered)."""
        k = self._index(below)
        if k:
            self._frames.drop([b.raw.obj for b in self.batches[:k]])
            del self.batches[:k]
            if self.batches:
                self.start_offset = self.batches[0].info.base_offset

    def clear(self) -> None:
        """Drop every cached batch (the cache is being replaced), releasing their frames."""
        self._frames.clear()
        self.batches.clear()
        self._open.clear()


# bisect keys; attrgetter runs in C, where a Python key function is a frame per probe
_base = attrgetter("info.base_offset")
_size_to = attrgetter("size_to")


def records_holding(
    batches: list[CachedBatch], acquired: Sequence[AcquiredRange]
) -> memoryview | RecordViews:
    """The whole batches (of ``batches``, in log order) holding any acquired offset, each once:
    one view of the fetched bytes when they lie side by side there, else a view per stretch
    that does (no copy either way)."""
    views: list[memoryview] = []
    raw: memoryview | None = None
    start = end = 0
    k, n = 0, len(acquired)
    for b in batches:
        info = b.info
        while k < n and acquired[k].last_offset < info.base_offset:
            k += 1
        if k == n:
            break
        if acquired[k].first_offset > info.last_offset:
            continue
        if b.raw is raw and info.start == end:
            end = info.end
            continue
        if raw is not None:
            views.append(raw[start:end])
        raw, start, end = b.raw, info.start, info.end
    if raw is None:
        return memoryview(b"")
    if not views:
        return raw[start:end]
    views.append(raw[start:end])
    return RecordViews(views)


def _aborted_batches(infos: list[BatchInfo], aborted: list[tuple[int, int]]) -> set[int]:
    """Base offsets of transactional batches the broker reports aborted (the consumer's rule:
    from the transaction's first offset up to that producer's next control batch)."""
    if not aborted:
        return set()
    starts = sorted(aborted, key=lambda a: a[1])
    open_aborts: set[int] = set()
    out: set[int] = set()
    j = 0
    for info in infos:
        while j < len(starts) and starts[j][1] <= info.base_offset:
            open_aborts.add(starts[j][0])
            j += 1
        if info.is_control:
            open_aborts.discard(info.producer_id)
        elif info.is_transactional and info.producer_id in open_aborts:
            out.add(info.base_offset)
    return out
