"""An admin reset's targets, scopes and CSV plans, decided without I/O (as Kafka's
GroupOffsetsResetter decides them)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shareproxy.core.errors import ErrorCode, ShareError
from shareproxy.core.reset_csv import export_csv, parse_csv
from shareproxy.core.reset_plan import new_start_offset, parse_scope, reset_target

NOW = 1_800_000_000_000


def start(to, current=50, earliest=10, latest=100, at_time=None, **given):
    target = reset_target(to, now_ms=NOW, **given)
    return new_start_offset(
        target, "t", 0, current=current, earliest=earliest, latest=latest, at_time=at_time
    )


def test_shift_moves_from_the_current_start_and_clamps_into_the_log():
    assert start("shift", shift=-5) == 45
    assert start("shift", shift=7) == 57
    assert start("shift", shift=-1000) == 10  # below the log's start: its start
    assert start("shift", shift=1000) == 100  # past its end: the end


def test_shift_without_a_start_offset_is_refused_naming_the_partition():
    with pytest.raises(ShareError) as refused:
        start("shift", current=None, shift=-5)
    assert refused.value.code is ErrorCode.INVALID_REQUEST and "t-0" in refused.value.message


def test_current_keeps_the_start_or_takes_the_end_without_state():
    assert start("current") == 50
    assert start("current", current=None) == 100


def test_duration_is_the_first_offset_at_now_less_it_or_the_end():
    target = reset_target("duration", now_ms=NOW, duration="PT1H30M")
    assert target.timestamp_ms(NOW) == NOW - 5_400_000
    assert start("duration", duration="P1D", at_time=70) == 70
    assert start("duration", duration="P1D", at_time=None) == 100  # nothing that late
    # longer ago than 1970: from the first record, never Kafka's special timestamps -1/-2
    assert reset_target("duration", now_ms=NOW, duration="P99999D").timestamp_ms(NOW) == 0


@pytest.mark.parametrize(
    "bad",
    ["1h", "PT", "P1H", "-PT1H", "", "PT1H junk", "PT" + "9" * 400 + "S", "P" + "9" * 20 + "D"],
)
def test_a_bad_duration_is_refused_as_a_bad_request(bad):
    with pytest.raises(ShareError) as refused:
        reset_target("duration", now_ms=NOW, duration=bad)
    assert refused.value.code is ErrorCode.INVALID_REQUEST


def test_offsets_clamp_as_kafka_checks_the_range():
    plan = {("t", 0): 5, ("t", 1): 60, ("t", 2): 500}
    target = reset_target("offsets", now_ms=NOW, offsets=plan)
    got = [
        new_start_offset(target, "t", p, current=None, earliest=10, latest=100) for p in range(3)
    ]
    assert got == [10, 60, 100]


@pytest.mark.parametrize(
    ("to", "given", "missing"),
    [
        ("datetime", {}, "datetime"),
        ("datetime", {"at_ms": NOW + 1}, "future"),
        ("offset", {}, "offset"),
        ("shift", {}, "shift"),
        ("offsets", {"offsets": {}}, "offsets"),
    ],
)
def test_a_target_lacking_its_value_is_refused(to, given, missing):
    with pytest.raises(ShareError) as refused:
        reset_target(to, now_ms=NOW, **given)
    assert missing in refused.value.message


def test_scope_is_a_topic_or_kafkas_topic_colon_partitions():
    assert parse_scope("orders") == ("orders", None)
    assert parse_scope("orders:2,0,2") == ("orders", [0, 2])
    for bad in ("orders:", "orders:a", "orders:1:2", ":1", "orders:-1", "orders:\u00b2"):
        with pytest.raises(ShareError):
            parse_scope(bad)


def test_export_is_kafkas_single_group_csv():
    assert export_csv([("a", 0, 5), ("b", 2, 0)]) == "a,0,5\nb,2,0\n"


@given(
    st.dictionaries(
        st.tuples(st.text("abcXYZ019._-", min_size=1, max_size=20), st.integers(0, 10_000)),
        st.integers(0, 2**62),
        min_size=1,
    )
)
def test_csv_round_trip(plan):
    rows = [(t, p, o) for (t, p), o in plan.items()]
    assert parse_csv(export_csv(rows), "g") == plan


def test_csv_with_a_group_column_is_read_for_the_group_alone():
    text = "g1,a,0,5\ng2,a,0,9\ng1,b,1,7\n"
    assert parse_csv(text, "g1") == {("a", 0): 5, ("b", 1): 7}
    with pytest.raises(ShareError) as refused:
        parse_csv(text, "g3")
    assert "no reset plan for group 'g3'" in refused.value.message


@pytest.mark.parametrize("bad", ["a,0", "a,x,5", "a,0,-1", "a,0,5\nb,1", "", "a,\u00b2,5"])
def test_a_malformed_csv_names_the_line(bad):
    with pytest.raises(ShareError) as refused:
        parse_csv(bad, "g")
    assert refused.value.code is ErrorCode.INVALID_REQUEST
