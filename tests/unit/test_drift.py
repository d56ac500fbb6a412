"""Drift rules, one by one, and which wins when several hold."""

from __future__ import annotations

import uuid

import pytest

from shareproxy.core.drift import (
    REPAIR,
    Drift,
    GroupFacts,
    Repair,
    SourcePartition,
    StoredFacts,
    classify,
    records_lost,
)
from shareproxy.core.states import RecordState

ACK, ARC, AV = RecordState.ACKNOWLEDGED, RecordState.ARCHIVED, RecordState.AVAILABLE
OLD, NEW, OTHER = uuid.UUID(int=1), uuid.UUID(int=2), uuid.UUID(int=3)
HOUR = 3_600_000
NOW = 100 * HOUR
RETENTION = 24 * HOUR


def group(subscribed=("orders",), changed=NOW - HOUR, empty_since=None, gid="g") -> GroupFacts:
    return GroupFacts(gid, subscribed, changed, empty_since)


def stored(partition=0, spso=10, batches=(), topic_id=OLD, name="orders", gid="g") -> StoredFacts:
    return StoredFacts(gid, topic_id, name, partition, 3, spso, tuple(batches))


def source(partition=0, log_start=0, hwm=100, topic_id=OLD, name="orders") -> SourcePartition:
    return SourcePartition(name, topic_id, partition, log_start, hwm, hwm)


def drifts(groups, states, parts) -> list[tuple[Drift, int | None, int]]:
    return [
        (f.drift, f.partition, f.records) for f in classify(groups, states, parts, NOW, RETENTION)
    ]


def test_a_partition_within_the_log_is_healthy():
    assert drifts([group()], [stored()], [source()]) == [(Drift.HEALTHY, 0, 0)]


def test_spso_below_the_log_start_counts_the_records_never_acknowledged():
    # SPSO 10; 10-14 acknowledged, 15-17 available, 18 archived; log start moved to 25
    batches = [(10, 14, ACK, 1), (15, 17, AV, 1), (18, 18, ARC, 5), (19, 30, AV, 0)]
    assert drifts([group()], [stored(batches=batches)], [source(log_start=25)]) == [
        (Drift.RECORDS_LOST, 0, 25 - 10 - 5 - 1)
    ]
    assert records_lost(10, batches, 10) == 0
    assert records_lost(10, [], 12) == 2  # not yet fetched is lost as well


def test_spso_beyond_the_high_watermark_is_a_truncated_topic():
    assert drifts([group()], [stored(spso=150)], [source(hwm=100)]) == [
        (Drift.BEYOND_HIGH_WATERMARK, 0, 0)
    ]
    assert drifts([group()], [stored(spso=100)], [source(hwm=100)]) == [(Drift.HEALTHY, 0, 0)]


def test_a_recreated_topic_is_told_from_a_deleted_one_by_its_name():
    recreated = [source(0, topic_id=NEW), source(1, topic_id=NEW)]
    assert drifts([group()], [stored()], recreated) == [
        (Drift.TOPIC_RECREATED, 0, 0),
        (Drift.NEW_PARTITION, 0, 0),  # the new id's partitions start at their log start
        (Drift.NEW_PARTITION, 1, 0),
    ]
    assert drifts([group()], [stored()], [source(name="else", topic_id=OTHER)]) == [
        (Drift.TOPIC_DELETED, 0, 0)
    ]
    assert drifts([group()], [stored(name=None)], recreated) == [(Drift.TOPIC_DELETED, 0, 0)]


def test_a_deleted_partition_and_an_added_one():
    states = [stored(0), stored(2)]
    assert drifts([group()], states, [source(0), source(1)]) == [
        (Drift.HEALTHY, 0, 0),
        (Drift.PARTITION_DELETED, 2, 0),
        (Drift.NEW_PARTITION, 1, 0),
    ]


def test_a_topic_the_group_never_consumed_is_not_drift():
    parts = [source(), source(0, topic_id=OTHER, name="audit")]
    assert drifts([group(subscribed=("orders", "audit"))], [stored()], parts) == [
        (Drift.HEALTHY, 0, 0)
    ]


def test_an_empty_group_expires_after_the_retention_and_wins_over_everything():
    just = group(subscribed=(), empty_since=NOW - RETENTION)
    past = group(subscribed=(), empty_since=NOW - RETENTION - 1)
    states = [stored(spso=5)]
    assert drifts([just], states, [source(log_start=10)]) == [(Drift.RECORDS_LOST, 0, 5)]
    assert drifts([past], states, [source(log_start=10)]) == [(Drift.GROUP_EXPIRED, 0, 0)]
    assert drifts([past], states, []) == [(Drift.GROUP_EXPIRED, 0, 0)]
    assert drifts([past], [], []) == [(Drift.GROUP_EXPIRED, None, 0)]  # no state at all


def test_a_live_group_that_dropped_a_topic_longer_than_the_retention_ago():
    states = [stored(), stored(0, topic_id=OTHER, name="audit")]
    parts = [source(), source(0, topic_id=OTHER, name="audit")]
    recent = group(subscribed=("orders",), changed=NOW - HOUR)
    long_ago = group(subscribed=("orders",), changed=NOW - RETENTION - 1)
    assert drifts([recent], states, parts) == [(Drift.HEALTHY, 0, 0), (Drift.HEALTHY, 0, 0)]
    assert drifts([long_ago], states, parts) == [
        (Drift.HEALTHY, 0, 0),
        (Drift.UNSUBSCRIBED_TOPIC, 0, 0),
    ]
    # an empty group, or one never seen with members, is judged by the empty-group rule only
    for g in (group(subscribed=(), changed=0, empty_since=NOW - HOUR), group(subscribed=None)):
        assert [d for d, _, _ in drifts([g], states, parts)] == [Drift.HEALTHY] * 2


def test_no_new_partition_for_a_dropped_topic_or_an_expired_group():
    states = [stored(0, topic_id=OTHER, name="audit")]
    parts = [source(0, topic_id=OTHER, name="audit"), source(1, topic_id=OTHER, name="audit")]
    dropped = group(subscribed=("orders",), changed=NOW - RETENTION - 1)
    assert [d for d, _, _ in drifts([dropped], states, parts)] == [Drift.UNSUBSCRIBED_TOPIC]


def test_groups_are_judged_separately():
    a, b = group(gid="a"), group(gid="b")
    states = [stored(gid="a"), stored(gid="b", spso=500)]
    assert [
        (f.group_id, f.drift) for f in classify([a, b], states, [source()], NOW, RETENTION)
    ] == [
        ("a", Drift.HEALTHY),
        ("b", Drift.BEYOND_HIGH_WATERMARK),
    ]


@pytest.mark.parametrize("drift", list(Drift))
def test_every_drift_names_a_repair(drift):
    assert REPAIR[drift] in Repair
    assert (REPAIR[drift] == Repair.NONE) == (drift == Drift.HEALTHY)
