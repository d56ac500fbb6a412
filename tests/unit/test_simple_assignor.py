"""Kafka's ``simple`` share-group assignor: every partition shared by the same number of
members, members' loads within one, kept where that holds; one pool of partitions when every
member subscribes to the same topics, topic by topic when they differ."""

from __future__ import annotations

import uuid

from hypothesis import given
from hypothesis import strategies as st

from shareproxy.core import assignor
from shareproxy.core.simple_assignor import assign

T = uuid.UUID(int=1)
U = uuid.UUID(int=2)


def sharers(result: dict, topic: uuid.UUID, count: int) -> list[int]:
    return [sum(1 for a in result.values() if p in a.get(topic, ())) for p in range(count)]


def test_four_members_on_three_partitions_each_partition_two_some_members_two():
    result = assign({m: ["t"] for m in "abcd"}, {"t": (T, 3)})
    assert sharers(result, T, 3) == [2, 2, 2]  # ceil(4 / 3) members on each
    assert sorted(len(a[T]) for a in result.values()) == [1, 1, 2, 2]


def test_fewer_members_than_partitions_each_partition_once_loads_within_one():
    result = assign({"a": ["t"], "b": ["t"]}, {"t": (T, 5)})
    assert sharers(result, T, 5) == [1] * 5
    assert sorted(len(a[T]) for a in result.values()) == [2, 3]


def test_a_joining_member_leaves_the_others_what_balance_allows():
    before = assign({m: ["t"] for m in "abc"}, {"t": (T, 6)})
    after = assign({m: ["t"] for m in "abcd"}, {"t": (T, 6)}, before)
    for m in "abc":
        assert set(after[m][T]) <= set(before[m][T])  # nothing moves between old members
    assert sorted(len(a[T]) for a in after.values()) == [1, 1, 2, 2]


def test_members_of_different_subscriptions_are_assigned_topic_by_topic():
    result = assign({"a": ["t"], "b": ["t", "u"]}, {"t": (T, 2), "u": (U, 3)})
    assert U not in result["a"]
    assert result["b"][U] == (0, 1, 2)
    assert sharers(result, T, 2) == [1, 1]


def test_both_assignors_are_offered_by_name_the_proxys_own_by_default():
    assert set(assignor.ASSIGNORS) == {"sticky-balanced", "simple"}
    assert assignor.DEFAULT == "sticky-balanced"


@given(
    members=st.sets(st.text("abcdefgh", min_size=1, max_size=3), min_size=1, max_size=9),
    count=st.integers(1, 12),
    seed=st.randoms(use_true_random=False),
)
def test_every_partition_has_the_same_sharers_and_loads_stay_within_one(members, count, seed):
    names = sorted(members)
    subs = {m: ["t"] for m in names}
    previous = {
        m: {T: tuple(sorted(seed.sample(range(count + 2), seed.randint(0, count + 2))))}
        for m in names
    }
    result = assign(subs, {"t": (T, count)}, previous)
    assert result == assign(subs, {"t": (T, count)}, previous)  # deterministic
    sharing = -(-len(names) // count)
    assert sharers(result, T, count) == [sharing] * count
    sizes = [len(result[m].get(T, ())) for m in names]
    assert min(sizes) >= 1 and max(sizes) - min(sizes) <= 1
