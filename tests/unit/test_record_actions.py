"""An operator's view of single in-flight records and the release, accept (skip) and reject of
chosen offsets, stated like the KIP's examples: the in-flight ranges after each step and the
write the store gets."""

from __future__ import annotations

import pytest

from shareproxy.core.acknowledgement import AckBatch
from shareproxy.core.acquisition import BatchHeader, PartitionLimits
from shareproxy.core.errors import ErrorCode, ShareError
from shareproxy.core.persisted import StateDelta
from shareproxy.core.record_actions import MAX_PAGE, RecordAction, RecordRun
from shareproxy.core.share_partition import SharePartition
from shareproxy.core.states import AcknowledgeType, ArchiveReason, RecordState
from tests.support.kip_tables import ACK, ACQ, ARC, AV, inflight, pb

RELEASE, ACCEPT, REJECT = RecordAction.RELEASE, RecordAction.ACCEPT, RecordAction.REJECT
LOG = [BatchHeader(0, 9), BatchHeader(10, 19)]


def acquired(**limits) -> SharePartition:
    """Offsets 0-9 acquired by m (lock to 30000), 10-19 by n (lock to 30000)."""
    sp = SharePartition(0, PartitionLimits(record_lock_duration_ms=30_000, **limits))
    sp.acquire("m", LOG[:1], 0, 10)
    sp.acquire("n", LOG[1:], 0, 10)
    return sp


def test_page_lists_runs_from_spso_with_owner_and_lock_end():
    sp = acquired()
    sp.acknowledge("m", [AckBatch(0, 1, (int(AcknowledgeType.ACCEPT),))], 5)  # SPSO 2
    page = sp.page(None, 100)
    assert (page.spso, page.speo, page.next_offset) == (2, 20, None)
    assert page.runs == [
        RecordRun(2, 9, RecordState.ACQUIRED, 1, "m", 30_000),
        RecordRun(10, 19, RecordState.ACQUIRED, 1, "n", 30_000),
    ]


def test_page_starts_inside_a_run_and_says_where_the_next_starts():
    sp = acquired()
    sp.act(RELEASE, 4, 4, 10)  # 0-3 m, 4 Available, 5-9 m, 10-19 n
    page = sp.page(3, 2)
    assert page.runs == [
        RecordRun(3, 3, RecordState.ACQUIRED, 1, "m", 30_000),
        RecordRun(4, 4, RecordState.AVAILABLE, 1, None, None),
    ]
    assert page.next_offset == 5
    assert sp.page(5, 2).next_offset is None
    assert sp.page(20, 10).runs == [] and sp.page(20, 10).next_offset is None
    assert sp.page(0, 1).runs[0].first == 0  # below SPSO: from SPSO


@pytest.mark.parametrize("frm, limit", [(-1, 10), (None, 0), (None, MAX_PAGE + 1)])
def test_page_bounds(frm, limit):
    with pytest.raises(ShareError) as e:
        acquired().page(frm, limit)
    assert e.value.code == ErrorCode.INVALID_REQUEST


def test_release_ends_any_members_lock_keeping_the_delivery_count():
    sp = acquired()
    delta = sp.act(RELEASE, 8, 11, 100)
    assert inflight(sp) == [
        (0, 7, ACQ, 1, "m"),
        (8, 11, AV, 1, None),
        (12, 19, ACQ, 1, "n"),
    ]
    # the store had nothing of 0-19: the write fills in from SPSO up to the change, as an
    # acknowledgement's does (first deliveries as Available, delivery count 0)
    assert delta == StateDelta(-1, (pb(0, 7, AV, 0), pb(8, 11, AV, 1)))
    got = sp.acquire("o", LOG, 200, 10)
    assert [(a.first_offset, a.last_offset, a.delivery_count) for a in got] == [
        (8, 9, 2),
        (10, 11, 2),
    ]


def test_release_needs_acquired_records():
    sp = acquired()
    sp.act(RELEASE, 0, 0, 1)
    with pytest.raises(ShareError) as e:
        sp.act(RELEASE, 0, 3, 2)
    assert e.value.code == ErrorCode.INVALID_RECORD_STATE
    assert "0-0 are Available" in e.value.message
    assert inflight(sp)[:2] == [(0, 0, AV, 1, None), (1, 9, ACQ, 1, "m")]  # nothing changed


def test_release_at_the_delivery_limit_archives():
    sp = acquired(delivery_count_limit=1)
    sp.act(RELEASE, 0, 9, 1)
    assert inflight(sp)[0] == (10, 19, ACQ, 1, "n")
    assert sp.spso == 10
    assert sp.take_archived_log() == ((0, 9, 1, ArchiveReason.DELIVERY_LIMIT),)


def test_accept_of_an_available_record_skips_it_and_spso_moves_past_the_terminal_prefix():
    sp = acquired()
    sp.act(RELEASE, 0, 9, 1)
    delta = sp.act(ACCEPT, 0, 2, 2)
    assert sp.spso == 3
    assert delta.start_offset == 3
    assert inflight(sp)[0] == (3, 9, AV, 1, None)
    again = sp.acquire("o", LOG[:1], 3, 10)
    assert [(a.first_offset, a.last_offset) for a in again] == [(3, 9)]


def test_accept_of_an_acquired_record_fails_its_holders_acknowledgement():
    sp = acquired()
    sp.act(ACCEPT, 5, 5, 1)
    assert inflight(sp)[:3] == [(0, 4, ACQ, 1, "m"), (5, 5, ACK, 1, None), (6, 9, ACQ, 1, "m")]
    with pytest.raises(ShareError) as e:
        sp.acknowledge("m", [AckBatch(0, 9, (int(AcknowledgeType.ACCEPT),))], 2)
    assert e.value.code == ErrorCode.INVALID_RECORD_STATE


def test_reject_archives_available_and_acquired_records_and_logs_them():
    sp = acquired()
    sp.act(RELEASE, 0, 4, 1)
    delta = sp.act(REJECT, 3, 12, 2)
    assert inflight(sp) == [(0, 2, AV, 1, None), (3, 12, ARC, 1, None), (13, 19, ACQ, 1, "n")]
    assert pb(3, 12, ARC, 1) in delta.state_batches
    op = ArchiveReason.OPERATOR
    assert sp.take_archived_log() == ((3, 4, 1, op), (5, 9, 1, op), (10, 12, 1, op))


def test_reject_with_a_dead_letter_topic_goes_there_first():
    sp = acquired(dead_letter=True)
    sp.act(REJECT, 0, 0, 1)
    assert sp.ranges[0].state == RecordState.ARCHIVING
    assert sp.dead_letter_pending


@pytest.mark.parametrize("action", list(RecordAction))
def test_terminal_records_are_refused(action):
    sp = acquired()
    if action == RecordAction.DELIVER:  # which takes Available records only
        sp.act(RecordAction.RELEASE, 0, 2, 1)
    sp.act(ACCEPT, 1, 1, 1)
    with pytest.raises(ShareError) as e:
        sp.act(action, 0, 2, 2)
    assert e.value.code == ErrorCode.INVALID_RECORD_STATE
    assert "1-1 are Acknowledged" in e.value.message


@pytest.mark.parametrize("first, last", [(-1, 0), (19, 20), (20, 20)])
def test_offsets_outside_spso_speo_are_refused(first, last):
    sp = acquired()
    with pytest.raises(ShareError) as e:
        sp.act(ACCEPT, first, last, 1)
    assert e.value.code == ErrorCode.INVALID_RECORD_STATE
    assert "SPSO 0, SPEO 20" in e.value.message


def test_first_after_last_is_an_invalid_request():
    with pytest.raises(ShareError) as e:
        acquired().act(ACCEPT, 5, 4, 1)
    assert e.value.code == ErrorCode.INVALID_REQUEST


def test_held_by_lists_a_members_runs():
    sp = acquired()
    sp.act(RELEASE, 3, 4, 1)
    assert sp.held_by("m") == [(0, 2), (5, 9)]
    assert sp.held_by("x") == []


def test_a_restart_reads_back_what_the_actions_wrote():
    sp = acquired()
    sp.act(ACCEPT, 0, 1, 1)
    sp.act(REJECT, 5, 5, 2)
    sp.act(RELEASE, 6, 7, 3)
    again = SharePartition.from_persisted(sp.persisted_view())
    assert inflight(again) == [
        (2, 4, AV, 0, None),
        (5, 5, ARC, 1, None),
        (6, 7, AV, 1, None),
        (8, 19, AV, 0, None),
    ]
