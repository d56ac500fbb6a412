"""Scheduled delivery with an unmodified librdkafka share consumer and an unmodified producer:
records naming their delivery time in an ``x-deliver-at`` header come no earlier than that
time and soon after it, the others at once, and the schedule outlives a SIGKILL of the
proxy and the failover of its node (the times are read again from the log)."""

from __future__ import annotations

import time
import uuid
from datetime import datetime

import httpx
import pytest
from confluent_kafka import AcknowledgeType, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from shareproxy.core import group_config as gc
from shareproxy.core.schedule import TICK_MS
from shareproxy.persistence import migrate
from tests.support.cluster import LEASE_MS, led_by, started
from tests.support.consumers import share_consumer
from tests.support.group_configs import alter_group_configs
from tests.support.metrics import scrape, value
from tests.support.postgres import TemporaryPostgres
from tests.support.proxy import ProxyProcess

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


def accepted(consumer, want: int, timeout: float) -> list[tuple[int, int, int, float]]:
    """(partition, offset, delivery count, wall time it came) of ``want`` records, each
    accepted as it comes (an explicit-mode consumer's next poll needs that)."""
    got: list[tuple[int, int, int, float]] = []
    deadline = time.monotonic() + timeout
    while len(got) < want and time.monotonic() < deadline:
        for m in consumer.poll(0.5) or []:
            assert m.error() is None, m.error()
            got.append((m.partition(), m.offset(), m.delivery_count(), time.time()))
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
        assert sorted(o for _, o, _, _ in first) == [0, 2, 4, 5]  # "tomorrow": at once
        assert all(at * 1000 < soon for *_, at in first)
        shown = httpx.get(f"{p.admin_url}/v1/share-groups/{group}/offsets", timeout=30).json()
        [part] = shown["partitions"]
        assert (part["lag"], part["waiting"]) == (0, 2)  # owed nothing until offset 1's time
        next_at = datetime.fromisoformat(part["next_delivery_at"]).timestamp() * 1000
        assert soon <= next_at < soon + TICK_MS  # times are kept in steps, rounded up
        path = f"/v1/share-groups/{group}/partitions/{t}/0/records"
        runs = httpx.get(p.admin_url + path, timeout=30).json()["records"]
        assert [(r["first_offset"], r["state"]) for r in runs if r["deliverable_at"]] == [
            (1, "Available"),
            (3, "Available"),
        ]
        [(_, offset, _, at)] = accepted(c, 1, 30)
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
        [(_, offset, _, at)] = accepted(again, 1, 40)
        assert offset == 3
        assert later / 1000 <= at <= later / 1000 + LATE_S, at - later / 1000
    finally:
        again.close()


@pytest.mark.long
def test_a_schedule_survives_a_restart_of_the_store(broker, topic):
    """The store stops at once, as in a crash, while a record waits for its time, and starts
    again: the record comes at its time, not before, once; the ones accepted before it never
    come again."""
    t = topic(1)
    # its own server (the one the other tests share stays up), durable as a real one is: with
    # synchronous_commit off, a crash loses the last commits, the group configs among them
    with TemporaryPostgres(fsync=True) as pg:
        url = pg.create_database("restarted")
        migrate.upgrade(url)
        p = ProxyProcess(broker.bootstrap, url, group_share_min_record_lock_duration_ms=1000)
        p.start()
        group = f"g-{uuid.uuid4().hex[:6]}"
        configs = {gc.DELIVER_AT_HEADER: "true", gc.AUTO_OFFSET_RESET: "earliest"}
        alter_group_configs(p, group, configs)
        due = now_ms() + 15_000  # past the restart
        produce_scheduled(broker.bootstrap, t, [None, b"%d" % due, None])
        c = share_consumer(p, group, mode="explicit")
        c.subscribe([t])
        try:
            assert sorted(o for _, o, _, _ in accepted(c, 2, 30)) == [0, 2]
            pg.restart()
            [(_, offset, count, at)] = accepted(c, 1, 40)
            assert (offset, count) == (1, 1)
            assert due / 1000 <= at <= due / 1000 + LATE_S, at - due / 1000
            assert accepted(c, 1, 2) == []  # nothing accepted comes again
        finally:
            c.close()
            p.stop()
        assert "Traceback" not in p.log(), p.log_path


def test_a_time_past_the_bound_or_past_the_topics_retention_is_reported(broker, proxy):
    """A time past the group's bound is delivered at the bound; one past the topic's
    retention.ms (as the cluster reports it) may be deleted before it falls due: both are
    counted and named in a warning as they are read in, and the rest flows."""
    t = f"short-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    [created] = admin.create_topics([NewTopic(t, 1, 1, config={"retention.ms": "60000"})]).values()
    created.result(30)
    p = proxy()
    group = f"g-{uuid.uuid4().hex[:6]}"
    configs = {gc.DELIVER_AT_HEADER: "true", gc.MAX_DELIVERY_DELAY: "120000"}
    alter_group_configs(p, group, {**configs, gc.AUTO_OFFSET_RESET: "earliest"})
    start = now_ms()
    hour_on, soon = b"%d" % (start + 3_600_000), b"%d" % (start + 5_000)
    produce_scheduled(broker.bootstrap, t, [b"%d" % (start + 90_000), hour_on, soon, None])
    c = share_consumer(p, group, mode="explicit")
    c.subscribe([t])
    try:
        assert [o for _, o, _, _ in accepted(c, 1, 30)] == [3]
    finally:
        c.close()
    samples = scrape(p)
    assert value(samples, "shareproxy_delivery_times_cut_total", group=group) == 1
    # 90 s, and the hour cut to the 120 s bound, are both past the minute the topic keeps
    assert value(samples, "shareproxy_delivery_times_past_retention_total", group=group) == 2
    log = p.log()
    assert f"1 records of group {group}, topic {t}, partition 0 are due later than" in log
    assert f"2 records of group {group}, topic {t}, partition 0 are due after the topic's" in log
    assert "retention.ms (60000 ms)" in log and "Traceback" not in log


@pytest.mark.long
def test_a_schedule_survives_the_failover_of_its_leader(broker, cluster, topic):
    """Two nodes, each leading one partition with a record waiting for its time; the leader of
    one is killed before that time: the other node takes the partition over and delivers the
    record at its time, not before, and the records accepted before it are not seen again."""
    nodes, t, leaders = started(cluster, topic, lambda *_a, **_k: None, 2, 0, partitions=2)
    group = f"g-{uuid.uuid4().hex[:6]}"
    alter_group_configs(nodes[0], group, {gc.DELIVER_AT_HEADER: "true"})
    due = now_ms() + 20_000  # past the lease and the takeover
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for p in (0, 1):
        producer.produce(t, value=b"now", partition=p)
        producer.produce(t, value=b"due", partition=p, headers=[("x-deliver-at", b"%d" % due)])
    assert producer.flush(30) == 0
    c = share_consumer(nodes[0], group, mode="explicit")
    c.subscribe([t])
    try:
        first = accepted(c, 2, 30)
        assert sorted(g[:3] for g in first) == [(0, 0, 1), (1, 0, 1)]  # due now: at once
        victim = nodes[1]
        led_by(leaders, victim)  # it leads a partition whose record waits
        victim.kill()
        got = accepted(c, 2, 60)
        assert sorted(g[:3] for g in got) == [(0, 1, 1), (1, 1, 1)]  # no record seen twice
        for *_, at in got:
            assert due / 1000 <= at <= due / 1000 + LATE_S, at - due / 1000
    finally:
        c.close()
