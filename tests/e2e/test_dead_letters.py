"""Dead-letter topics (KIP-1191) on a broker without them: records a librdkafka share consumer
rejects, or that use up their deliveries, appear in the group's dead-letter topic exactly once
with Kafka's headers, and none is lost when the topic is missing and the proxy is killed."""

from __future__ import annotations

import uuid

import httpx
import pytest
from confluent_kafka import AcknowledgeType, KafkaException, Producer
from confluent_kafka.admin import AdminClient, ConfigResource

from shareproxy.core import dead_letter as dl
from shareproxy.core import group_config as gc
from tests.support.cluster import LEASE_MS
from tests.support.consumers import poll_until, share_consumer, wait_for
from tests.support.dead_letters import REJECTED, new_topic, read_all
from tests.support.group_configs import alter_group_configs

AT_LIMIT = "Offset delivery count exceeded the threshold."


def produce_keyed(bootstrap: str, topic: str, count: int, partition: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap})
    for i in range(count):
        p.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode(), partition=partition)
    assert p.flush(30) == 0


def dead_letter_view(proxy, group: str) -> dict:
    r = httpx.get(f"{proxy.admin_url}/v1/share-groups/{group}/dead-letters", timeout=30)
    assert r.status_code == 200, r.text
    return r.json()


@pytest.mark.long
def test_rejected_and_exhausted_records_are_in_the_dead_letter_topic_with_kafkas_headers(
    proxy, topic, broker
):
    source = topic(2)
    dlq = new_topic(broker.bootstrap, f"dlq.{uuid.uuid4().hex[:8]}", 3)
    produce_keyed(broker.bootstrap, source, 10, partition=1)
    p = proxy()
    group = f"g-{uuid.uuid4().hex[:6]}"
    alter_group_configs(
        p, group, {gc.DLQ_TOPIC: dlq, gc.DLQ_COPY: "true", gc.DELIVERY_COUNT_LIMIT: "2"}
    )
    c = share_consumer(p, group, mode="explicit")
    c.subscribe([source])
    try:
        first = poll_until(c, 10, 30)
        assert sorted(m.offset() for m in first) == list(range(10))
        for m in first:
            kind = (
                AcknowledgeType.REJECT
                if m.offset() in (2, 5, 6)
                else AcknowledgeType.RELEASE
                if m.offset() == 8
                else AcknowledgeType.ACCEPT
            )
            c.acknowledge(m, kind)
        c.commit_sync()
        again = poll_until(c, 1, 30)  # offset 8 on its last delivery: released once more
        assert [(m.offset(), m.delivery_count()) for m in again] == [(8, 2)]
        c.acknowledge(again[0], AcknowledgeType.RELEASE)
        c.commit_sync()
        assert poll_until(c, 1, 3) == []  # nothing is delivered again
    finally:
        c.close()
    letters = read_all(broker.bootstrap, dlq, 4)
    assert len(letters) == 4, [m.offset() for m in letters]  # each exactly once
    assert {m.partition() for m in letters} == {1 % 3}  # a source partition's records together
    seen = {}
    for m in letters:
        h = {k: v.decode() for k, v in m.headers()}
        offset = int(h["__dlq.errors.offset"])
        seen[offset] = (
            m.key(),
            m.value(),
            h["__dlq.errors.topic"],
            h["__dlq.errors.partition"],
            h["__dlq.errors.group"],
            h["__dlq.errors.delivery.count"],
            h["__dlq.errors.message"],
        )
    assert seen == {
        2: (b"k2", b"v2", source, "1", group, "1", REJECTED),
        5: (b"k5", b"v5", source, "1", group, "1", REJECTED),
        6: (b"k6", b"v6", source, "1", group, "1", REJECTED),
        8: (b"k8", b"v8", source, "1", group, "2", AT_LIMIT),
    }
    assert [m.offset() for m in sorted(letters, key=lambda m: m.offset())] == [0, 1, 2, 3]
    assert dead_letter_view(p, group)["partitions"] == []  # nothing waits
    metrics = httpx.get(f"{p.admin_url}/metrics", timeout=10).text
    assert f'shareproxy_dead_letter_records_total{{group="{group}"}} 4.0' in metrics


@pytest.mark.long
def test_a_missing_dead_letter_topic_is_visible_and_a_killed_proxy_loses_no_dead_letter(
    proxy, topic, broker
):
    source = topic(1)
    dlq = f"dlq.{uuid.uuid4().hex[:8]}"  # not created yet
    produce_keyed(broker.bootstrap, source, 5, partition=0)
    p = proxy(node_lease_ms=LEASE_MS)  # restarted after a SIGKILL: waits for its lease
    group = f"g-{uuid.uuid4().hex[:6]}"
    alter_group_configs(p, group, {gc.DLQ_TOPIC: dlq})
    c = share_consumer(p, group, mode="explicit")
    c.subscribe([source])
    try:
        got = poll_until(c, 5, 30)
        for m in got:
            c.acknowledge(m, AcknowledgeType.REJECT if m.offset() < 3 else AcknowledgeType.ACCEPT)
        c.commit_sync()  # the rejections are stored as Archiving before this returns

        def waiting() -> dict | None:
            rows = dead_letter_view(p, group)["partitions"]
            return rows[0] if rows and rows[0]["problem"] else None

        row = wait_for(waiting, 30, "the missing topic reported")
        assert row["waiting"] == 3 and "does not exist" in row["problem"], row
        metrics = httpx.get(f"{p.admin_url}/metrics", timeout=10).text
        assert f'shareproxy_dead_letter_failures_total{{group="{group}"}}' in metrics
    finally:
        c.close()
    p.kill()  # between the archiving and the produce: only the store remembers them
    new_topic(broker.bootstrap, dlq, 1)
    p.start()
    c = share_consumer(p, group, mode="explicit")  # a fetch loads the share-partition again
    c.subscribe([source])
    try:
        assert poll_until(c, 1, 5) == []  # rejected records are never delivered again
        letters = read_all(broker.bootstrap, dlq, 3)
    finally:
        c.close()
    offsets = sorted(int(dict(m.headers())["__dlq.errors.offset"]) for m in letters)
    assert offsets == [0, 1, 2]
    assert all(m.key() is None and m.value() is None for m in letters)  # copying is off
    wait_for(lambda: dead_letter_view(p, group)["partitions"] == [], 30, "nothing waiting")


def test_kafkas_rules_for_the_dead_letter_topic_hold_and_a_missing_one_is_created_if_allowed(
    proxy, topic, broker
):
    """KIP-1191's rules across the wire: a name without the prefix is refused with
    INVALID_CONFIG; a topic not opted in takes no dead letters (the view says which config to
    set); with auto-creation on, a missing topic is created opted in and takes them."""
    source = topic(1)
    produce_keyed(broker.bootstrap, source, 4, partition=0)
    p = proxy(errors_deadletterqueue_auto_create_topics_enable=True)
    group = f"g-{uuid.uuid4().hex[:6]}"
    with pytest.raises(KafkaException) as refused:
        alter_group_configs(p, group, {gc.DLQ_TOPIC: f"orders-{uuid.uuid4().hex[:6]}"})
    assert refused.value.args[0].code() == 40  # INVALID_CONFIG
    assert dl.TOPIC_PREFIX in refused.value.args[0].str()

    closed = new_topic(broker.bootstrap, f"dlq.{uuid.uuid4().hex[:8]}", 1, enabled=False)
    alter_group_configs(p, group, {gc.DLQ_TOPIC: closed})
    c = share_consumer(p, group, mode="explicit")
    c.subscribe([source])
    try:
        got = poll_until(c, 4, 30)
        for m in got:
            c.acknowledge(m, AcknowledgeType.REJECT if m.offset() < 2 else AcknowledgeType.ACCEPT)
        c.commit_sync()

        def waiting() -> dict | None:
            rows = dead_letter_view(p, group)["partitions"]
            return rows[0] if rows and rows[0]["problem"] else None

        row = wait_for(waiting, 30, "the topic's refusal reported")
        assert row["waiting"] == 2 and dl.GROUP_ENABLE in row["problem"], row

        created = f"dlq.{uuid.uuid4().hex[:8]}"  # missing: the proxy creates it
        alter_group_configs(p, group, {gc.DLQ_TOPIC: created})
        wait_for(lambda: dead_letter_view(p, group)["partitions"] == [], 60, "nothing waiting")
    finally:
        c.close()
    letters = read_all(broker.bootstrap, created, 2)
    assert sorted(int(dict(m.headers())["__dlq.errors.offset"]) for m in letters) == [0, 1]
    assert read_all(broker.bootstrap, closed, 0, timeout=1) == []
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    (described,) = admin.describe_configs([ConfigResource("topic", created)]).values()
    assert described.result(30)[dl.GROUP_ENABLE].value == "true"
