"""Share-group membership and assignment (KIP-932's coordinator rules)."""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable

from shareproxy.core.assignor import assign
from shareproxy.core.share_group import GroupState, HeartbeatError, ShareGroup

T1, T2 = uuid.UUID(int=1), uuid.UUID(int=2)
TOPICS = {"orders": (T1, 3), "audit": (T2, 1)}


def joined(group: ShareGroup, member: str, now: int = 0, topics=("orders",)):
    return group.heartbeat(member, 0, now, subscribed_topics=list(topics))


def test_join_gives_epoch_and_assignment_then_heartbeats_are_quiet():
    g = ShareGroup("g")
    g.update_topics(TOPICS)
    r = joined(g, "a")
    assert r.error is None and r.member_epoch >= 1
    assert r.assignment == {T1: (0, 1, 2)}
    again = g.heartbeat("a", r.member_epoch, 100)
    assert (again.error, again.member_epoch, again.assignment) == (None, r.member_epoch, None)
    assert g.state is GroupState.STABLE


def test_a_second_member_splits_partitions_and_the_first_moves_on_its_next_heartbeat():
    g = ShareGroup("g")
    g.update_topics(TOPICS)
    a = joined(g, "a")
    b = joined(g, "b")
    # a still holds its old epoch: it is not fenced, it is moved to the new one
    a2 = g.heartbeat("a", a.member_epoch, 10)
    assert a2.error is None and a2.member_epoch > a.member_epoch
    parts = sorted(a2.assignment[T1] + b.assignment[T1])
    assert parts == [0, 1, 2]


def test_more_members_than_partitions_share_them():
    g = ShareGroup("g")
    g.update_topics(TOPICS)
    results = {m: joined(g, m, topics=("audit",)) for m in ("a", "b", "c")}
    for m, r in results.items():
        r = g.heartbeat(m, r.member_epoch, 5)
        current = g.members[m].assignment
        assert current == {T2: (0,)}, m


def test_fencing_unknown_members_and_the_size_limit():
    g = ShareGroup("g", max_size=1)
    g.update_topics(TOPICS)
    a = joined(g, "a")
    assert g.heartbeat("a", a.member_epoch + 7, 1).error is HeartbeatError.FENCED_MEMBER_EPOCH
    assert g.heartbeat("zz", 3, 1).error is HeartbeatError.UNKNOWN_MEMBER_ID
    assert joined(g, "b").error is HeartbeatError.GROUP_MAX_SIZE_REACHED
    assert g.heartbeat("", 0, 1).error is HeartbeatError.INVALID_REQUEST


def test_leave_and_session_timeout_remove_members():
    g = ShareGroup("g")
    g.update_topics(TOPICS)
    joined(g, "a", now=0)
    b = joined(g, "b", now=0)
    g.heartbeat("b", b.member_epoch, 40_000)
    assert g.expire_members(now_ms=50_000, session_timeout_ms=45_000) == ["a"]
    assert g.heartbeat("b", g.members["b"].member_epoch, 50_001).error is None
    assert g.heartbeat("b", -1, 50_002).member_epoch == -1
    assert g.state is GroupState.EMPTY


def test_new_partitions_upstream_bump_the_group_epoch():
    g = ShareGroup("g")
    g.update_topics(TOPICS)
    a = joined(g, "a")
    before = g.group_epoch
    assert not g.update_topics(dict(TOPICS))  # unchanged metadata changes nothing
    assert g.update_topics({**TOPICS, "orders": (T1, 4)})
    assert g.group_epoch == before + 1
    r = g.heartbeat("a", a.member_epoch, 1)
    assert r.assignment == {T1: (0, 1, 2, 3)}


def test_subscription_change_reassigns():
    g = ShareGroup("g")
    g.update_topics(TOPICS)
    a = joined(g, "a")
    r = g.heartbeat("a", a.member_epoch, 1, subscribed_topics=["orders", "audit"])
    assert r.assignment == {T1: (0, 1, 2), T2: (0,)}


def test_assignor_covers_every_partition_and_every_member():
    subs = {f"m{i}": ["orders", "audit"] for i in range(5)}
    result = assign(subs, TOPICS)
    covered = {(t, p) for a in result.values() for t, ps in a.items() for p in ps}
    assert covered == {(T1, 0), (T1, 1), (T1, 2), (T2, 0)}
    assert all(result[m] for m in subs)


def walk(g: ShareGroup, seed: int, check: Callable[[], None]) -> None:
    """400 random steps through joins, rejoins, resubscriptions, heartbeats, leaves, expiry and
    new partitions (of the topics "orders" and "audit"), ``check`` after each."""
    rng = random.Random(seed)
    choices = [("orders",), ("audit",), ("orders", "audit"), ("absent",)]
    now = 0
    for step in range(400):
        now += 100
        ids = list(g.members)
        roll = rng.random()
        if roll < 0.25 or not ids:
            joined(g, f"m{step}", now, rng.choice(choices))
        elif roll < 0.35:
            g.heartbeat(rng.choice(ids), -1, now)
        elif roll < 0.4:
            g.expire_members(now, rng.choice([50, 10_000]))
        elif roll < 0.42:
            g.update_topics({"orders": (T1, rng.choice([12, 16])), "audit": (T2, 3)})
        elif roll < 0.47:
            joined(g, rng.choice(ids), now, rng.choice(choices))  # a rejoin
        elif roll < 0.52:
            m = rng.choice(ids)
            g.heartbeat(m, g.members[m].member_epoch, now, subscribed_topics=rng.choice(choices))
        else:
            m = rng.choice(ids)
            g.heartbeat(m, g.members[m].member_epoch, now)
        check()


def test_members_on_counts_what_each_member_has_or_is_to_have():
    """The kept count equals a count over every member's target and assignment, through every
    change a group goes through."""
    g = ShareGroup("g", max_size=50)
    g.update_topics({"orders": (T1, 12), "audit": (T2, 3)})

    def counted(tid: uuid.UUID, p: int) -> int:
        return sum(
            1
            for m in g.members.values()
            if p in m.target.get(tid, ()) or p in m.assignment.get(tid, ())
        )

    def check() -> None:
        for tid, n in ((T1, 16), (T2, 3)):
            for p in range(n):
                assert g.members_on(tid, p) == counted(tid, p)

    walk(g, 7, check)


def test_the_subscribed_names_kept_are_those_of_the_members_now():
    """The group's subscribed topic names, kept with every change, equal the union of its
    members' subscriptions."""
    g = ShareGroup("g", max_size=50)
    g.update_topics({"orders": (T1, 4), "audit": (T2, 1)})

    def check() -> None:
        walked = {t for m in g.members.values() for t in m.subscribed_topics}
        assert g.subscribed_topic_names() == walked

    walk(g, 11, check)


def test_a_heartbeat_with_the_previous_epoch_is_accepted_and_hears_its_assignment_again():
    # the answer that moved "a" to its new epoch was lost: it heartbeats with the one before
    g = ShareGroup("g")
    g.update_topics(TOPICS)
    a = joined(g, "a")
    joined(g, "b")
    moved = g.heartbeat("a", a.member_epoch, 10)
    assert moved.member_epoch > a.member_epoch
    again = g.heartbeat("a", a.member_epoch, 20)
    assert (again.error, again.member_epoch) == (None, moved.member_epoch)
    assert again.assignment == moved.assignment  # sent again, as it may not have arrived
    joined(g, "c")
    latest = g.heartbeat("a", moved.member_epoch, 30)  # moved once more: two epochs behind now
    assert latest.member_epoch > moved.member_epoch
    older = g.heartbeat("a", a.member_epoch, 40)
    assert older.error is HeartbeatError.FENCED_MEMBER_EPOCH


def test_a_leave_of_a_member_the_group_does_not_have_is_unknown_member_id():
    g = ShareGroup("g")
    g.update_topics(TOPICS)
    joined(g, "a")
    assert g.heartbeat("zz", -1, 1).error is HeartbeatError.UNKNOWN_MEMBER_ID
    assert set(g.members) == {"a"}


def test_an_empty_rack_id_and_an_epoch_below_minus_one_are_invalid_requests():
    g = ShareGroup("g")
    g.update_topics(TOPICS)
    empty_rack = g.heartbeat("a", 0, 1, subscribed_topics=["orders"], rack_id="")
    assert (empty_rack.error, empty_rack.message) == (
        HeartbeatError.INVALID_REQUEST,
        "RackId can't be empty.",
    )
    below = g.heartbeat("a", -2, 1)
    assert (below.error, below.message) == (
        HeartbeatError.INVALID_REQUEST,
        "MemberEpoch is invalid.",
    )
    assert g.members == {}


def test_every_join_names_its_topics_a_known_members_rejoin_too():
    """Kafka checks the request before the group: SubscribedTopicNames set at epoch 0."""
    g = ShareGroup("g")
    g.update_topics(TOPICS)
    joined = g.heartbeat("a", 0, 1, subscribed_topics=["orders"])
    assert joined.error is None
    for bare in (None, []):
        again = g.heartbeat("a", 0, 2, subscribed_topics=bare)
        assert (again.error, again.message) == (
            HeartbeatError.INVALID_REQUEST,
            "SubscribedTopicNames must be set in first request.",
        )
    assert list(g.members) == ["a"]


def test_a_full_heartbeat_hears_its_assignment_even_unchanged():
    """Kafka's shareGroupHeartbeat answers the assignment to a join, to a request naming its
    topics (a client sends one after losing track) and when it changed; not otherwise."""
    g = ShareGroup("g")
    g.update_topics(TOPICS)
    joined = g.heartbeat("a", 0, 1, subscribed_topics=["orders"])
    assert joined.assignment
    quiet = g.heartbeat("a", joined.member_epoch, 2)
    assert quiet.assignment is None
    full = g.heartbeat("a", joined.member_epoch, 3, subscribed_topics=["orders"])
    assert full.assignment == joined.assignment
