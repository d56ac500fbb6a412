"""Redelivery back-off with unmodified librdkafka share consumers: a released record comes back
after a wait that grows with its delivery count, set as group configs over Kafka's admin API,
and the wait outlives a crash of the proxy (it is stored, not kept in memory)."""

from __future__ import annotations

import time
import uuid

import httpx
import pytest
from confluent_kafka import AcknowledgeType

from shareproxy.core import group_config as gc
from tests.support.cluster import LEASE_MS
from tests.support.consumers import poll_until, share_consumer
from tests.support.group_configs import alter_group_configs

# the proxy's clock and the test's are read at different moments: a wait is never shorter
# than configured, and not much longer (the lock sweeper wakes a waiting fetch within 50 ms)
EARLY_S = 0.005
LATE_S = 0.5


def release_and_commit(consumer, message) -> float:
    """Release ``message``; the moment before the proxy could have made it Available."""
    released_at = time.monotonic()
    consumer.acknowledge(message, AcknowledgeType.RELEASE)
    consumer.commit_sync()
    return released_at


@pytest.mark.long
def test_a_repeatedly_released_record_comes_back_after_a_growing_back_off(proxy, topic, produce):
    t = topic(1)
    produce(t, 1, partitions=1)
    p = proxy()
    group = f"g-{uuid.uuid4().hex[:6]}"
    alter_group_configs(
        p,
        group,
        {
            gc.BACKOFF_INITIAL: "400",
            gc.BACKOFF_MULTIPLIER: "2",
            gc.BACKOFF_MAX: "1600",
            gc.DELIVERY_COUNT_LIMIT: "6",
        },
    )
    shown = httpx.get(f"{p.admin_url}/v1/share-groups/{group}/config", timeout=30).json()
    assert shown["configs"][gc.BACKOFF_MULTIPLIER] | {"doc": ""} == {
        "value": "2.0",
        "source": "group",
        "type": "double",
        "doc": "",
        "min": None,  # unbounded
        "max": None,
    }
    c = share_consumer(p, group, mode="explicit")
    c.subscribe([t])
    try:
        waits: list[float] = []
        released_at = None
        for delivery in range(1, 7):
            got = poll_until(c, 1, 30)
            received = time.monotonic()
            assert [(m.offset(), m.delivery_count()) for m in got] == [(0, delivery)]
            if released_at is not None:
                waits.append(received - released_at)
            released_at = release_and_commit(c, got[0])
        assert poll_until(c, 1, 3) == []  # released on its last delivery: archived at once
    finally:
        c.close()
    expected = [0.4, 0.8, 1.6, 1.6, 1.6]  # 400 ms doubling per delivery, at most 1600 ms
    for n, (waited, want) in enumerate(zip(waits, expected, strict=True), start=2):
        assert want - EARLY_S <= waited <= want + LATE_S, (
            f"delivery {n} came {waited:.3f} s after the release, configured {want} s: {waits}"
        )


@pytest.mark.long
def test_the_back_off_outlives_a_crash_of_the_proxy(proxy, topic, produce):
    t = topic(1)
    produce(t, 1, partitions=1)
    p = proxy(node_lease_ms=LEASE_MS)  # restarted after a SIGKILL: waits for its lease
    group = f"g-{uuid.uuid4().hex[:6]}"
    alter_group_configs(p, group, {gc.BACKOFF_INITIAL: "6000"})
    c = share_consumer(p, group, mode="explicit")
    c.subscribe([t])
    got = poll_until(c, 1, 30)
    assert [m.delivery_count() for m in got] == [1]
    released_at = release_and_commit(c, got[0])
    c.close()
    p.kill()  # SIGKILL: nothing in memory survives
    p.start()
    again = share_consumer(p, group, mode="explicit")
    again.subscribe([t])
    try:
        got = poll_until(again, 1, 30)
        waited = time.monotonic() - released_at
        assert [(m.offset(), m.delivery_count()) for m in got] == [(0, 2)]
        again.acknowledge(got[0], AcknowledgeType.ACCEPT)
        again.commit_sync()
    finally:
        again.close()
    # the restart and the new member's join take a few seconds: the wait still held
    assert 6.0 - EARLY_S <= waited <= 6.0 + 3.0, f"redelivered {waited:.2f} s after the release"
