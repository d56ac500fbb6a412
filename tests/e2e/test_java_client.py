"""Kafka's own Java client (kafka-clients 4.3.0), every part of it pointed only at the proxy: an
admin client, the default idempotent producer, a transactional producer, a classic consumer
group and a share consumer with explicit acknowledgement (tests/e2e/java/ThroughProxy.java)."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Consumer, TopicPartition

from tests.support.java import run_java as _run


@pytest.fixture
def endpoint(proxy):
    return proxy()


def _values(bootstrap: str, topic: str, partitions: int) -> list[str]:
    """Every value in the topic, read from the broker itself."""
    c = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False}
    )
    try:
        assigned = [TopicPartition(topic, p, 0) for p in range(partitions)]
        ends = {
            p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in range(partitions)
        }
        c.assign(assigned)
        out: list[str] = []
        while len(out) < sum(ends.values()):
            batch = c.consume(500, timeout=10)
            assert batch, f"read {len(out)} of {sum(ends.values())} records"
            out += [m.value().decode() for m in batch if m.error() is None]
        return out
    finally:
        c.close()


def test_the_admin_client_manages_topics_and_configs(java, endpoint):
    """DescribeCluster and DescribeTopicPartitions answered by the proxy; CreateTopics,
    IncrementalAlterConfigs, DescribeConfigs and DeleteTopics relayed to the cluster."""
    out = _run(java, "admin", endpoint.bootstrap, f"java-admin-{uuid.uuid4().hex[:8]}")
    assert out == {
        "cluster.nodes": "1",
        "topic.partitions": "3",
        "listed": "true",
        "create.again": "TopicExistsException",
        "config.retention.ms": "3600000",
        "deleted": "true",
    }


def test_the_default_producer_is_idempotent_and_writes_every_record_once(
    java, endpoint, broker, topic
):
    name = topic(3)
    assert _run(java, "produce", endpoint.bootstrap, name, 60) == {"produced": "60"}
    assert sorted(_values(broker.bootstrap, name, 3)) == sorted(f"v{i}" for i in range(60))


def test_a_transactional_producer_commits_and_aborts_as_against_the_cluster(
    java, endpoint, broker, topic
):
    """read_committed sees the committed transaction. Tansu 0.6 itself hands aborted records to
    read_committed consumers; through the proxy the client sees exactly what it sees directly."""
    through = _run(java, "transactions", endpoint.bootstrap, topic(1), f"tx-{uuid.uuid4()}")
    direct = _run(java, "transactions", broker.bootstrap, topic(1), f"tx-{uuid.uuid4()}")
    assert through["read.committed"] == "10"
    assert through == direct


def test_a_classic_consumer_group_reads_and_commits(java, endpoint, topic, produce):
    name = topic(3)
    produce(name, 30)
    out = _run(java, "group", endpoint.bootstrap, name, f"java-group-{uuid.uuid4().hex[:8]}", 30)
    assert out == {"group.read": "30", "group.committed": "30", "admin.committed": "30"}


def test_a_share_consumer_accepts_releases_and_rejects(java, endpoint, topic, produce):
    """The first record rejected never comes back, the second released comes back with
    delivery count 2, the rest accepted; commitSync reports no error."""
    name = topic(2)
    produce(name, 20, partitions=2)
    out = _run(java, "share", endpoint.bootstrap, name, f"java-share-{uuid.uuid4().hex[:8]}", 20)
    assert out == {
        "share.accepted": "19",
        "share.released.redelivered.count": "2",
        "share.problems": "[]",
    }
