"""The share-partition leader's rules, one behaviour per test."""

from __future__ import annotations

import pytest

from shareproxy.core.acknowledgement import AckBatch
from shareproxy.core.acquisition import BatchHeader, PartitionLimits
from shareproxy.core.errors import ErrorCode, ShareError
from shareproxy.core.inflight import AcquiredRange
from shareproxy.core.persisted import StateDelta
from shareproxy.core.record_actions import RecordAction
from shareproxy.core.share_partition import SharePartition
from shareproxy.core.states import AcknowledgeType, AcquireMode, ArchiveReason
from tests.support.kip_tables import ACK, ACQ, ARC, AV, inflight, pb

GAP, ACCEPT, RELEASE, REJECT, RENEW = ((int(t),) for t in AcknowledgeType)
LOG = [BatchHeader(0, 9), BatchHeader(10, 19), BatchHeader(20, 29)]


def fresh(**limits) -> SharePartition:
    return SharePartition(0, PartitionLimits(**limits))


# ------------------------------------------------------------------ acquisition
def test_batch_optimized_takes_whole_batches_past_max_records():
    sp = fresh()
    assert sp.acquire("m", LOG, 0, max_records=12) == [AcquiredRange(0, 19, 1)]
    assert sp.speo == 20


def test_record_limit_takes_exactly_max_records():
    sp = fresh()
    assert sp.acquire("m", LOG, 0, 12, AcquireMode.RECORD_LIMIT) == [AcquiredRange(0, 11, 1)]
    assert sp.acquire("n", LOG, 0, 12, AcquireMode.RECORD_LIMIT) == [AcquiredRange(12, 23, 1)]
    assert inflight(sp) == [(0, 11, ACQ, 1, "m"), (12, 23, ACQ, 1, "n")]


def test_in_flight_cap_cuts_a_batch_that_crosses_it_until_spso_moves():
    sp = fresh(max_record_locks=15)
    # batch-optimized: whole batches below the cap (0-9), the batch crossing it cut (10-14)
    assert sp.acquire("m", LOG, 0, 500) == [AcquiredRange(0, 14, 1)]
    assert sp.acquire("n", LOG, 0, 500) == []
    assert not sp.has_acquirable()
    sp.acknowledge("m", [AckBatch(0, 9, ACCEPT)], 1)
    assert sp.has_acquirable()
    assert sp.acquire("n", LOG, 2, 500) == [AcquiredRange(15, 24, 1)]
    assert sp.in_flight_count == 15


def test_in_flight_cap_is_exact_in_record_limit_mode():
    sp = fresh(max_record_locks=15)
    assert sp.acquire("m", LOG, 0, 500, AcquireMode.RECORD_LIMIT) == [AcquiredRange(0, 14, 1)]
    assert sp.acquire("n", LOG, 0, 500, AcquireMode.RECORD_LIMIT) == []
    sp.acknowledge("m", [AckBatch(0, 4, ACCEPT)], 1)
    assert sp.acquire("n", LOG, 2, 500, AcquireMode.RECORD_LIMIT) == [AcquiredRange(15, 19, 1)]
    assert sp.in_flight_count == 15


def test_members_sharing_a_partition_split_a_large_batch_instead_of_one_taking_it_whole():
    big = [BatchHeader(0, 3_999)]
    alone = fresh(max_record_locks=10_000)
    assert alone.acquire("m", big, 0, 500) == [AcquiredRange(0, 3_999, 1)]  # soft max_records
    sp = fresh(max_record_locks=10_000)
    assert sp.acquire("m", big, 0, 500, sharers=2) == [AcquiredRange(0, 499, 1)]
    assert sp.acquire("n", big, 0, 500, sharers=2) == [AcquiredRange(500, 999, 1)]
    # an even share of what is left to acquire, when that is less than max_records
    small = fresh()
    assert small.acquire("m", [BatchHeader(0, 9)], 0, 500, sharers=3) == [AcquiredRange(0, 3, 1)]
    assert small.acquire("n", [BatchHeader(0, 9)], 0, 500, sharers=3) == [AcquiredRange(4, 5, 1)]
    # RECORD_LIMIT gets exactly its limit, shared or not
    exact = fresh(max_record_locks=10_000)
    got = exact.acquire("m", big, 0, 700, AcquireMode.RECORD_LIMIT, sharers=6)
    assert got == [AcquiredRange(0, 699, 1)]


def test_released_records_are_acquired_before_new_ones():
    sp = fresh()
    sp.acquire("m", LOG, 0, 10)
    sp.acknowledge("m", [AckBatch(3, 5, RELEASE)], 1)
    assert sp.next_fetch_offset() == 3
    got = sp.acquire("n", LOG, 2, 10)
    assert got == [AcquiredRange(3, 5, 2), AcquiredRange(10, 19, 1)]


def test_control_batches_and_aborted_transactions_are_archived_not_delivered():
    sp = fresh()
    log = [
        BatchHeader(0, 4),
        BatchHeader(5, 5, is_control=True),
        BatchHeader(6, 8, is_aborted=True),
        BatchHeader(9, 9, is_control=True),
        BatchHeader(12, 14),
    ]  # 10-11 compacted away
    assert sp.acquire("m", log, 0, 500) == [AcquiredRange(0, 4, 1), AcquiredRange(12, 14, 1)]
    assert inflight(sp) == [(0, 4, ACQ, 1, "m"), (5, 11, ARC, 0, None), (12, 14, ACQ, 1, "m")]
    delta = sp.acknowledge("m", [AckBatch(0, 4, ACCEPT)], 1)
    assert (sp.spso, delta.start_offset) == (12, 12)


def test_acquisition_never_writes_state():
    sp = fresh()
    sp.acquire("m", LOG, 0, 500)
    assert sp.persisted_view().canonical() == []


def test_max_records_must_be_positive():
    with pytest.raises(ShareError) as e:
        fresh().acquire("m", LOG, 0, 0)
    assert e.value.code == ErrorCode.INVALID_REQUEST


# ------------------------------------------------------------------ poison throttling
def _redeliver(sp: SharePartition, times: int, first: int = 0, last: int = 9) -> None:
    for t in range(times):
        got = sp.acquire("m", [BatchHeader(0, 29)], t, 500, AcquireMode.RECORD_LIMIT)
        assert got, f"nothing acquired on round {t}"
        sp.acknowledge("m", [AckBatch(g.first_offset, g.last_offset, RELEASE) for g in got], t)


def test_late_deliveries_go_out_in_smaller_batches_and_alone_on_the_last():
    sp = fresh(delivery_count_limit=5)
    sp.acquire("m", [BatchHeader(0, 9)], 0, 10)
    sp.acknowledge("m", [AckBatch(0, 9, RELEASE)], 0)  # count 1, Available
    # 2nd delivery (below half the limit): not throttled
    assert sp.acquire("m", [BatchHeader(0, 9)], 1, 8, AcquireMode.RECORD_LIMIT) == [
        AcquiredRange(0, 7, 2)
    ]
    sp.acknowledge("m", [AckBatch(0, 7, RELEASE)], 1)
    # 0-7 at count 2 → 3rd delivery reaches half the limit: max_records halved
    got = sp.acquire("m", [BatchHeader(0, 9)], 2, 8)
    assert got == [AcquiredRange(0, 3, 3)]
    # 4th: a quarter
    sp.acknowledge("m", [AckBatch(0, 3, RELEASE)], 2)
    assert sp.acquire("m", [BatchHeader(0, 9)], 3, 8) == [AcquiredRange(0, 1, 4)]
    sp.acknowledge("m", [AckBatch(0, 1, RELEASE)], 3)
    # 5th and last: alone
    assert sp.acquire("m", [BatchHeader(0, 9)], 4, 8) == [AcquiredRange(0, 0, 5)]
    assert sp.acquire("m", [BatchHeader(0, 9)], 4, 8) == [AcquiredRange(1, 1, 5)]


def test_a_throttled_record_is_not_mixed_into_an_ordinary_acquisition():
    sp = fresh(delivery_count_limit=4)
    sp.acquire("m", [BatchHeader(0, 9)], 0, 10)
    sp.acknowledge("m", [AckBatch(5, 5, RELEASE)], 0)
    sp.acquire("m", [BatchHeader(0, 9)], 0, 10)
    sp.acknowledge("m", [AckBatch(5, 5, RELEASE)], 0)  # 5 at count 2
    sp.acknowledge("m", [AckBatch(0, 4, RELEASE)], 0)  # 0-4 at count 1
    # 0-4 go out on their 2nd delivery; 5 (3rd of 4: throttled) waits for its own call
    assert sp.acquire("n", [BatchHeader(0, 9)], 1, 100) == [AcquiredRange(0, 4, 2)]
    assert sp.acquire("n", [BatchHeader(0, 9)], 1, 100) == [AcquiredRange(5, 5, 3)]


def test_delivery_count_limit_archives_on_release_and_on_timeout():
    sp = fresh(delivery_count_limit=2, record_lock_duration_ms=100)
    sp.acquire("m", [BatchHeader(0, 1)], 0, 10)
    sp.acknowledge("m", [AckBatch(0, 1, RELEASE)], 1)
    assert sp.acquire("m", [BatchHeader(0, 1)], 2, 10) == [AcquiredRange(0, 0, 2)]
    assert sp.acquire("m", [BatchHeader(0, 1)], 2, 10) == [AcquiredRange(1, 1, 2)]
    sp.acknowledge("m", [AckBatch(0, 0, RELEASE)], 3)
    delta = sp.expire_locks(now_ms=102)
    assert sp.spso == 2 and inflight(sp) == []
    assert delta == StateDelta(2, ())
    assert sp.lock_timeouts == 1  # offset 1 timed out; 0 was released


# ------------------------------------------------------------------ acknowledgement
def test_only_the_lock_holder_may_acknowledge_and_nothing_changes_otherwise():
    sp = fresh()
    sp.acquire("m", LOG, 0, 10)
    before = inflight(sp)
    for batches in ([AckBatch(0, 3, ACCEPT)], [AckBatch(0, 3, ACCEPT), AckBatch(8, 9, ACCEPT)]):
        with pytest.raises(ShareError) as e:
            sp.acknowledge("other", batches, 1)
        assert e.value.code == ErrorCode.INVALID_RECORD_STATE
        assert inflight(sp) == before


def test_acknowledging_past_the_last_record_in_flight_is_invalid_request():
    """As Kafka's SharePartition.acknowledge ("the last offset in request is past acquired
    records"): the partition's error, and none of its batches applied."""
    sp = fresh()
    sp.acquire("m", LOG, 0, 10)  # 0-9
    before = inflight(sp)
    for batches in (
        [AckBatch(0, 3, ACCEPT), AckBatch(8, 12, ACCEPT)],  # 10-12 never delivered
        [AckBatch(10, 10, ACCEPT)],
        [AckBatch(25, 25, ACCEPT)],
    ):
        with pytest.raises(ShareError) as e:
            sp.acknowledge("m", batches, 1)
        assert e.value.code == ErrorCode.INVALID_REQUEST
        assert "past 9" in e.value.message
        assert inflight(sp) == before


def test_batches_are_judged_in_order_as_kafka_judges_them():
    """The first batch that fails names the error, even where a later one would fail
    otherwise (adjacent batches of one type are merged only to apply them)."""
    sp = fresh()
    sp.acquire("m", LOG, 0, 10)
    for batches, code in (
        ([AckBatch(0, 3, ACCEPT), AckBatch(4, 12, ACCEPT)], ErrorCode.INVALID_RECORD_STATE),
        ([AckBatch(4, 12, ACCEPT), AckBatch(13, 13, ACCEPT)], ErrorCode.INVALID_REQUEST),
    ):
        with pytest.raises(ShareError) as e:
            sp.acknowledge("other", batches, 1)
        assert e.value.code == code


def test_with_nothing_in_flight_an_acknowledgement_is_invalid_record_state():
    """Kafka finds no cached batch at all then ("the request batch offsets are not found")."""
    sp = fresh()
    for setup in (False, True):
        if setup:  # everything delivered was acknowledged: SPSO = SPEO = 10
            sp.acquire("m", LOG, 0, 10)
            sp.acknowledge("m", [AckBatch(0, 9, ACCEPT)], 1)
        with pytest.raises(ShareError) as e:
            sp.acknowledge("m", [AckBatch(10, 12, ACCEPT)], 2)
        assert e.value.code == ErrorCode.INVALID_RECORD_STATE


def test_acknowledgements_below_spso_are_skipped_not_refused():
    """As Kafka (a batch whose last offset is below the start offset is passed over): a retry
    of an acknowledgement that was kept, or a late one of records others settled since, is
    answered NONE and changes nothing."""
    sp = fresh()
    sp.acquire("m", LOG, 0, 10)
    sp.acknowledge("m", [AckBatch(0, 9, ACCEPT)], 1)
    assert sp.spso == 10
    assert sp.acknowledge("m", [AckBatch(0, 9, ACCEPT)], 2).is_empty
    assert sp.acknowledge("other", [AckBatch(2, 4, REJECT)], 3).is_empty
    assert sp.take_archived_log() == ()


def test_a_batch_straddling_spso_acknowledges_its_part_from_spso():
    """SPSO moved into a member's batch (an operator settled its first records): as Kafka's
    SharePartition (checkForStartOffsetWithinBatch), the part below SPSO is skipped and the
    rest acknowledged, per offset, instead of the whole batch being refused."""
    sp = fresh()
    sp.acquire("m", LOG, 0, 10)  # 0-9
    sp.act(RecordAction.ACCEPT, 0, 4, 1)
    assert sp.spso == 5
    types = (int(AcknowledgeType.ACCEPT),) * 5 + (2, 3, 1)  # 5 Release, 6 Reject, 7 Accept
    sp.acknowledge("m", [AckBatch(0, 7, types)], 2)
    assert inflight(sp) == [
        (5, 5, AV, 1, None),
        (6, 6, ARC, 1, None),
        (7, 7, ACK, 1, None),
        (8, 9, ACQ, 1, "m"),
    ]
    assert [(a.first, a.last) for a in sp.take_archived_log()] == [(6, 6)]
    for member, batches, code in (
        ("other", [AckBatch(3, 9, ACCEPT)], ErrorCode.INVALID_RECORD_STATE),
        ("m", [AckBatch(3, 10, ACCEPT)], ErrorCode.INVALID_REQUEST),
    ):
        with pytest.raises(ShareError) as e:
            sp.acknowledge(member, batches, 3)
        assert e.value.code == code


def test_acknowledging_twice_is_invalid_record_state():
    sp = fresh()
    sp.acquire("m", LOG, 0, 10)
    sp.acknowledge("m", [AckBatch(5, 5, ACCEPT)], 1)
    with pytest.raises(ShareError) as e:
        sp.acknowledge("m", [AckBatch(5, 5, ACCEPT)], 1)
    assert e.value.code == ErrorCode.INVALID_RECORD_STATE


@pytest.mark.parametrize(
    "batches",
    [
        [AckBatch(5, 3, ACCEPT)],
        [AckBatch(0, 3, ACCEPT), AckBatch(3, 4, ACCEPT)],  # overlap
        [AckBatch(4, 5, ACCEPT), AckBatch(0, 1, ACCEPT)],  # descending
        [AckBatch(0, 3, (1, 1))],  # neither one type nor one per offset
        [AckBatch(0, 0, (9,))],  # unknown type
    ],
)
def test_malformed_acknowledgements_are_invalid_request(batches):
    sp = fresh()
    sp.acquire("m", LOG, 0, 10)
    before = inflight(sp)
    with pytest.raises(ShareError) as e:
        sp.acknowledge("m", batches, 1)
    assert e.value.code == ErrorCode.INVALID_REQUEST
    assert inflight(sp) == before


def test_each_acknowledge_type_and_per_offset_types():
    sp = fresh()
    sp.acquire("m", LOG, 0, 10)
    delta = sp.acknowledge("m", [AckBatch(0, 4, (0, 1, 2, 3, 1)), AckBatch(5, 9, ACCEPT)], 1)
    assert inflight(sp) == [(2, 2, AV, 1, None), (3, 3, ARC, 1, None), (4, 9, ACK, 1, None)]
    assert sp.spso == 2
    # gap archived, accept acknowledged, release available, reject archived
    assert delta == StateDelta(2, (pb(2, 2, AV, 1), pb(3, 3, ARC, 1), pb(4, 9, ACK, 1)))


def test_renew_extends_the_lock_and_writes_nothing():
    sp = fresh(record_lock_duration_ms=1000)
    sp.acquire("m", LOG, 0, 10)
    assert sp.acknowledge("m", [AckBatch(0, 4, RENEW)], 900).is_empty
    sp.expire_locks(1000)
    assert inflight(sp) == [(0, 4, ACQ, 1, "m"), (5, 9, AV, 1, None)]
    assert sp.next_lock_deadline() == 1900


def test_release_member_frees_only_that_members_locks():
    sp = fresh()
    sp.acquire("m", LOG, 0, 10)
    sp.acquire("n", LOG, 0, 10)
    delta = sp.release_member("m", 0)
    assert inflight(sp) == [(0, 9, AV, 1, None), (10, 19, ACQ, 1, "n")]
    assert delta == StateDelta(-1, (pb(0, 9, AV, 1),))


def test_releasing_a_member_that_holds_nothing_here_changes_and_writes_nothing():
    """What lets a node skip the share-partitions a leaving member never held: ``holds`` and
    ``unwritten`` false, its release is an empty write that changes nothing."""
    sp = fresh()
    sp.acquire("n", LOG, 0, 10)
    assert sp.holds("n") and not sp.holds("m") and not sp.unwritten()
    before = inflight(sp)
    assert sp.release_member("m", 0).is_empty
    assert inflight(sp) == before
    log = [BatchHeader(10, 10, is_control=True), BatchHeader(11, 14)]
    sp.acquire("n", log, 0, 500)  # the control record is archived, not yet written
    assert sp.unwritten()
    assert not sp.release_member("m", 0).is_empty  # the next write carries it
    assert not sp.unwritten()


# ------------------------------------------------------------------ the log start moving
def test_log_start_past_spso_archives_available_and_keeps_acquired():
    sp = fresh()
    sp.acquire("m", LOG, 0, 10)  # 0-9 m
    sp.acquire("n", LOG, 0, 10)  # 10-19 n
    sp.acknowledge("m", [AckBatch(0, 9, RELEASE)], 1)  # 0-9 Available
    delta = sp.update_log_start_offset(15)
    assert sp.spso == 10
    assert inflight(sp) == [(10, 19, ACQ, 1, "n")]
    assert delta == StateDelta(10, ())
    # n's lock on 10-14 ends: those records are gone, so Archived; 15-19 become Available
    delta = sp.release_member("n", 0)
    assert sp.spso == 15
    assert inflight(sp) == [(15, 19, AV, 1, None)]
    assert delta == StateDelta(15, (pb(15, 19, AV, 1),))


def test_log_start_past_speo_moves_both():
    sp = fresh()
    sp.acquire("m", LOG, 0, 10)
    sp.acknowledge("m", [AckBatch(0, 9, RELEASE)], 1)
    delta = sp.update_log_start_offset(100)
    assert (sp.spso, sp.speo) == (100, 100)
    assert delta == StateDelta(100, ())
    assert sp.update_log_start_offset(50).is_empty  # never backwards


# ------------------------------------------------------------------ reload
def test_reload_turns_acquired_records_back_into_their_stored_state():
    sp = fresh()
    sp.acquire("m", LOG, 0, 10)
    sp.acknowledge("m", [AckBatch(3, 3, RELEASE), AckBatch(5, 5, ACCEPT)], 1)
    sp.acquire("n", LOG, 2, 1, AcquireMode.RECORD_LIMIT)  # 3 again, count 2
    reloaded = SharePartition.from_persisted(sp.persisted_view())
    assert inflight(reloaded) == [
        (0, 2, AV, 0, None),
        (3, 3, AV, 1, None),
        (4, 4, AV, 0, None),
        (5, 5, ACK, 1, None),
        (6, 9, AV, 0, None),
    ]
    assert reloaded.acquire("x", LOG, 3, 500) == [
        AcquiredRange(0, 2, 1),
        AcquiredRange(3, 3, 2),
        AcquiredRange(4, 4, 1),
        AcquiredRange(6, 29, 1),
    ]


def test_the_archive_log_keeps_rejected_and_delivery_limit_records_but_not_gaps():
    sp = fresh(delivery_count_limit=2)
    sp.acquire("m", LOG[:1], 0, 500)
    batches = [AckBatch(0, 1, REJECT), AckBatch(2, 2, GAP), AckBatch(3, 3, RELEASE)]
    sp.acknowledge("m", [*batches, AckBatch(4, 9, ACCEPT)], 1)
    assert sp.archived_log == [(0, 1, 1, ArchiveReason.REJECTED)]
    sp.archived_log.clear()
    assert sp.acquire("m", LOG[:1], 2, 500) == [AcquiredRange(3, 3, 2)]  # its last delivery
    sp.acknowledge("m", [AckBatch(3, 3, RELEASE)], 3)
    assert sp.archived_log == [(3, 3, 2, ArchiveReason.DELIVERY_LIMIT)]
    assert sp.spso == 10  # the state forgets them; the log is how the store keeps them
