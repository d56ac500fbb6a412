"""Scheduled delivery (beyond KIP-932), on a virtual clock: a record that names its delivery
time in an ``x-deliver-at`` header, or whose group delays every record (a delay queue), is
acquired by no member before that time; the records after it flow meanwhile, SPSO waits at
it, and the in-flight cap counts only what is acquired."""

from __future__ import annotations

import pytest
from aiokafka.record.default_records import DefaultRecordBatchBuilder

from shareproxy.core import group_config as gc
from shareproxy.core.acknowledgement import AckBatch
from shareproxy.core.acquisition import BatchHeader, PartitionLimits
from shareproxy.core.group_settings import GroupSettings
from shareproxy.core.inflight import AcquiredRange
from shareproxy.core.key_order import key_hash
from shareproxy.core.persisted import PersistedBatch, PersistedState
from shareproxy.core.record_actions import RecordAction
from shareproxy.core.schedule import (
    DUE_NOW,
    NO_TIME,
    DeliverySchedule,
    Scheduled,
    parse_deliver_at,
)
from shareproxy.core.share_partition import SharePartition
from shareproxy.core.states import AcknowledgeType
from shareproxy.protocol.record_schedule import batch_deliver_at, may_name_times
from tests.support.kip_tables import ACK, ACQ, AV, inflight

T = 1_700_000_000_000  # when the records were produced (their batch's timestamp)
ACCEPT = (int(AcknowledgeType.ACCEPT),)
HEADERS = DeliverySchedule(headers=True)


def timed(base: int, last: int, times: dict[int, int], timestamp: int = T) -> BatchHeader:
    """A batch whose records at the given offsets name their delivery time."""
    deliver_at = tuple(times.get(o, NO_TIME) for o in range(base, last + 1))
    return BatchHeader(base, last, max_timestamp=timestamp, deliver_at=deliver_at)


def scheduled(schedule: DeliverySchedule = HEADERS, **limits: int) -> SharePartition:
    return SharePartition(0, PartitionLimits(schedule=schedule, **limits))


def test_a_header_value_is_a_time_only_as_ascii_digits():
    assert parse_deliver_at(b"1700000005000") == 1_700_000_005_000
    for bad in (b"", None, b"-5", b"+5", b"1.5e12", b" 17", b"\xd9\xa1", b"9" * 19, b"soon"):
        assert parse_deliver_at(bad) is None


def test_the_due_time_is_the_later_of_the_delay_and_the_header_and_never_past_the_bound():
    s = DeliverySchedule(delay_ms=1_000, max_delay_ms=60_000, headers=True)
    assert s.due_ms(T) == T + 1_000  # the delay queue
    assert s.due_ms(T, T + 5_000) == T + 5_000  # its own time, when later, wins
    assert s.due_ms(T, T + 500) == T + 1_000
    assert s.due_ms(T, T + 3_600_000) == T + 60_000  # cut to the bound, counted from T
    assert s.beyond_bound(T, T + 3_600_000) and not s.beyond_bound(T, T + 60_000)
    ignored = DeliverySchedule()  # the header is read only when the group asks for it
    assert list(ignored.runs(0, 1, 0, T, (T + 5_000, NO_TIME))) == [(0, 1, 0, False)]
    assert DeliverySchedule(delay_ms=120_000, max_delay_ms=60_000).beyond_bound(T)
    assert not DeliverySchedule().active and HEADERS.active


def test_a_record_is_not_acquired_before_its_time_and_the_others_flow_meanwhile():
    sp = scheduled()
    log = [timed(0, 4, {2: T + 5_000})]
    assert sp.acquire("m", log, T, 10) == [AcquiredRange(0, 1, 1), AcquiredRange(3, 4, 1)]
    assert inflight(sp) == [(0, 1, ACQ, 1, "m"), (2, 2, AV, 0, None), (3, 4, ACQ, 1, "m")]
    assert sp.acquire("n", log, T + 4_999, 10) == []  # never early, for any member
    sp.acknowledge("m", [AckBatch(0, 1, ACCEPT), AckBatch(3, 4, ACCEPT)], T + 100)
    assert sp.spso == 2 and sp.speo == 5  # SPSO waits at the first record not yet done
    assert sp.next_due(T + 100) == T + 5_000
    assert sp.backoff_ended(T + 4_950, T + 5_000)  # the runtime wakes waiting fetches then
    assert sp.acquire("n", log, T + 5_000, 10) == [AcquiredRange(2, 2, 1)]
    assert sp.lateness == [(1, 0)]
    sp.acknowledge("n", [AckBatch(2, 2, ACCEPT)], T + 5_010)
    assert sp.spso == 5 and inflight(sp) == []


def test_a_delay_queue_holds_every_record_for_the_delay_without_reading_one():
    sp = scheduled(DeliverySchedule(delay_ms=30_000))
    log = [BatchHeader(0, 99, max_timestamp=T), BatchHeader(100, 199, max_timestamp=T + 10_000)]
    assert sp.acquire("m", log, T + 29_999, 500) == []
    assert inflight(sp) == [(0, 199, AV, 0, None)]
    assert sp.acquire("m", log, T + 30_250, 500) == [AcquiredRange(0, 99, 1)]
    assert sp.lateness == [(100, 250)]
    assert sp.acquire("m", log, T + 40_000, 500) == [AcquiredRange(100, 199, 1)]


def test_the_in_flight_cap_counts_acquired_records_only():
    sp = scheduled(max_record_locks=100)
    waiting = timed(0, 299, {o: T + 60_000 for o in range(300)})
    assert sp.acquire("m", [waiting, timed(300, 449, {})], T, 500) == [AcquiredRange(300, 399, 1)]
    assert sp.in_flight_count == 100 and sp.deferred_count == 300
    assert sp.speo == 400  # the 100 acquired hold the cap, not the 300 waiting
    assert not sp.acquire("n", [timed(300, 449, {})], T, 500)  # full


def test_the_next_fetch_starts_past_records_still_waiting():
    sp = scheduled()
    sp.acquire("m", [timed(0, 9, {o: T + 1_000 for o in range(5)})], T, 100)
    assert sp.next_fetch_offset(T) == 10  # SPEO: nothing before it can be taken now
    assert sp.next_fetch_offset(T + 1_000) == 0


def test_a_time_beyond_the_bound_is_delivered_at_the_bound_and_reported():
    sp = scheduled(DeliverySchedule(max_delay_ms=60_000, headers=True))
    log = [timed(0, 2, {0: T + 7 * 86_400_000, 1: T + 60_000})]
    assert sp.acquire("m", log, T + 59_999, 10) == [AcquiredRange(2, 2, 1)]
    # what the owner reports: offset 0 cut to the bound, offset 1 due at it by its own time
    assert sp.scheduled == [Scheduled(1, T, T + 60_000, True), Scheduled(1, T, T + 60_000, False)]
    assert sp.acquire("m", log, T + 60_000, 10) == [AcquiredRange(0, 1, 1)]


def test_records_read_in_already_due_are_reported_only_when_cut():
    sp = scheduled(DeliverySchedule(max_delay_ms=60_000, headers=True))
    log = [timed(0, 2, {0: T + 3_600_000, 1: T + 1_000})]
    assert sp.acquire("m", log, T + 120_000, 10) == [AcquiredRange(0, 2, 1)]
    assert sp.scheduled == [Scheduled(1, T, T + 60_000, True)]


def test_an_operator_delivers_a_waiting_record_now_and_it_stays_due():
    sp = scheduled()
    log = [timed(0, 1, {0: T + 3_600_000, 1: T + 3_600_000})]
    assert sp.acquire("m", log, T, 10) == []
    delta = sp.act(RecordAction.DELIVER, 0, 0, T + 10)
    assert delta.state_batches == (PersistedBatch(0, 0, AV, 0, DUE_NOW),)  # durable
    assert sp.acquire("m", log, T + 20, 10) == [AcquiredRange(0, 0, 1)]
    assert sp.deferred_count == 1  # offset 1 still waits
    sp.act(RecordAction.REJECT, 1, 1, T + 30)
    assert sp.deferred_count == 0


def test_after_a_restart_a_record_not_yet_due_is_judged_again_from_the_log():
    sp = scheduled()
    log = [timed(0, 4, {2: T + 5_000})]
    sp.acquire("m", log, T, 10)
    delta = sp.acknowledge("m", [AckBatch(0, 1, ACCEPT), AckBatch(3, 4, ACCEPT)], T)
    store = PersistedState()
    store.apply(delta)  # the waiting record is a hole the store reads as never delivered
    again = SharePartition.from_persisted(store, PartitionLimits(schedule=HEADERS))
    assert inflight(again) == [(2, 2, AV, 0, None), (3, 4, ACK, 1, None)]
    assert again.times_wanted_from() == 2  # batches from SPSO are read for their times
    assert again.acquire("n", log, T + 4_000, 10) == []
    assert again.deferred_count == 1
    log.append(timed(5, 6, {}))
    assert again.acquire("n", log, T + 5_000, 10) == [
        AcquiredRange(2, 2, 1),
        AcquiredRange(5, 6, 1),
    ]
    again.acknowledge("n", [AckBatch(2, 2, ACCEPT)], T + 5_000)
    assert (again.spso, again.speo) == (5, 7)
    assert again.times_wanted_from() == 7  # none left to judge: from SPEO again


def test_waiting_records_are_stored_without_their_times_so_they_coalesce():
    sp = scheduled()
    times = {o: T + 1_000 * (o + 1) for o in range(5)}  # five times, five in-flight ranges
    sp.acquire("m", [timed(0, 5, times)], T, 10)  # 5 is due now
    assert len(sp.ranges) == 6
    delta = sp.acknowledge("m", [AckBatch(5, 5, ACCEPT)], T)
    assert delta.state_batches == (PersistedBatch(0, 4, AV, 0), PersistedBatch(5, 5, ACK, 1))


def test_a_changed_delay_applies_to_records_not_judged_yet():
    sp = scheduled(DeliverySchedule(delay_ms=10_000))
    sp.acquire("m", [BatchHeader(0, 0, max_timestamp=T)], T, 10)
    sp.change_limits(PartitionLimits(schedule=DeliverySchedule()))
    log = [BatchHeader(0, 0, max_timestamp=T), BatchHeader(1, 1, max_timestamp=T)]
    assert sp.acquire("m", log, T + 1, 10) == [AcquiredRange(1, 1, 1)]  # 0 keeps its time
    assert sp.acquire("m", log, T + 10_000, 10) == [AcquiredRange(0, 0, 1)]


def test_under_key_order_a_waiting_record_holds_back_the_later_records_of_its_key():
    sp = SharePartition(0, PartitionLimits(schedule=HEADERS, key_ordered=True))
    a, b = key_hash(b"a"), key_hash(b"b")
    batch = BatchHeader(
        0,
        3,
        key_hashes=(a, b, a, b),
        max_timestamp=T,
        deliver_at=(T + 1_000, NO_TIME, NO_TIME, NO_TIME),
    )
    assert sp.acquire("m", [batch], T, 10) == [AcquiredRange(1, 1, 1)]  # b's first only
    sp.acknowledge("m", [AckBatch(1, 1, ACCEPT)], T)
    assert sp.acquire("m", [batch], T + 10, 10) == [AcquiredRange(3, 3, 1)]
    assert sp.acquire("m", [batch], T + 1_000, 10) == [AcquiredRange(0, 0, 1)]
    sp.acknowledge("m", [AckBatch(0, 0, ACCEPT)], T + 1_000)
    assert sp.acquire("m", [batch], T + 1_001, 10) == [AcquiredRange(2, 2, 1)]


@pytest.mark.parametrize(
    ("configs", "schedule"),
    [
        ({}, DeliverySchedule()),
        (
            {
                gc.DELIVERY_DELAY: "5000",
                gc.MAX_DELIVERY_DELAY: "60000",
                gc.DELIVER_AT_HEADER: "true",
            },
            DeliverySchedule(5_000, 60_000, True),
        ),
    ],
)
def test_the_group_configs_make_the_schedule(configs, schedule):
    settings = GroupSettings().with_configs(configs)
    assert settings.limits.schedule == schedule
    assert settings.with_configs(settings.as_configs()) == settings
    for name in (gc.DELIVERY_DELAY, gc.MAX_DELIVERY_DELAY, gc.DELIVER_AT_HEADER):
        assert name in gc.DEFINITIONS


def header_batch(codec: int, headers: list[list[tuple[str, bytes]]]) -> memoryview:
    builder = DefaultRecordBatchBuilder(2, codec, 0, -1, -1, -1, 1 << 20)
    for i, named in enumerate(headers):
        builder.append(i, timestamp=T, key=None, value=b"v" * 50, headers=named)
    return memoryview(bytes(builder.build()))


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])  # none, gzip, snappy, lz4, zstd
def test_the_header_is_read_from_each_record_compressed_or_not(codec):
    at = b"%d" % (T + 5_000)
    data = header_batch(
        codec,
        [[], [("x-deliver-at", at)], [("other", b"1"), ("x-deliver-at", b"soon")], []],
    )
    times, not_times = batch_deliver_at(data, 0, 3)
    assert times == (NO_TIME, T + 5_000, NO_TIME, NO_TIME)
    assert not_times == [2]  # delivered at once, and reported


def test_a_batch_without_the_header_is_not_read():
    data = header_batch(0, [[("trace", b"x-deliver")], []])
    assert not may_name_times(data)  # no record is parsed
    assert batch_deliver_at(data, 0, 1) == (None, [])
