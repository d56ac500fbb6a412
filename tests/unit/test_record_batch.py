"""Record-batch header peeks and read_committed from the log's own transaction markers."""

from __future__ import annotations

from shareproxy.core.inflight import AcquiredRange
from shareproxy.core.record_views import RecordViews
from shareproxy.protocol.record_batch import (
    ABORT_MARKER,
    COMMIT_MARKER,
    control_marker,
    scan_batches,
)
from shareproxy.runtime.consuming.cache_budget import CacheBudget
from shareproxy.runtime.consuming.log_cache import LogCache, records_holding
from shareproxy.upstream.client import PartitionData
from tests.support.record_batches import batch


def data(*batches: bytes) -> PartitionData:
    raw = b"".join(batches)
    return PartitionData(0, 100, -1, 0, raw)


def test_headers_and_markers_are_read_without_decoding_records():
    raw = batch(0, 3) + batch(3, 2, pid=7, txn=True) + batch(5, 1, pid=7, txn=True, marker=1)
    infos = scan_batches(raw + raw[:20])  # a partial trailing batch is left out
    assert [(i.base_offset, i.last_offset) for i in infos] == [(0, 2), (3, 4), (5, 5)]
    assert [i.is_transactional for i in infos] == [False, True, True]
    assert infos[2].is_control and infos[2].producer_id == 7
    assert control_marker(raw, infos[2]) == COMMIT_MARKER


def test_read_committed_from_markers_commit_abort_and_open():
    cache = LogCache(isolation_level=1, budget=CacheBudget(None))
    cache.add(
        data(
            batch(0, 2, pid=1, txn=True),
            batch(2, 1, pid=1, txn=True, marker=COMMIT_MARKER),
            batch(3, 3, pid=2, txn=True),
            batch(6, 1, pid=2, txn=True, marker=ABORT_MARKER),
            batch(7, 2),  # not transactional
            batch(9, 2, pid=3, txn=True),  # still open
            batch(11, 1),
        )
    )
    got = cache.from_offset(0, 10**9)
    assert [(b.header.base_offset, b.header.is_aborted, b.header.is_control) for b in got] == [
        (0, False, False),
        (2, False, True),
        (3, True, False),
        (6, False, True),
        (7, False, False),
    ]
    assert cache.waiting_on_transaction(9)
    # the marker arrives in a later fetch: the open transaction is decided, delivery goes on
    cache.add(data(batch(12, 1, pid=3, txn=True, marker=COMMIT_MARKER)))
    assert not cache.waiting_on_transaction(9)
    assert [b.header.base_offset for b in cache.from_offset(9, 10**9)] == [9, 11, 12]


def test_read_uncommitted_ignores_transactions():
    cache = LogCache(isolation_level=0, budget=CacheBudget(None))
    cache.add(data(batch(0, 2, pid=2, txn=True), batch(2, 1, pid=2, txn=True, marker=0)))
    assert [b.header.is_aborted for b in cache.from_offset(0, 10**9)] == [False, False]


def test_a_fetch_below_the_cached_range_rebuilds_it():
    cache = LogCache(budget=CacheBudget(None))
    cache.add(data(batch(10, 5)))
    cache.add(data(batch(0, 5), batch(5, 5), batch(10, 5)))
    assert [b.header.base_offset for b in cache.from_offset(0, 10**9)] == [0, 5, 10]


def test_an_answer_that_does_not_join_the_cached_stretch_replaces_it():
    cache = LogCache(budget=CacheBudget(None))
    cache.add(data(batch(0, 5)), fetch_offset=0)
    # a read-ahead asked from 15 before the cache was rebuilt lower: joined on, it would leave
    # 5-14 looking absent from the log
    cache.add(data(batch(15, 5)), fetch_offset=15)
    assert [b.header.base_offset for b in cache.from_offset(15, 10**9)] == [15]
    assert cache.from_offset(5, 10**9) == [] and not cache.covers(5)  # 5-14: to be read
    cache.add(data(batch(5, 5), batch(10, 5)), fetch_offset=7)
    assert [b.header.base_offset for b in cache.from_offset(7, 10**9)] == [5, 10]
    # an answer that joins on keeps what is cached
    cache.add(data(batch(10, 5), batch(15, 5)), fetch_offset=12)
    assert [b.header.base_offset for b in cache.from_offset(5, 10**9)] == [5, 10, 15]


def test_offsets_no_batch_holds_are_known_from_where_the_fetch_asked():
    cache = LogCache(budget=CacheBudget(None))
    cache.add(data(batch(10, 5)), fetch_offset=4)  # 4-9 hold no batch (compacted away)
    assert [b.header.base_offset for b in cache.from_offset(4, 10**9)] == [10]


def test_the_timestamp_from_an_offset_is_its_batchs_first_or_the_append_time():
    cache = LogCache(budget=CacheBudget(None))
    cache.add(
        data(
            batch(0, 5, timestamps=(1_000, 1_400)),
            batch(5, 5, timestamps=(2_000, 2_400), log_append_time=True),
        ),
        fetch_offset=0,
    )
    assert [cache.timestamp_from(o) for o in (0, 3, 5, 9)] == [1_000, 1_000, 2_400, 2_400]
    assert cache.timestamp_from(10) is None  # not read yet
    cache.trim(5)
    cache.add(data(batch(20, 1, timestamps=(3_000, 3_000))), fetch_offset=20)
    assert cache.timestamp_from(3) is None  # the cached stretch begins past it
    assert cache.timestamp_from(20) == 3_000


def test_batches_handed_out_together_are_views_of_the_fetched_bytes_never_joined():
    cache = LogCache(budget=CacheBudget(None))
    first = data(batch(0, 5), batch(5, 5))
    cache.add(first)
    second = data(batch(10, 5))
    cache.add(second)
    batches = cache.from_offset(0, 10**9)
    side_by_side = records_holding(batches, [AcquiredRange(0, 9, 1)])
    assert isinstance(side_by_side, memoryview) and side_by_side.obj is first.records
    assert bytes(side_by_side) == bytes(first.records)
    apart = records_holding(batches, [AcquiredRange(3, 12, 1)])
    assert isinstance(apart, RecordViews)
    assert [v.obj is r for v, r in zip(apart, [first.records, second.records], strict=True)] == [
        True,
        True,
    ]  # not copied
    assert bytes(apart) == bytes(first.records) + bytes(second.records)
    assert len(apart) == len(bytes(apart))
    only_the_last = records_holding(batches, [AcquiredRange(12, 12, 1)])
    assert bytes(only_the_last) == bytes(second.records)
