"""The heartbeat interval a share group answers with while its target assignment settles."""

from __future__ import annotations

import uuid

from shareproxy.core.share_group import SETTLING_MIN_MS, SETTLING_PER_MEMBER_MS, ShareGroup

T1 = uuid.UUID(int=1)
INTERVAL = 5_000  # group.share.heartbeat.interval.ms


def beat(group: ShareGroup, member: str, epoch: int, now: int, **kw):
    return group.heartbeat(member, epoch, now, heartbeat_interval_ms=INTERVAL, **kw)


def join(group: ShareGroup, member: str, now: int):
    return beat(group, member, 0, now, subscribed_topics=["orders"])


def test_a_member_that_heard_its_assignment_before_others_joined_is_asked_back_soon():
    g = ShareGroup("g")
    g.update_topics({"orders": (T1, 6)})
    a = join(g, "a", 0)
    assert a.assignment == {T1: (0, 1, 2, 3, 4, 5)}
    assert a.heartbeat_interval_ms == SETTLING_MIN_MS  # the group has just moved targets
    b = join(g, "b", 30)
    assert b.heartbeat_interval_ms == SETTLING_MIN_MS
    # a comes back after the short interval, not after 5 s, and moves to its half
    a2 = beat(g, "a", a.member_epoch, 30 + SETTLING_MIN_MS)
    assert a2.assignment is not None and len(a2.assignment[T1]) == 3


def test_a_settled_group_answers_with_the_configured_interval():
    g = ShareGroup("g")
    g.update_topics({"orders": (T1, 6)})
    a = join(g, "a", 0)
    quiet = beat(g, "a", a.member_epoch, INTERVAL)
    assert quiet.assignment is None and quiet.heartbeat_interval_ms == INTERVAL
    # a heartbeat that moves nobody's target does not restart the settling
    later = beat(g, "a", a.member_epoch, INTERVAL + 100)
    assert later.heartbeat_interval_ms == INTERVAL


def test_a_member_leaving_or_timing_out_settles_the_rest_again():
    g = ShareGroup("g")
    g.update_topics({"orders": (T1, 4)})
    a = join(g, "a", 0)
    b = join(g, "b", 0)
    a = beat(g, "a", a.member_epoch, 10_000)
    assert a.heartbeat_interval_ms == INTERVAL
    beat(g, "b", b.member_epoch, 10_000)
    assert beat(g, "b", -1, 10_100).member_epoch == -1  # b leaves
    a2 = beat(g, "a", a.member_epoch, 10_200)
    assert a2.assignment == {T1: (0, 1, 2, 3)} and a2.heartbeat_interval_ms == SETTLING_MIN_MS
    c = join(g, "c", 20_000)
    assert g.expire_members(20_000 + 45_000, 45_000) == ["a"]  # a fell silent
    assert beat(g, "c", c.member_epoch, 65_001).heartbeat_interval_ms == SETTLING_MIN_MS


def test_big_groups_settle_at_a_bounded_heartbeat_rate():
    g = ShareGroup("g", max_size=1000)
    g.update_topics({"orders": (T1, 1000)})
    for i in range(40):
        r = join(g, f"m{i}", i)
    assert r.heartbeat_interval_ms == 40 * SETTLING_PER_MEMBER_MS  # 2 s: 20 a second at most
    for i in range(40, 1000):
        r = join(g, f"m{i}", i)
    assert r.heartbeat_interval_ms == INTERVAL  # never longer than the configured interval


def test_without_an_interval_given_the_answer_leaves_it_to_the_caller():
    g = ShareGroup("g")
    g.update_topics({"orders": (T1, 1)})
    assert g.heartbeat("a", 0, 0, subscribed_topics=["orders"]).heartbeat_interval_ms is None
