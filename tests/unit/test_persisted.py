"""Folding ShareUpdate deltas into a ShareSnapshot: later batches override, SPSO trims."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from shareproxy.core.acknowledgement import AckBatch, AckRun, normalize_acks
from shareproxy.core.persisted import PersistedState, StateDelta
from shareproxy.core.states import AcknowledgeType, RecordState
from tests.support.kip_tables import ACK, ARC, AV, pb


def test_overlay_splits_what_it_covers():
    s = PersistedState(0, [pb(0, 9, AV, 1), pb(10, 19, ACK, 1)])
    s.apply(StateDelta(-1, (pb(5, 12, ARC, 2),)))
    assert s.batches == [pb(0, 4, AV, 1), pb(5, 12, ARC, 2), pb(13, 19, ACK, 1)]
    s.apply(StateDelta(-1, (pb(3, 3, ACK, 1), pb(25, 26, AV, 0))))
    assert s.batches == [
        pb(0, 2, AV, 1),
        pb(3, 3, ACK, 1),
        pb(4, 4, AV, 1),
        pb(5, 12, ARC, 2),
        pb(13, 19, ACK, 1),
        pb(25, 26, AV, 0),
    ]
    assert s.end_offset == 26


def test_start_offset_trims_and_cuts():
    s = PersistedState(0, [pb(0, 9, AV, 1), pb(10, 19, ACK, 1)])
    s.apply(StateDelta(12, ()))
    assert (s.start_offset, s.batches) == (12, [pb(12, 19, ACK, 1)])
    s.apply(StateDelta(30, ()))
    assert (s.batches, s.end_offset) == ([], 29)


def test_canonical_merges_and_drops_trailing_first_deliveries():
    s = PersistedState(0, [pb(0, 1, ACK, 1), pb(2, 3, ACK, 1), pb(4, 9, AV, 0)])
    assert s.canonical() == [pb(0, 3, ACK, 1)]


@st.composite
def deltas(draw):
    out = []
    for _ in range(draw(st.integers(1, 12))):
        start = draw(st.one_of(st.just(-1), st.integers(0, 40)))
        batches = []
        o = draw(st.integers(0, 10))
        for _ in range(draw(st.integers(0, 4))):
            first = o + draw(st.integers(0, 5))
            last = first + draw(st.integers(0, 6))
            state = draw(st.sampled_from([AV, ACK, ARC]))
            batches.append(pb(first, last, state, draw(st.integers(0, 5))))
            o = last + 1
        out.append(StateDelta(start, tuple(batches)))
    return out


@given(deltas())
def test_fold_equals_per_offset_replay(ds):
    """Folding ranges gives what replaying each delta offset by offset gives."""
    folded = PersistedState(0, [])
    start, offsets = 0, {}
    for d in ds:
        folded.apply(d)
        if d.start_offset != -1:
            start = d.start_offset
        for b in d.state_batches:
            for o in range(b.first_offset, b.last_offset + 1):
                offsets[o] = (b.delivery_state, b.delivery_count)
        offsets = {o: v for o, v in offsets.items() if o >= start}
    expanded = {}
    for b in folded.batches:
        assert b.first_offset <= b.last_offset
        for o in range(b.first_offset, b.last_offset + 1):
            assert o not in expanded
            expanded[o] = (b.delivery_state, b.delivery_count)
    assert folded.start_offset == start
    assert expanded == offsets


def test_per_offset_types_become_runs():
    A, R = int(AcknowledgeType.ACCEPT), int(AcknowledgeType.RELEASE)
    runs = normalize_acks(
        [AckBatch(0, 4, (A, A, R, R, A)), AckBatch(5, 7, (A,)), AckBatch(9, 9, (A,))]
    )
    assert runs == [
        AckRun(0, 1, AcknowledgeType.ACCEPT),
        AckRun(2, 3, AcknowledgeType.RELEASE),
        AckRun(4, 7, AcknowledgeType.ACCEPT),
        AckRun(9, 9, AcknowledgeType.ACCEPT),
    ]
    assert RecordState.ACQUIRED not in {RecordState(b) for b in (0, 2, 4)}
