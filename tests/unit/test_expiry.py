"""What of a share group the running proxy expires: nothing unless a retention is set (Kafka
keeps share groups until deleted); with one, offsets.retention.minutes semantics."""

from __future__ import annotations

from uuid import uuid4

from shareproxy.core.drift import GroupFacts
from shareproxy.core.expiry import expiring
from shareproxy.core.store import SharePartitionKey

A, B = uuid4(), uuid4()
RETENTION = 60_000


def keys(group: str = "g") -> dict[SharePartitionKey, str | None]:
    return {
        SharePartitionKey(group, A, 0): "orders",
        SharePartitionKey(group, A, 1): "orders",
        SharePartitionKey(group, B, 0): "audit",
    }


def test_without_a_retention_nothing_expires_as_in_kafka():
    empty_for_a_year = GroupFacts("g", (), 0, 0)
    out = expiring(empty_for_a_year, keys(), False, 365 * 86_400_000, None)
    assert not out.group and out.partitions == ()


def test_a_group_empty_longer_than_the_retention_expires_with_all_its_state():
    group = GroupFacts("g", (), 1_000, 1_000)
    out = expiring(group, keys(), False, 1_000 + RETENTION + 1, RETENTION)
    assert out.group
    assert set(out.partitions) == set(keys())


def test_not_before_the_retention_has_passed():
    group = GroupFacts("g", (), 1_000, 1_000)
    out = expiring(group, keys(), False, 1_000 + RETENTION, RETENTION)
    assert not out.group and out.partitions == ()


def test_members_the_coordinator_holds_keep_a_group_the_store_thinks_empty():
    group = GroupFacts("g", (), 1_000, 1_000)
    out = expiring(group, keys(), True, 10 * RETENTION, RETENTION)
    assert not out.group


def test_a_group_never_seen_empty_does_not_expire():
    never_joined = GroupFacts("g", None, None, None)
    assert not expiring(never_joined, keys(), False, 10 * RETENTION, RETENTION).group


def test_a_topic_the_live_group_dropped_long_ago_loses_its_state_and_only_that():
    group = GroupFacts("g", ("orders",), 1_000, None)
    out = expiring(group, keys(), True, 1_000 + RETENTION + 1, RETENTION)
    assert not out.group
    assert out.partitions == (SharePartitionKey("g", B, 0),)
    assert out.topics == ("audit",)


def test_a_topic_dropped_recently_keeps_its_state():
    group = GroupFacts("g", ("orders",), 1_000, None)
    assert expiring(group, keys(), True, 1_000 + RETENTION, RETENTION).partitions == ()


def test_a_deleted_topic_is_left_to_reconcile():
    group = GroupFacts("g", ("orders",), 1_000, None)
    stored = {SharePartitionKey("g", B, 0): None}
    assert expiring(group, stored, True, 10 * RETENTION, RETENTION).partitions == ()
