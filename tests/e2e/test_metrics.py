"""/metrics moves with real share-consumer traffic: acknowledgements by type, lock timeouts,
requests per API, store commits, live groups and share-partitions."""

from __future__ import annotations

import uuid

import httpx
import pytest
from confluent_kafka import AcknowledgeType

from tests.support.consumers import poll_until, share_consumer, wait_for
from tests.support.metrics import scrape, value

TYPES = {
    "accept": AcknowledgeType.ACCEPT,
    "release": AcknowledgeType.RELEASE,
    "reject": AcknowledgeType.REJECT,
}


@pytest.mark.floors
def test_metrics_count_acknowledgements_timeouts_and_requests(proxy, topic, produce):
    p = proxy()
    t = topic(1)
    produce(t, 30, partitions=1)
    group = f"g-{uuid.uuid4().hex[:6]}"
    httpx.put(
        f"{p.admin_url}/v1/share-groups/{group}/config",
        json={"configs": {"share.record.lock.duration.ms": 1000}},
        timeout=10,
    ).raise_for_status()
    before = scrape(p)
    c = share_consumer(p, group, mode="explicit")
    c.subscribe([t])
    try:
        got = poll_until(c, 30, 30)
        assert len(got) == 30
        kinds = {}
        for m in got:
            kind = ("accept", "release", "reject")[m.offset() % 3]
            kinds[kind] = kinds.get(kind, 0) + 1
            c.acknowledge(m, TYPES[kind])
        c.commit_sync()
        during = scrape(p)
        assert value(during, "share_groups", state="Stable") >= 1
        assert value(during, "share_partitions") >= 1
        assert value(during, "share_sessions") >= 1
        # the released records come back; hold them until their 1 s lock times out
        redelivered = poll_until(c, kinds["release"], 30)
        assert len(redelivered) == kinds["release"]

        def timed_out():
            s = scrape(p)
            timeouts = value(s, "share_acquisition_lock_timeouts_total", group=group)
            return s if timeouts >= len(redelivered) else None

        after = wait_for(timed_out, 20, "lock timeouts counted")
    finally:
        c.close()
    for kind, n in kinds.items():
        moved = value(after, "share_acknowledgements_total", group=group, type=kind)
        assert moved == n, (kind, moved, n)
    assert value(after, "share_deliveries_total", group=group, delivery="first") == 30
    assert value(after, "share_deliveries_total", group=group, delivery="redelivery") == len(
        redelivered
    )
    assert value(after, "shareproxy_requests_total", api="ShareFetch", outcome="ok") > value(
        before, "shareproxy_requests_total", api="ShareFetch", outcome="ok"
    )
    assert value(after, "shareproxy_store_commit_duration_seconds_count") > value(
        before, "shareproxy_store_commit_duration_seconds_count"
    )
    assert value(after, "shareproxy_upstream_fetch_bytes_total") > 0
    assert value(after, "share_partition_load_duration_seconds_count") >= 1


def test_lag_falls_to_zero_and_poison_records_are_counted(proxy, topic, produce):
    p = proxy()
    t = topic(1)
    produce(t, 20, partitions=1)
    group = f"g-{uuid.uuid4().hex[:6]}"
    httpx.put(
        f"{p.admin_url}/v1/share-groups/{group}/config",
        json={"configs": {"share.delivery.count.limit": 2, "share.auto.offset.reset": "earliest"}},
        timeout=10,
    ).raise_for_status()
    before = scrape(p)
    where = {"group": group, "topic": t, "partition": "0"}
    c = share_consumer(p, group, mode="explicit")
    c.subscribe([t])
    try:
        got = poll_until(c, 1, 30)
        held = scrape(p)  # acquired, nothing acknowledged yet
        assert value(held, "share_group_lag", **where) == 20
        assert value(held, "share_partition_in_flight_records", **where) == len(got)
        assert value(held, "share_partition_in_flight_batches", **where) >= 1
        assert value(held, "share_group_rebalances_total", group=group) >= 1
        assert sum(v for (n, _), v in held.items() if n == "shareproxy_open_connections") >= 1
        seen: set[int] = set()
        again = []
        while len(seen) < 20 or len(again) < 5:
            for m in got:  # 0-4 released (to come back), 5-7 rejected, the rest accepted
                o = m.offset()
                if o in seen:
                    again.append(o)  # second delivery: releasing it again hits the limit of 2
                seen.add(o)
                kind = "release" if o < 5 else "reject" if o < 8 else "accept"
                c.acknowledge(m, TYPES[kind])
            c.commit_sync()
            if len(seen) == 20 and len(again) == 5:
                break
            got = poll_until(c, 1, 30)
            assert got, (seen, again)
        assert sorted(again) == [0, 1, 2, 3, 4]

        def settled():
            s = scrape(p)
            return s if value(s, "share_group_lag", **where) == 0 else None

        after = wait_for(settled, 20, "lag falls to 0")
    finally:
        c.close()

    def moved(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert moved("share_archived_records_total", group=group, reason="delivery_limit") == 5
    assert moved("share_archived_records_total", group=group, reason="rejected") == 3


@pytest.mark.long
def test_group_and_partition_gauges_count_what_the_store_holds_after_a_restart(
    proxy, topic, produce
):
    """A restarted proxy has loaded nothing yet; its gauges still count every stored group
    (Empty: no member since) and share-partition, as Kafka's coordinator reports its groups."""
    from tests.support.consumers import accept_all
    from tests.support.proxy import ProxyProcess

    first = proxy()
    t = topic(2)
    produce(t, 10, partitions=2)
    group = f"census-{uuid.uuid4().hex[:6]}"
    c = share_consumer(first, group)
    c.subscribe([t])
    assert len(accept_all(c, 10)) == 10
    c.close()
    first.stop()
    again = ProxyProcess(first.upstream, first.state_url).start()
    try:

        def counted():
            s = scrape(again)
            return s if value(s, "share_partitions") >= 2 else None

        samples = wait_for(counted, 20, "stored share-partitions counted")
        assert value(samples, "share_groups", state="Empty") >= 1
        assert value(samples, "share_partitions_led") == 0  # nothing loaded since the start
    finally:
        again.stop()


@pytest.mark.floors
def test_kafkas_share_group_metrics_are_the_proxys_own_under_kafkas_names(proxy, topic, produce):
    """Kafka's metric names (RecordAcknowledgementsPerSec by ackType, share-group-count by
    state, share-coordinator write latency, …) carry the proxy's own counts, summed over what
    Kafka's metric has no tag for; a deleted group's rebalances stay counted."""
    p = proxy()
    t = topic(1)
    produce(t, 30, partitions=1)
    group = f"g-{uuid.uuid4().hex[:6]}"
    c = share_consumer(p, group, mode="explicit")
    c.subscribe([t])
    try:
        got = poll_until(c, 30, 30)
        assert len(got) == 30
        for m in got:
            c.acknowledge(m, TYPES[("accept", "release", "reject")[m.offset() % 3]])
        c.commit_sync()
        live = scrape(p)
        assert value(live, "kafka_coordinator_group_share_group_count", state="Stable") == value(
            live, "share_groups", state="Stable"
        )
        assert value(live, "kafka_coordinator_group_group_count", protocol="share") == sum(
            v for (n, _), v in live.items() if n == "share_groups"
        )
        where = {"group": group, "topic": t, "partition": "0"}
        assert value(
            live, "kafka_server_share_partition_metrics_in_flight_message_count", **where
        ) == value(live, "share_partition_in_flight_records", **where)
        assert value(live, "kafka_server_share_session_cache_share_sessions_count") >= 1
    finally:
        c.close()

    def total(samples, name: str, **only: str) -> float:
        return sum(
            v
            for (n, labels), v in samples.items()
            if n == name and all(dict(labels).get(k) == x for k, x in only.items())
        )

    quiet = scrape(p)
    for ours, kafkas in (("accept", "Accept"), ("release", "Release"), ("reject", "Reject")):
        kafka_name = "kafka_server_share_group_metrics_record_acknowledgements_total"
        assert (
            value(quiet, kafka_name, ack_type=kafkas)
            == total(quiet, "share_acknowledgements_total", type=ours)
            == 10
        )
    assert value(
        quiet, "kafka_server_broker_topic_metrics_total_share_fetch_requests_total"
    ) == total(quiet, "shareproxy_requests_total", api="ShareFetch")
    assert (
        value(quiet, "kafka_coordinator_share_write_latency_seconds_count")
        == value(quiet, "shareproxy_store_commit_duration_seconds_count")
        > 0
    )
    assert value(quiet, "kafka_server_share_group_metrics_partition_load_time_seconds_count") >= 1
    rebalanced = value(quiet, "share_group_rebalances_total", group=group)
    assert rebalanced >= 1
    assert value(quiet, "kafka_coordinator_group_share_group_rebalance_total") >= rebalanced

    def deleted():
        gone = httpx.delete(f"{p.admin_url}/v1/share-groups/{group}", timeout=10)
        return gone.status_code == 204 or None  # Empty once the closed member has left

    wait_for(deleted, 30, "the group deleted")
    after = scrape(p)
    assert value(after, "share_group_rebalances_total", group=group) == rebalanced
    assert value(after, "kafka_coordinator_group_share_group_rebalance_total") >= rebalanced
