"""Placement by rendezvous hashing: every node agrees from the live set alone, the load is
spread, and a node joining or leaving moves only what it wins or held."""

from __future__ import annotations

from collections import Counter
from uuid import UUID

import pytest

from shareproxy.core.placement import Placement, group_key, owner, partition_key

TOPICS = [UUID(int=i * 7919 + 1) for i in range(20)]
KEYS = [partition_key(t, p) for t in TOPICS for p in range(30)]  # 600 partitions


def test_the_owner_is_one_of_the_live_nodes_and_does_not_depend_on_their_order():
    for key in KEYS[:50]:
        assert owner(key, [1, 2, 3]) == owner(key, [3, 1, 2]) in {1, 2, 3}


def test_no_live_node_owns_nothing():
    assert owner(group_key("orders"), []) is None


def test_partitions_are_spread_over_the_nodes():
    counts = Counter(owner(k, [1, 2, 3]) for k in KEYS)
    assert set(counts) == {1, 2, 3}
    assert all(150 <= n <= 250 for n in counts.values()), counts  # 200 each on average


def test_a_node_leaving_moves_only_the_partitions_it_led():
    before = {k: owner(k, [1, 2, 3]) for k in KEYS}
    after = {k: owner(k, [1, 3]) for k in KEYS}
    moved = {k for k in KEYS if before[k] != after[k]}
    assert moved == {k for k in KEYS if before[k] == 2}


def test_a_node_joining_takes_about_its_share_and_only_for_itself():
    before = {k: owner(k, [1, 2, 3]) for k in KEYS}
    after = {k: owner(k, [1, 2, 3, 4]) for k in KEYS}
    moved = [k for k in KEYS if before[k] != after[k]]
    assert all(after[k] == 4 for k in moved)
    assert 100 <= len(moved) <= 200  # a quarter of 600 on average


def test_groups_and_partitions_are_placed_independently():
    assert group_key("x") != partition_key(UUID(int=0), 0)
    assert Counter(owner(group_key(f"g{i}"), [1, 2]) for i in range(400)).keys() == {1, 2}


def test_a_placement_answers_as_the_rule_does_and_one_node_owns_everything():
    placement = Placement([3, 1, 2], generation=7)
    assert placement.nodes == (1, 2, 3) and placement.generation == 7
    for key in KEYS[:50]:
        assert placement.owner(key) == owner(key, [1, 2, 3])
    tid = TOPICS[0]
    assert placement.partition_leader(tid, 4) == owner(partition_key(tid, 4), [1, 2, 3])
    assert placement.group_coordinator("g") == owner(group_key("g"), [1, 2, 3])
    alone = Placement([5])
    assert {alone.partition_leader(t, 0) for t in TOPICS} == {5}
    assert alone.group_coordinator("anything") == 5


def test_a_placement_needs_a_node_and_compares_by_nodes_and_generation():
    with pytest.raises(ValueError):
        Placement([])
    assert Placement([1, 2], 3) == Placement([2, 1], 3) != Placement([1, 2], 4)
