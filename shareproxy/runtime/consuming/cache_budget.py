"""The node-wide bound on what the log caches hold, and how large a new upstream read may be.

A cached batch is a view into the upstream Fetch frame it came in, so it keeps the whole frame
alive: what counts against the bound is every distinct frame some cache holds a view into, by
its full size, not the batches' lengths. Each frame is counted once however many caches (share
groups reading one partition, the partitions of one multi-partition fetch) hold views into it,
and released when the last of their batches is trimmed or cleared away."""

from __future__ import annotations

import weakref
from collections.abc import Iterable

# the least a read asks per partition once the bound is reached: a request's own read is never
# refused, so nothing starves (the broker still returns a first batch larger than this whole)
MIN_READ_BYTES = 64 * 1024
# the reads a node's requests may have under way at once while the caches are past the bound: a
# request's own read is never refused, but a thousand consumers each reading a batch together
# would hold a thousand batches beyond the bound; in turns, what is read is handed out and
# acknowledged as the next reads arrive
OVER_BOUND_READS = 4
# a partition's records are copied out of a frame more than this many times their size, so one
# lagging partition does not keep the rest of a multi-partition fetch alive
COPY_OUT_RATIO = 4


class CacheBudget:
    """The bytes of the frames the caches hold, against ``limit`` (None: unbounded), and the
    bytes of the reads under way (reserved, so reads started together do not overshoot)."""

    def __init__(self, limit: int | None) -> None:
        self.limit = limit
        self.held = 0
        self.reserved = 0
        self._frames: dict[int, list[int]] = {}  # id(frame) -> [caches holding it, its size]

    def hold(self, key: int, size: int) -> None:
        """One more cache holds frame ``key`` (its id, valid while a view into it lives)."""
        entry = self._frames.get(key)
        if entry is None:
            self._frames[key] = [1, size]
            self.held += size
        else:
            entry[0] += 1

    def release(self, key: int) -> None:
        """A cache let go of its last view into frame ``key``."""
        entry = self._frames[key]
        entry[0] -= 1
        if not entry[0]:
            del self._frames[key]
            self.held -= entry[1]

    @property
    def frames(self) -> int:
        return len(self._frames)

    def may_read_ahead(self) -> bool:
        """Whether a background read may start: only while under the bound."""
        return not self.is_over()

    def is_over(self) -> bool:
        """Whether what is held and reserved has reached the bound."""
        return self.limit is not None and self.held + self.reserved >= self.limit

    def response_bytes(self, most: int) -> int:
        """Bytes one read's whole answer may bring (its MaxBytes): ``most`` while the bound is
        far, the room left as it fills, never under MIN_READ_BYTES. A long poll of a thousand
        idle partitions that all get records at once then stays within the bound too."""
        if self.limit is None:
            return most
        return max(MIN_READ_BYTES, min(most, self.limit - self.held - self.reserved))

    def read_size(self, most: int, partitions: int = 1) -> int:
        """Bytes one read may ask per partition: ``most`` while the bound is far, shrinking to
        the room left (shared by ``partitions``) as it fills, never under MIN_READ_BYTES."""
        if self.limit is None:
            return most
        room = (self.limit - self.held - self.reserved) // max(partitions, 1)
        return max(MIN_READ_BYTES, min(most, room))


class FrameRefs:
    """One cache's frames, each with the number of its batches holding a view into it, so the
    budget hears when the last one goes. Released whole when its cache is collected."""

    __slots__ = ("budget", "counts")

    def __init__(self, budget: CacheBudget, owner: object) -> None:
        self.budget = budget
        self.counts: dict[int, int] = {}  # id(frame) -> batches of this cache in it
        weakref.finalize(owner, self.clear)  # a dropped cache's frames are released too

    def add(self, frame: object, size: int, batches: int) -> None:
        key = id(frame)
        n = self.counts.get(key)
        if n is None:
            self.budget.hold(key, size)
            self.counts[key] = batches
        else:
            self.counts[key] = n + batches

    def drop(self, frames: Iterable[object]) -> None:
        """Batches whose frames are ``frames`` (one entry per batch) are no longer cached."""
        counts = self.counts
        for frame in frames:
            key = id(frame)
            n = counts[key] - 1
            if n:
                counts[key] = n
            else:
                del counts[key]
                self.budget.release(key)

    def clear(self) -> None:
        for key in self.counts:
            self.budget.release(key)
        self.counts.clear()


def frame_of(records: bytes | memoryview) -> tuple[object, int]:
    """The object ``records`` keeps alive and its size in bytes."""
    if isinstance(records, memoryview):
        frame = records.obj
        return frame, memoryview(frame).nbytes
    return records, len(records)


def worth_keeping(records: bytes | memoryview) -> bytes | memoryview:
    """``records`` as a cache should keep them: a small slice of a much larger frame is copied
    out (cheap: it is small), else the view is kept and nothing is copied."""
    if isinstance(records, memoryview) and records.nbytes:
        _, size = frame_of(records)
        if size > COPY_OUT_RATIO * records.nbytes:
            return bytes(records)
    return records
