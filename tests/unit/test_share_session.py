"""Share sessions (KIP-932): epochs order a member's requests, the cache is bounded per client
and in all, and idle sessions are evicted."""

from __future__ import annotations

import pytest

from shareproxy.core.errors import ErrorCode, ShareError
from shareproxy.core.share_session import (
    CLOSE_EPOCH,
    OPEN_EPOCH,
    ShareSessionCache,
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
