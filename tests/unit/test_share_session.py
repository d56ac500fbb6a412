"""Share sessions (KIP-932): epochs order a member's requests, the cache is bounded per client
and in all, sessions no member owns give way to those of members, and idle sessions are
evicted."""

from __future__ import annotations

import pytest

from shareproxy.core.errors import ErrorCode, ShareError
from shareproxy.core.share_session import (
    CLOSE_EPOCH,
    OPEN_EPOCH,
    ShareSessionCache,
    Standing,
    next_epoch,
    valid_member_id,
)

ALICE = ("User:alice", "10.0.0.1")
MALLORY = ("User:mallory", "10.0.0.9")


def key(member: str, group: str = "g") -> tuple[str, str, int]:
    return (group, member, 1)


def refused(code: ErrorCode, call, *args, **kwargs) -> str:
    with pytest.raises(ShareError) as info:
        call(*args, **kwargs)
    assert info.value.code == code
    return info.value.message


def test_epoch_zero_opens_then_each_request_carries_the_next_epoch():
    cache = ShareSessionCache()
    session = cache.begin(key("m"), OPEN_EPOCH, 0, ALICE)
    assert session.epoch == 1
    assert cache.begin(key("m"), 1, 1, ALICE) is session
    assert session.epoch == 2
    refused(ErrorCode.INVALID_SHARE_SESSION_EPOCH, cache.begin, key("m"), 1, 2, ALICE)
    refused(ErrorCode.INVALID_SHARE_SESSION_EPOCH, cache.begin, key("m"), 5, 2, ALICE)
    assert cache.begin(key("m"), 2, 3, ALICE).epoch == 3


def test_epochs_wrap_to_one_not_zero():
    assert next_epoch(2**31 - 1) == 1
    assert next_epoch(0) == 1


def test_a_session_not_opened_is_not_found():
    cache = ShareSessionCache()
    refused(ErrorCode.SHARE_SESSION_NOT_FOUND, cache.begin, key("m"), 1, 0, ALICE)
    refused(ErrorCode.SHARE_SESSION_NOT_FOUND, cache.begin, key("m"), CLOSE_EPOCH, 0, ALICE)


def test_share_acknowledge_cannot_open_a_session():
    cache = ShareSessionCache()
    refused(
        ErrorCode.INVALID_SHARE_SESSION_EPOCH,
        cache.begin,
        key("m"),
        OPEN_EPOCH,
        0,
        ALICE,
        acknowledging_only=True,
    )
    assert len(cache) == 0


def test_close_epoch_returns_the_session_for_its_last_acknowledgements():
    cache = ShareSessionCache()
    session = cache.begin(key("m"), OPEN_EPOCH, 0, ALICE)
    assert cache.begin(key("m"), CLOSE_EPOCH, 1, ALICE) is session
    assert cache.close(key("m")) is session
    assert len(cache) == 0


def test_the_limit_of_the_whole_proxy():
    cache = ShareSessionCache(max_sessions=2, max_per_client=2)
    cache.begin(key("a"), OPEN_EPOCH, 0, ALICE)
    cache.begin(key("b"), OPEN_EPOCH, 0, MALLORY)
    message = refused(
        ErrorCode.SHARE_SESSION_LIMIT_REACHED, cache.begin, key("c"), OPEN_EPOCH, 0, ALICE
    )
    assert "limit of 2 share sessions" in message
    cache.begin(key("a"), OPEN_EPOCH, 1, ALICE)  # reopening one's own session takes no more
    cache.close(key("b"))
    cache.begin(key("c"), OPEN_EPOCH, 2, ALICE)


def test_one_client_cannot_take_every_session():
    cache = ShareSessionCache(max_sessions=10, max_per_client=3)
    for member in ("m1", "m2", "m3"):
        cache.begin(key(member, group=f"g-{member}"), OPEN_EPOCH, 0, MALLORY)
    message = refused(
        ErrorCode.SHARE_SESSION_LIMIT_REACHED, cache.begin, key("m4"), OPEN_EPOCH, 0, MALLORY
    )
    assert "User:mallory from 10.0.0.9" in message
    cache.begin(key("alice"), OPEN_EPOCH, 0, ALICE)  # others still get theirs
    cache.close(key("m1", group="g-m1"))
    cache.begin(key("m4"), OPEN_EPOCH, 0, MALLORY)


def test_idle_sessions_are_evicted_after_their_groups_timeout():
    cache = ShareSessionCache()
    cache.begin(key("busy"), OPEN_EPOCH, 0, ALICE)
    cache.begin(key("idle"), OPEN_EPOCH, 0, ALICE)
    cache.begin(key("other", group="slow"), OPEN_EPOCH, 0, ALICE)
    cache.begin(key("busy"), 1, 40_000, ALICE)
    timeouts = {"g": 45_000, "slow": 90_000}
    assert cache.evict_idle(45_000, timeouts.__getitem__) == []
    evicted = cache.evict_idle(45_001, timeouts.__getitem__)
    assert [s.key for s in evicted] == [key("idle")]
    assert cache.get(key("busy")) is not None and cache.get(key("other", "slow")) is not None
    refused(ErrorCode.SHARE_SESSION_NOT_FOUND, cache.begin, key("idle"), 1, 45_002, ALICE)


def test_of_member_finds_a_members_sessions():
    cache = ShareSessionCache()
    cache.begin(("g", "m", 1), OPEN_EPOCH, 0, ALICE)
    cache.begin(("g", "m", 2), OPEN_EPOCH, 0, ALICE)
    cache.begin(("g", "n", 1), OPEN_EPOCH, 0, ALICE)
    assert {s.key for s in cache.of_member("g", "m")} == {("g", "m", 1), ("g", "m", 2)}


def test_a_member_id_is_checked_for_form_only_as_kafka_checks_it():
    """Set and no longer than a UUID's text: KafkaApis.isMemberIdValid, nothing more."""
    assert valid_member_id("a") and valid_member_id("x" * 36)
    assert not valid_member_id("") and not valid_member_id("x" * 37)


def _members(*member_ids: str, elsewhere: str = "far"):
    """A coordinator's view: these member ids are live members of every group coordinated here;
    the group ``elsewhere`` is coordinated by another node."""

    def standing(group_id: str, member_id: str) -> Standing:
        if group_id == elsewhere:
            return Standing.UNVERIFIED
        return Standing.MEMBER if member_id in member_ids else Standing.STRANGER

    return standing


def test_made_up_member_ids_of_one_client_give_way_to_a_member_of_that_client():
    """One principal and host (a plaintext listener, one NAT) holds its limit in made-up member
    ids: a member of another group still gets a session, the least recently used stranger
    making room, and the strangers themselves are refused."""
    gave_way: list[tuple[str, tuple[str, str, int]]] = []
    cache = ShareSessionCache(
        max_sessions=10,
        max_per_client=3,
        standing=_members("real"),
        gave_way=lambda session, newcomer: gave_way.append((session.key[1], newcomer)),
    )
    for at, member in enumerate(("x1", "x2", "x3")):
        cache.begin(key(member, group="flood"), OPEN_EPOCH, at, ALICE)
    cache.begin(key("x1", group="flood"), 1, 10, ALICE)  # x2 is now the least recently used
    x4 = key("x4", group="flood")
    message = refused(ErrorCode.SHARE_SESSION_LIMIT_REACHED, cache.begin, x4, OPEN_EPOCH, 11, ALICE)
    assert "User:alice from 10.0.0.1 holds its limit of 3" in message
    assert cache.begin(key("real", group="real-g"), OPEN_EPOCH, 12, ALICE).epoch == 1
    assert gave_way == [("x2", key("real", group="real-g"))]
    assert cache.get(key("x2", "flood")) is None and len(cache) == 3
    refused(ErrorCode.SHARE_SESSION_NOT_FOUND, cache.begin, key("x2", "flood"), 1, 13, ALICE)


def test_strangers_filling_the_whole_proxy_give_way_to_members_of_any_client():
    cache = ShareSessionCache(max_sessions=4, max_per_client=2, standing=_members("real"))
    for client, members in ((MALLORY, ("m1", "m2")), (("User:eve", "10.0.0.8"), ("e1", "e2"))):
        for member in members:
            cache.begin(key(member, group="flood"), OPEN_EPOCH, 0, client)
    message = refused(
        ErrorCode.SHARE_SESSION_LIMIT_REACHED, cache.begin, key("s", "flood"), OPEN_EPOCH, 1, ALICE
    )
    assert "the proxy holds its limit of 4" in message
    cache.begin(key("real"), OPEN_EPOCH, 1, ALICE)
    assert len(cache) == 4


def test_members_never_give_way_and_strangers_go_before_unverified_sessions():
    """A member of a group coordinated elsewhere cannot be told from a stranger here: it gives
    way to a member, after every stranger, and cannot take another unverified one's place."""
    cache = ShareSessionCache(max_sessions=3, standing=_members("real", "other", "third"))
    cache.begin(key("u", group="far"), OPEN_EPOCH, 0, ALICE)  # the oldest, but unverified
    cache.begin(key("s"), OPEN_EPOCH, 1, ALICE)
    cache.begin(key("real"), OPEN_EPOCH, 2, ALICE)
    cache.begin(key("other"), OPEN_EPOCH, 3, ALICE)  # the stranger gives way first
    assert cache.get(key("s")) is None and cache.get(key("u", "far")) is not None
    for newcomer in (key("u2", group="far"), key("t")):  # nothing stands below them
        message = refused(
            ErrorCode.SHARE_SESSION_LIMIT_REACHED, cache.begin, newcomer, OPEN_EPOCH, 4, ALICE
        )
        assert "limit of 3" in message
    cache.begin(key("third"), OPEN_EPOCH, 5, ALICE)  # then the unverified one
    assert cache.get(key("u", "far")) is None
    assert {k[1] for k in cache.sessions} == {"real", "other", "third"}
    refused(ErrorCode.SHARE_SESSION_LIMIT_REACHED, cache.begin, key("t"), OPEN_EPOCH, 6, ALICE)


def test_a_session_ends_with_the_connection_that_opened_it():
    cache = ShareSessionCache()
    a = cache.begin(key("a"), OPEN_EPOCH, 0, ALICE, connection=7)
    b = cache.begin(key("b"), OPEN_EPOCH, 0, ALICE, connection=7)
    other = cache.begin(key("c"), OPEN_EPOCH, 0, ALICE, connection=8)
    cache.begin(key("a"), 1, 1, ALICE, connection=9)  # later requests may come on any connection
    assert sorted(s.key for s in cache.close_connection(7)) == sorted([a.key, b.key])
    assert cache.get(key("a")) is None and cache.get(key("b")) is None
    assert cache.get(key("c")) is other
    assert cache.close_connection(7) == []  # ended once
    refused(ErrorCode.SHARE_SESSION_NOT_FOUND, cache.begin, key("a"), 2, 2, ALICE)


def test_a_session_opened_again_on_a_new_connection_outlives_the_old_connection():
    # the client reopened its session (epoch 0) on a new connection before the old one's close
    # was seen: that close must not end the new session (KAFKA-19950)
    cache = ShareSessionCache()
    cache.begin(key("m"), OPEN_EPOCH, 0, ALICE, connection=7)
    reopened = cache.begin(key("m"), OPEN_EPOCH, 1, ALICE, connection=8)
    assert cache.close_connection(7) == []
    assert cache.get(key("m")) is reopened
    assert cache.close_connection(8) == [reopened]


def test_a_session_closed_or_evicted_is_no_longer_its_connections():
    cache = ShareSessionCache()
    cache.begin(key("closed"), OPEN_EPOCH, 0, ALICE, connection=7)
    cache.begin(key("idle"), OPEN_EPOCH, 0, ALICE, connection=7)
    cache.close(key("closed"))
    assert [s.key for s in cache.evict_idle(100, lambda group: 10)] == [key("idle")]
    assert cache.close_connection(7) == []
    assert len(cache) == 0
