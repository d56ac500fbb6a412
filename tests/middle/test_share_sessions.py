"""Share sessions through the runtime, on a node that coordinates its groups: the cache's
limits, and who gives way when it is full (a session of a member id its group does not have,
before any member's)."""

from __future__ import annotations

import asyncio

from shareproxy.core.errors import ErrorCode
from tests.support.middle import MiddleRuntime, on_middle_runtime
from tests.support.share_calls import GROUP, fetch, share_fetch


async def joined(runtime: MiddleRuntime, member_id: str, topic: str) -> None:
    result = await runtime.coordinator.heartbeat(
        GROUP, member_id, 0, subscribed=[topic], rack_id=None, client_id="c", client_host="h"
    )
    assert result.error is None


def refused(fetched: object) -> ErrorCode | None:
    refusal = getattr(fetched, "refusal", None)
    return None if refusal is None else refusal.code


@on_middle_runtime(coordinates=True, max_share_sessions_per_client=3)
async def test_a_full_client_limit_gives_way_to_a_member_not_to_a_stranger(
    runtime: MiddleRuntime,
):
    t = runtime.topic()
    runtime.produce(t, 10)
    tp = await runtime.partition(t)
    for stranger in ("s1", "s2", "s3"):  # member ids the group does not have: all the room
        assert refused(await share_fetch(runtime, stranger, tp, wait_ms=0)) is None
    # a fourth stranger from the same client finds no room and no one of lower standing
    fourth = await share_fetch(runtime, "s4", tp, wait_ms=0)
    assert refused(fourth) == ErrorCode.SHARE_SESSION_LIMIT_REACHED
    await joined(runtime, "m1", t)
    member = await share_fetch(runtime, "m1", tp, wait_ms=0)
    assert refused(member) is None  # the least recently used stranger gave way
    gone = await share_fetch(runtime, "s1", tp, wait_ms=0, epoch=1)
    assert refused(gone) == ErrorCode.SHARE_SESSION_NOT_FOUND
    kept = await share_fetch(runtime, "s2", tp, wait_ms=0, epoch=1)
    assert refused(kept) is None
    # a client elsewhere has room of its own
    other = await share_fetch(runtime, "s5", tp, wait_ms=0, host="10.0.0.2")
    assert refused(other) is None


@on_middle_runtime(coordinates=True, group_share_max_share_sessions=2)
async def test_the_proxy_limit_never_evicts_a_member(runtime: MiddleRuntime):
    t = runtime.topic()
    tp = await runtime.partition(t)
    await joined(runtime, "m1", t)
    await joined(runtime, "m2", t)
    assert refused(await share_fetch(runtime, "m1", tp, wait_ms=0)) is None
    assert refused(await share_fetch(runtime, "m2", tp, wait_ms=0, host="10.0.0.2")) is None
    stranger = await share_fetch(runtime, "s1", tp, wait_ms=0, host="10.0.0.3")
    assert refused(stranger) == ErrorCode.SHARE_SESSION_LIMIT_REACHED
    for member, host in (("m1", "127.0.0.1"), ("m2", "10.0.0.2")):
        assert (
            refused(await share_fetch(runtime, member, tp, wait_ms=0, epoch=1, host=host)) is None
        )


@on_middle_runtime
async def test_a_closed_connection_ends_its_session_and_its_records_come_back_at_once(
    runtime: MiddleRuntime,
):
    t = runtime.topic()
    runtime.produce(t, 10)
    tp = await runtime.partition(t)
    assert await fetch(runtime, "crashed", tp, connection=7) == [(0, 9, 1)]
    await runtime.consumers.connection_closed(7)  # its process was killed: the socket closed
    # on the virtual clock no lock has expired: the records were released, counts kept
    assert await fetch(runtime, "other", tp, wait_ms=0, connection=8) == [(0, 9, 2)]
    gone = await share_fetch(runtime, "crashed", tp, wait_ms=0, epoch=1, connection=9)
    assert refused(gone) == ErrorCode.SHARE_SESSION_NOT_FOUND


@on_middle_runtime
async def test_a_session_opened_again_elsewhere_keeps_its_records_when_the_old_connection_closes(
    runtime: MiddleRuntime,
):
    t = runtime.topic()
    runtime.produce(t, 10)
    tp = await runtime.partition(t)
    assert await fetch(runtime, "m", tp, connection=7) == [(0, 9, 1)]
    # the client reconnected and opened its session again before the old connection's close
    # reached the proxy: that close must not end the new session nor release what it holds
    await fetch(runtime, "m", tp, wait_ms=0, connection=8)
    await runtime.consumers.connection_closed(7)
    assert await fetch(runtime, "other", tp, wait_ms=0, connection=9) == []
    await runtime.consumers.connection_closed(8)
    assert await fetch(runtime, "other", tp, wait_ms=0, epoch=1, connection=9) == [(0, 9, 2)]


@on_middle_runtime(coordinates=True)
async def test_a_member_that_leaves_keeps_its_sessions_records_until_the_session_ends(
    runtime: MiddleRuntime,
):
    """As on Kafka, a leave releases nothing: the client sends its last acknowledgements after
    it, and only the session's end (or the connection's, or the locks') frees what it holds."""
    t = runtime.topic()
    runtime.produce(t, 10)
    tp = await runtime.partition(t)

    async def heartbeat(epoch: int) -> int:
        answer = await runtime.coordinator.heartbeat(
            GROUP,
            "m",
            epoch,
            subscribed=[t] if epoch == 0 else None,
            rack_id=None,
            client_id="c",
            client_host="h",
        )
        assert answer.error is None, answer
        return answer.member_epoch

    await heartbeat(0)
    assert await fetch(runtime, "m", tp, connection=7) == [(0, 9, 1)]
    await heartbeat(-1)
    await asyncio.sleep(10)  # well within the 30 s lock, past any grace
    assert await fetch(runtime, "other", tp, wait_ms=0, connection=8) == []
    await runtime.consumers.connection_closed(7)
    assert await fetch(runtime, "other", tp, wait_ms=0, epoch=1, connection=8) == [(0, 9, 2)]
