"""Kafka's own Java client (kafka-clients 4.3.0), every part of it pointed only at the proxy: an
admin client, the default idempotent producer, a transactional producer, a classic consumer
group and a share consumer with explicit acknowledgement, whose rejected record lands in the
group's dead-letter topic, and records scheduled by their producer
(tests/e2e/java/ThroughProxy.java)."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Consumer, TopicPartition
from kio.schema.describe_groups.v5.request import DescribeGroupsRequest

from shareproxy.core import group_config as gc
from tests.support.consumers import poll_until, share_consumer
from tests.support.dead_letters import REJECTED, new_topic, read_all
from tests.support.group_configs import alter_group_configs
from tests.support.java import run_java as _run
from tests.support.kafka_client import call


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


@pytest.mark.long
def test_the_default_producer_is_idempotent_and_writes_every_record_once(
    java, endpoint, broker, topic
):
    name = topic(3)
    assert _run(java, "produce", endpoint.bootstrap, name, 60) == {"produced": "60"}
    assert sorted(_values(broker.bootstrap, name, 3)) == sorted(f"v{i}" for i in range(60))


@pytest.mark.long
def test_a_transactional_producer_commits_and_aborts_as_against_the_cluster(
    java, endpoint, broker, topic
):
    """read_committed sees the committed transaction. Tansu 0.6 itself hands aborted records to
    read_committed consumers; through the proxy the client sees exactly what it sees directly."""
    through = _run(java, "transactions", endpoint.bootstrap, topic(1), f"tx-{uuid.uuid4()}")
    direct = _run(java, "transactions", broker.bootstrap, topic(1), f"tx-{uuid.uuid4()}")
    assert through["read.committed"] == "10"
    assert through == direct


@pytest.mark.long
def test_a_classic_consumer_group_reads_and_commits(java, endpoint, topic, produce):
    name = topic(3)
    produce(name, 30)
    out = _run(java, "group", endpoint.bootstrap, name, f"java-group-{uuid.uuid4().hex[:8]}", 30)
    assert out == {"group.read": "30", "group.committed": "30", "admin.committed": "30"}


@pytest.mark.floors
def test_a_share_consumer_accepts_releases_and_rejects(java, endpoint, topic, produce):
    """The first record rejected never comes back, the second released comes back with
    delivery count 2, the rest accepted; commitSync reports no error."""
    name = topic(2)
    produce(name, 20, partitions=2)
    out = _run(java, "share", endpoint.bootstrap, name, f"java-share-{uuid.uuid4().hex[:8]}", 20)
    assert out.pop("share.rejected") != "null"
    assert out == {
        "share.accepted": "19",
        "share.released.redelivered.count": "2",
        "share.problems": "[]",
    }


def test_a_record_the_java_client_rejects_is_in_the_groups_dead_letter_topic(
    java, endpoint, topic, produce, broker
):
    """KIP-1191 as Kafka's own client sees it: the record its share consumer rejects is written
    once to the group's dead-letter topic, copied, with the headers naming where it came from."""
    name = topic(2)
    produce(name, 20, partitions=2)
    dlq = new_topic(broker.bootstrap, f"dlq.{uuid.uuid4().hex[:8]}", 1)
    group = f"java-dlq-{uuid.uuid4().hex[:8]}"
    alter_group_configs(endpoint, group, {gc.DLQ_TOPIC: dlq, gc.DLQ_COPY: "true"})
    out = _run(java, "share", endpoint.bootstrap, name, group, 20)
    assert (out["share.accepted"], out["share.problems"]) == ("19", "[]"), out
    partition, offset = out["share.rejected"].split(":")
    letters = read_all(broker.bootstrap, dlq, 1)
    assert len(letters) == 1, [m.offset() for m in letters]
    h = {k: v.decode() for k, v in letters[0].headers()}
    source = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused"})
    try:
        source.assign([TopicPartition(name, int(partition), int(offset))])
        original = source.consume(1, timeout=10)[0]
    finally:
        source.close()
    assert (letters[0].key(), letters[0].value()) == (original.key(), original.value())
    assert (
        h["__dlq.errors.topic"],
        h["__dlq.errors.partition"],
        h["__dlq.errors.offset"],
        h["__dlq.errors.group"],
        h["__dlq.errors.delivery.count"],
        h["__dlq.errors.message"],
    ) == (name, partition, offset, group, "1", REJECTED)


def test_share_group_admin_calls_answer_as_kafkas_coordinator(java, endpoint, topic, produce):
    """As Kafka's group coordinator (GroupCoordinatorShard, GroupMetadataManager) answers:
    altering the offsets of a group that does not exist fails and creates nothing; deleting or
    altering offsets while the group has a member is refused whole (GroupNotEmptyException),
    even for a topic no member subscribes to; a leaving member bumps the group epoch and not the
    assignment epoch (nothing is assigned in an empty group); altering offsets bumps neither."""
    name, other = topic(1), topic(1)
    produce(name, 5, partitions=1)
    produce(other, 5, partitions=1)
    group = f"java-admin-{uuid.uuid4().hex[:8]}"
    out = _run(java, "shareadmin", endpoint.bootstrap, name, other, group)
    assert out == {
        "alter.unknown": "GroupIdNotFoundException",
        "describe.unknown": "GroupIdNotFoundException",
        "delete.live": "GroupNotEmptyException",
        "alter.live": "GroupNotEmptyException",
        "live.kept.other": "true",
        "epochs.left": "EMPTY/4/3",
        "alter.empty": "NONE",
        "epochs.altered": "EMPTY/4/3",
        "delete.empty": "NONE",
    }


def test_a_share_group_is_no_classic_group_to_the_admin_client(java, endpoint, topic, produce):
    """DescribeGroups and OffsetDelete naming a share group are answered as Kafka's group
    coordinator answers them for a group of another type, never by the upstream cluster, which
    has not seen the group and would call it an empty classic group."""
    name = topic(1)
    produce(name, 2, partitions=1)
    group = f"java-classic-{uuid.uuid4().hex[:8]}"
    c = share_consumer(endpoint, group)
    try:
        c.subscribe([name])
        assert len(poll_until(c, 2, 60)) == 2
        out = _run(java, "classic", endpoint.bootstrap, group, name)
        # with an upstream group in the same request, each is answered by its own
        other = f"java-other-{uuid.uuid4().hex[:8]}"
        ask = DescribeGroupsRequest(groups=(other, group), include_authorized_operations=False)
        theirs, ours = call(endpoint.port, ask).groups
    finally:
        c.close()
    assert out == {
        "describe.classic": "Dead",
        "describe.classic.members": "0",
        "offset.delete": "GroupIdNotFoundException",
    }
    assert (ours.group_id, ours.error_code, ours.group_state, ours.protocol_type) == (
        group,
        0,
        "Dead",
        "",
    )
    assert (theirs.group_id, theirs.error_code) == (other, 0)
    assert theirs.group_state != "Dead"  # the upstream's answer


def test_the_java_producer_schedules_and_the_share_consumer_gets_records_at_their_time(
    java, endpoint, topic
):
    """The scheduled-delivery page's Java producer code through the proxy: records with an
    x-deliver-at header reach Kafka's share consumer no earlier than that time, the others at
    once."""
    name = topic(1)
    group = f"java-scheduled-{uuid.uuid4().hex[:8]}"
    alter_group_configs(
        endpoint, group, {gc.DELIVER_AT_HEADER: "true", gc.AUTO_OFFSET_RESET: "earliest"}
    )
    out = _run(java, "scheduled", endpoint.bootstrap, name, group, 10, 12_000)
    late_ms = int(out.pop("scheduled.late.ms"))
    assert out == {
        "scheduled.at.once": "5",
        "scheduled.at.once.before.due": "5",
        "scheduled.timed": "5",
        "scheduled.early": "0",
    }
    assert late_ms <= 3_000  # soon after their time (the bench measures how soon)
