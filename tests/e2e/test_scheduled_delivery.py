"""Scheduled delivery with an unmodified librdkafka share consumer and an unmodified producer:
records naming their delivery time in an ``x-deliver-at`` header come no earlier than that
time and soon after it, the others at once, and the schedule outlives a SIGKILL of the
proxy (the times are read again from the log)."""

from __future__ import annotations

import time
import uuid
from datetime import datetime

import httpx
import pytest
from confluent_kafka import AcknowledgeType, Producer

from shareproxy.core import group_config as gc
from tests.support.cluster import LEASE_MS
from tests.support.consumers import poll_until, share_consumer
from tests.support.group_configs import alter_group_configs
from tests.support.metrics import scrape, value

# the producer's clock and the proxy's are this machine's: a record is never early, and comes
# soon after its time to a consumer that keeps asking (the bench measures how soon: here the
# margin is for a loaded test machine)
LATE_S = 3.0


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def produce_scheduled(bootstrap: str, topic: str, times: list[bytes | None]) -> None:
    """One record per entry, in order, to partition 0: with that x-deliver-at value, or none."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50})
    for i, at in enumerate(times):
        headers = [("x-deliver-at", at)] if at is not None else []
        producer.produce(topic, value=b"r%d" % i, partition=0, headers=headers)
    assert producer.flush(30) == 0


def accepted(consumer, want: int, timeout: float) -> list[tuple[int, float]]:
    """(offset, the wall time it arrived) of ``want`` records, each accepted at once."""
    got = []
    for m in poll_until(consumer, want, timeout):
        got.append((m.offset(), time.time()))
        consumer.acknowledge(m, AcknowledgeType.ACCEPT)
    consumer.commit_sync()
    return got


@pytest.mark.long
def test_records_come_at_their_time_and_the_rest_at_once_across_a_proxy_kill(broker, proxy, topic):
    t = topic(1)
    p = proxy(node_lease_ms=LEASE_MS)  # restarted after a SIGKILL: waits for its lease
    group = f"g-{uuid.uuid4().hex[:6]}"
    alter_group_configs(p, group, {gc.DELIVER_AT_HEADER: "true", gc.AUTO_OFFSET_RESET: "earliest"})
    start = now_ms()
    soon, later = start + 6_000, start + 30_000  # later: past the restart
    produce_scheduled(
        broker.bootstrap, t, [None, b"%d" % soon, None, b"%d" % later, None, b"tomorrow"]
    )
    c = share_consumer(p, group, mode="explicit")
    c.subscribe([t])
    try:
        first = accepted(c, 4, 30)
        assert sorted(o for o, _ in first) == [0, 2, 4, 5]  # "tomorrow" is not a time: at once
        assert all(at * 1000 < soon for _, at in first)
        shown = httpx.get(f"{p.admin_url}/v1/share-groups/{group}/offsets", timeout=30).json()
        [part] = shown["partitions"]
        assert (part["lag"], part["waiting"]) == (0, 2)  # owed nothing until offset 1's time
        assert datetime.fromisoformat(part["next_delivery_at"]).timestamp() * 1000 == soon
        path = f"/v1/share-groups/{group}/partitions/{t}/0/records"
        runs = httpx.get(p.admin_url + path, timeout=30).json()["records"]
        assert [(r["first_offset"], r["state"]) for r in runs if r["deliverable_at"]] == [
            (1, "Available"),
            (3, "Available"),
        ]
        [(offset, at)] = accepted(c, 1, 30)
        assert offset == 1
        assert soon / 1000 <= at <= soon / 1000 + LATE_S, at - soon / 1000
    finally:
        c.close()
    samples = scrape(p)
    assert value(samples, "shareproxy_delivery_lateness_seconds_count", group=group) == 1
    assert value(samples, "shareproxy_delivery_times_not_read_total", group=group) >= 1
    p.kill()  # SIGKILL: offset 3's time was never written, it is read again from the log
    p.start()
    again = share_consumer(p, group, mode="explicit")
    again.subscribe([t])
    try:
        [(offset, at)] = accepted(again, 1, 40)
        assert offset == 3
        assert later / 1000 <= at <= later / 1000 + LATE_S, at - later / 1000
    finally:
        again.close()
