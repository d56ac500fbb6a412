"""Record batches read from upstream for one share-partition, kept until SPSO passes them, so
consumers sharing a partition do not read the same bytes from the cluster again."""

from __future__ import annotations

from bisect import bisect_right

from shareproxy.broker.upstream import PartitionData
from shareproxy.core.share_partition import BatchHeader
from shareproxy.protocol.record_batch import BatchInfo, scan_batches


class CachedBatch:
    __slots__ = ("data", "header", "info")

    def __init__(self, info: BatchInfo, data: memoryview, header: BatchHeader) -> None:
        self.info = info
        self.data = data
        self.header = header


class LogCache:
    def __init__(self) -> None:
        self.batches: list[CachedBatch] = []
        self.high_watermark = 0
        self.last_stable_offset = -1
        self.log_start_offset = 0

    @property
    def end_offset(self) -> int:
        """One past the last cached offset (0 when empty)."""
        return self.batches[-1].info.last_offset + 1 if self.batches else 0

    def covers(self, offset: int) -> bool:
        i = bisect_right(self.batches, offset, key=lambda b: b.info.base_offset) - 1
        return 0 <= i < len(self.batches) and self.batches[i].info.last_offset >= offset

    def add(self, data: PartitionData, isolation_level: int) -> bool:
        """Take a fetch's batches in; True if any batch was new."""
        if data.error_code != 0:
            return False
        self.high_watermark = data.high_watermark
        self.last_stable_offset = data.last_stable_offset
        if data.log_start_offset >= 0:
            self.log_start_offset = data.log_start_offset
        infos = scan_batches(data.records)
        aborted = _aborted_batches(infos, data.aborted) if isolation_level == 1 else set()
        known = {b.info.base_offset for b in self.batches}
        raw = memoryview(data.records)  # batches are views into the fetched bytes: no copies
        fresh = []
        for info in infos:
            if info.base_offset in known:
                continue
            header = BatchHeader(
                info.base_offset,
                info.last_offset,
                is_control=info.is_control,
                is_aborted=info.base_offset in aborted,
            )
            fresh.append(CachedBatch(info, raw[info.start : info.end], header))
        if fresh:
            self.batches.extend(fresh)
            self.batches.sort(key=lambda b: b.info.base_offset)
        return bool(fresh)

    def from_offset(self, offset: int, max_bytes: int) -> list[CachedBatch]:
        """Contiguous cached batches from the one holding ``offset``, within ``max_bytes``
        (at least one batch, so a large batch is never stuck)."""
        i = bisect_right(self.batches, offset, key=lambda b: b.info.base_offset) - 1
        i = max(i, 0)
        while i < len(self.batches) and self.batches[i].info.last_offset < offset:
            i += 1
        out: list[CachedBatch] = []
        size = 0
        for b in self.batches[i:]:
            if out and (size + len(b.data) > max_bytes):
                break
            out.append(b)
            size += len(b.data)
        return out

    def trim(self, below: int) -> None:
        k = 0
        while k < len(self.batches) and self.batches[k].info.last_offset < below:
            k += 1
        if k:
            del self.batches[:k]


def _aborted_batches(infos: list[BatchInfo], aborted: list[tuple[int, int]]) -> set[int]:
    """Base offsets of transactional batches belonging to aborted transactions (the consumer's
    rule: from the transaction's first offset up to that producer's next control batch)."""
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
