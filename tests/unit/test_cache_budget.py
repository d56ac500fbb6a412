"""The node-wide bound on the log caches: what counts is each upstream frame a cache holds a view
into, once and whole, until the last view goes; past the bound no read-ahead starts."""

from __future__ import annotations

import gc

from shareproxy.runtime.consuming.cache_budget import (
    MIN_READ_BYTES,
    CacheBudget,
    worth_keeping,
)
from shareproxy.runtime.consuming.log_cache import LogCache
from shareproxy.runtime.consuming.upstream_feed import _read_ahead_offset
from shareproxy.upstream.client import PartitionData
from tests.support.budgeted import budgeted_leader
from tests.support.record_batches import batch

HEADER = b"h" * 100  # the rest of a Fetch response frame around the records


def fetched(*parts: bytes) -> tuple[bytes, list[PartitionData]]:
    """One response frame holding each partition's records, and their data as views into it
    (as the upstream client reads a Fetch)."""
    frame = HEADER + b"".join(parts)
    view = memoryview(frame)
    out, at = [], len(HEADER)
    for part in parts:
        out.append(PartitionData(0, 1_000, -1, 0, view[at : at + len(part)]))
        at += len(part)
    return frame, out


def test_a_frame_counts_once_and_whole_until_its_last_view_goes():
    budget = CacheBudget(1 << 20)
    frame, (d,) = fetched(batch(0, 2) + batch(2, 2))
    one, two = LogCache(budget=budget), LogCache(budget=budget)  # two groups, one partition
    assert one.add(d) and two.add(d)
    assert (budget.held, budget.frames) == (len(frame), 1)
    one.trim(2)  # one of its batches left
    one.trim(4)
    assert not one.batches and budget.held == len(frame)  # the other group still holds it
    two.trim(4)
    assert (budget.held, budget.frames) == (0, 0)


def test_partitions_of_one_fetch_share_their_frame():
    budget = CacheBudget(1 << 20)
    frame, (a, b) = fetched(batch(0, 3), batch(0, 3))
    first, second = LogCache(budget=budget), LogCache(budget=budget)
    first.add(a)
    second.add(b)
    assert budget.held == len(frame)
    first.clear()
    assert budget.held == len(frame)  # a lagging partition keeps the whole frame
    second.add(fetched(batch(3, 1))[1][0])  # a later read joins on
    assert budget.frames == 2
    second.trim(4)
    assert (budget.held, budget.frames) == (0, 0)


def test_a_replaced_or_dropped_cache_releases_its_frames():
    budget = CacheBudget(1 << 20)
    cache = LogCache(budget=budget)
    cache.add(fetched(batch(0, 2))[1][0])
    later, (d,) = fetched(batch(10, 2))
    cache.add(d)  # does not join on: the cache starts over from it
    assert (budget.held, budget.frames) == (len(later), 1)
    del cache
    gc.collect()
    assert (budget.held, budget.frames) == (0, 0)


def test_a_small_slice_of_a_large_frame_is_copied_out():
    small, big = batch(0, 1), batch(0, 200)
    _, (a, b) = fetched(small, big)
    kept = worth_keeping(a.records)
    assert isinstance(kept, bytes) and kept == small
    assert worth_keeping(b.records) is b.records  # most of the frame: kept as a view, no copy


def test_reads_shrink_as_the_bound_fills_and_read_ahead_stops_at_it():
    budget = CacheBudget(10 << 20)
    assert budget.read_size(8 << 20) == 8 << 20
    assert budget.read_size(8 << 20, partitions=4) == (10 << 20) // 4
    budget.reserved = 9 << 20  # reads under way count too
    assert budget.read_size(8 << 20) == 1 << 20
    budget.reserved = 0
    leader = budgeted_leader(budget)
    _, (d,) = fetched(batch(0, 5))
    leader.took_in(d)
    assert _read_ahead_offset(leader, budget) == 5  # low on records, under the bound
    budget.hold(id(object()), 10 << 20)  # other caches fill the bound
    assert not budget.may_read_ahead()
    assert _read_ahead_offset(leader, budget) is None
    assert budget.read_size(8 << 20, partitions=100) == MIN_READ_BYTES  # a request still reads
    assert CacheBudget(None).read_size(8 << 20) == 8 << 20
