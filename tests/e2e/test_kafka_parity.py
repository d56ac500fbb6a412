"""Where a client can tell the proxy from Kafka's own share groups, it cannot: real
librdkafka share consumers against the proxy, on what Kafka's broker does."""

from __future__ import annotations

import contextlib
import threading
import time
import uuid

import pytest
from confluent_kafka import AcknowledgeType, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.consumers import poll_until, share_consumer, wait_for
from tests.support.group_configs import alter_group_configs

DROPPED = "topic deleted upstream: its share-partition is dropped"


def _recreate(bootstrap: str, name: str, delete_only: bool = False) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.delete_topics([name]).values():
        f.result(30)
    deadline = time.monotonic() + 30
    while name in admin.list_topics(timeout=10).topics:
        assert time.monotonic() < deadline, f"{name} was never deleted"
        time.sleep(0.2)
    if not delete_only:
        for f in admin.create_topics([NewTopic(name, 1, 1)]).values():
            f.result(30)


def _ten_held_then_topic_deleted(p, broker, topic, produce):
    """An explicit-mode share consumer holding a new topic's ten records; the topic then
    deleted upstream."""
    name = topic(1)
    produce(name, 10, partitions=1)
    c = share_consumer(p, f"deleted-{uuid.uuid4().hex[:6]}", mode="explicit")
    try:
        c.subscribe([name])
        got = poll_until(c, 10, 60)
        assert len(got) == 10
        _recreate(broker.bootstrap, name, delete_only=True)
    except BaseException:
        c.close()
        raise
    return c, got


@pytest.mark.long
def test_acknowledging_records_of_a_deleted_topic_is_an_error_the_application_sees(
    proxy, broker, topic, produce
):
    p = proxy()
    c, got = _ten_held_then_topic_deleted(p, broker, topic, produce)
    try:
        deadline = time.monotonic() + 10  # the proxy reads the topics in use every second
        while DROPPED not in p.log() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert DROPPED in p.log(), "the share-partition of the deleted topic was kept"
        for m in got:
            c.acknowledge(m, AcknowledgeType.ACCEPT)
        results = c.commit_sync()
        assert results, "commit_sync reported nothing"
        assert all(error is not None for error in results.values()), results
    finally:
        c.close()


def test_a_deleted_topic_is_noticed_at_once(proxy, broker, topic, produce):
    """Kafka's broker learns of a deletion from its metadata log at once: the share-partitions
    go, and acknowledging their records answers UNKNOWN_TOPIC_ID per partition
    (KafkaApis.getAcknowledgeBatchesFromShareAcknowledgeRequest). The proxy reads the topics in
    use every second, so 3 seconds later it answers the same."""
    p = proxy()
    c, got = _ten_held_then_topic_deleted(p, broker, topic, produce)
    try:
        deadline = time.monotonic() + 3
        while DROPPED not in p.log() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert DROPPED in p.log(), "the share-partition of the deleted topic was kept"
        for m in got:
            c.acknowledge(m, AcknowledgeType.ACCEPT)
        results = c.commit_sync()
        assert results, "commit_sync reported nothing"
        errors = {e.args[0].name() if e is not None else None for e in results.values()}
        assert errors == {"UNKNOWN_TOPIC_ID"}, results
    finally:
        c.close()


@pytest.mark.long
def test_a_recreated_topic_never_delivers_the_records_of_the_deleted_one(proxy, broker, topic):
    """Records released (Available again) when the topic is deleted must not come back once a
    topic of the same name exists: a share consumer gets only the new topic's records, as a
    plain consumer of it does."""
    p = proxy()
    name = topic(1)
    _produce(broker.bootstrap, name, [f"old-{i}" for i in range(10)])
    group = f"recreated-{uuid.uuid4().hex[:6]}"
    first = share_consumer(p, group, mode="explicit")
    first.subscribe([name])
    got = poll_until(first, 10, 60)
    for m in got:
        first.acknowledge(m, AcknowledgeType.RELEASE)
    first.commit_sync()
    first.close()
    _recreate(broker.bootstrap, name)
    _produce(broker.bootstrap, name, [f"new-{i}" for i in range(5)])
    c = share_consumer(p, group)
    try:
        c.subscribe([name])
        seen: list[str] = []
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            seen += [m.value().decode() for m in c.poll(0.5) or [] if m.error() is None]
        assert sorted(seen) == [f"new-{i}" for i in range(5)]
        assert sorted(_values(broker.bootstrap, name)) == sorted(seen)
    finally:
        c.close()


@pytest.mark.long
def test_a_producer_writes_on_while_its_topic_is_deleted_and_created_again(proxy, broker, topic):
    """Tansu answers UNKNOWN_SERVER_ERROR for a write that meets the deletion, which the
    producer does not retry: the record is lost. Kafka's broker answers a retriable code
    (UNKNOWN_TOPIC_OR_PARTITION or NOT_LEADER_OR_FOLLOWER), so the client refreshes its
    metadata and writes on once the topic exists again: no record fails."""
    from confluent_kafka import Producer

    name = topic(1)
    p = proxy()
    failed: list[str] = []
    delivered = [0]

    def done(err, msg) -> None:
        if err is not None:
            failed.append(err.name())
        else:
            delivered[0] += 1

    producer = Producer({"bootstrap.servers": p.bootstrap, "linger.ms": 5})
    stop = threading.Event()

    def write() -> None:
        i = 0
        while not stop.is_set():
            with contextlib.suppress(BufferError):
                producer.produce(name, f"v{i}".encode(), partition=0, on_delivery=done)
                i += 1
            producer.poll(0.01)

    writer = threading.Thread(target=write)
    writer.start()
    try:
        time.sleep(2)
        for _ in range(5):  # how a write meets the deletion is a race: run it a few times
            _recreate(broker.bootstrap, name)
            time.sleep(1)
        before = delivered[0]
        time.sleep(4)
    finally:
        stop.set()
        writer.join()
    assert producer.flush(30) == 0
    assert failed == []
    assert delivered[0] > before, "nothing was written to the topic created again"
    assert _values(broker.bootstrap, name), "the topic created again holds nothing"


def _produce(bootstrap: str, name: str, values: list[str]) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap})
    for v in values:
        producer.produce(name, v.encode(), partition=0)
    assert producer.flush(30) == 0


def _values(bootstrap: str, name: str) -> list[str]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused"})
    try:
        c.assign([TopicPartition(name, 0, 0)])
        out: list[str] = []
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                out.append(m.value().decode())
            elif out:
                break
        return out
    finally:
        c.close()


class RawMember:
    """A share-group member on one raw connection: joined by heartbeat, fetching with kio
    requests whose limits a test chooses (what no stock client lets it set)."""

    def __init__(self, port: int, name: str) -> None:
        from kio.schema.metadata.v12 import request as md
        from kio.schema.share_group_heartbeat.v1 import request as hb

        from tests.support.kafka_client import KafkaConnection

        self.k = KafkaConnection(port)
        meta = self.k.call(
            md.MetadataRequest(
                topics=(md.MetadataRequestTopic(topic_id=None, name=name),),
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            )
        )
        self.topic_id = meta.topics[0].topic_id
        self.member, self.group = uuid.uuid4().hex, f"raw-{uuid.uuid4().hex[:6]}"
        joined = self.k.call(
            hb.ShareGroupHeartbeatRequest(
                group_id=self.group,
                member_id=self.member,
                member_epoch=0,
                subscribed_topic_names=(name,),
            )
        )
        assert joined.error_code == 0
        self.epoch = iter(range(1000))

    def fetch(
        self,
        max_bytes=1 << 20,
        max_records=10,
        partitions=(0,),
        wait_ms=300,
        acks=(),
        min_bytes=1,
    ):
        """{partition index: its answer} of one ShareFetch."""
        from datetime import timedelta

        from kio.schema.share_fetch.v1 import request as sf

        answer = self.k.call(
            sf.ShareFetchRequest(
                group_id=self.group,
                member_id=self.member,
                share_session_epoch=next(self.epoch),
                max_wait=timedelta(milliseconds=wait_ms),
                min_bytes=min_bytes,
                max_bytes=max_bytes,
                max_records=max_records,
                batch_size=10,
                topics=(
                    sf.FetchTopic(
                        topic_id=self.topic_id,
                        partitions=tuple(
                            sf.FetchPartition(partition_index=i, acknowledgement_batches=acks)
                            for i in partitions
                        ),
                    ),
                ),
                forgotten_topics_data=(),
            )
        )
        assert answer.error_code == 0
        return {x.partition_index: x for t in answer.responses for x in t.partitions}


def test_share_fetch_limits_and_errors_as_kafka_answers_them(proxy, topic, produce):
    """MaxBytes or MaxRecords of zero acquire nothing; a partition the topic lacks is
    UNKNOWN_TOPIC_OR_PARTITION; every per-partition error carries a message."""
    from kio.schema.share_fetch.v1 import request as sf

    p = proxy()
    name = topic(1)
    produce(name, 5, partitions=1)
    m = RawMember(p.port, name)
    for nothing in (m.fetch(max_bytes=0), m.fetch(max_records=0)):  # a partition with nothing
        assert 0 not in nothing or nothing[0].acquired_records == ()  # to say may be left out
    got = m.fetch(partitions=(0, 7))
    assert [(r.first_offset, r.last_offset) for r in got[0].acquired_records] == [(0, 4)]
    assert got[7].error_code == 3  # UNKNOWN_TOPIC_OR_PARTITION
    assert got[7].error_message
    assert got[0].error_message is None
    # an acknowledgement reaching past the records delivered: INVALID_REQUEST, with a message
    stale = sf.AcknowledgementBatch(first_offset=0, last_offset=9, acknowledge_types=(1,))
    acked = m.fetch(acks=(stale,), partitions=(0,), wait_ms=10)[0]
    assert acked.acknowledge_error_code == 42
    assert "past the records delivered" in acked.acknowledge_error_message
    m.k.close()


def test_share_fetch_waits_for_min_bytes_until_max_wait(proxy, topic, produce):
    """MinBytes more than the partition holds: the answer waits MaxWait, then gives what there
    is; MinBytes of 1 answers at once."""
    p = proxy()
    name = topic(1)
    produce(name, 5, partitions=1, size=100)
    m = RawMember(p.port, name)
    started = time.monotonic()
    got = m.fetch(min_bytes=1 << 20, wait_ms=1500)
    waited = time.monotonic() - started
    assert [(r.first_offset, r.last_offset) for r in got[0].acquired_records] == [(0, 4)]
    assert waited >= 1.3, waited
    produce(name, 5, partitions=1, size=100)
    started = time.monotonic()
    got = m.fetch(min_bytes=1, wait_ms=5000)
    assert [(r.first_offset, r.last_offset) for r in got[0].acquired_records] == [(5, 9)]
    assert time.monotonic() - started < 3
    m.k.close()


def _group_state(p, group: str) -> str | None:
    import httpx

    listed = httpx.get(f"{p.admin_url}/v1/share-groups", timeout=10).json()
    return {g["group_id"]: g["state"] for g in listed}.get(group)


@pytest.mark.long
def test_a_member_removed_by_session_timeout_keeps_fetching_and_acknowledging(
    proxy, topic, produce
):
    """KIP-932 fences no one: a member whose heartbeats stopped past the session timeout is
    written out of the group, yet it goes on fetching and acknowledging, and the records it
    holds stay its own (Kafka's broker never checks membership on ShareFetch or
    ShareAcknowledge, and the coordinator's timeout releases nothing). A librdkafka consumer
    joining the group meanwhile gets none of them, and none again once acknowledged."""
    from kio.schema.share_acknowledge.v1 import request as sa

    p = proxy(
        group_share_min_session_timeout_ms=1000,
        session_timeout_ms=1500,
        group_share_min_heartbeat_interval_ms=500,
        heartbeat_interval_ms=500,
    )
    name = topic(1)
    produce(name, 6, partitions=1)
    produce(name, 4, partitions=1)  # another batch: the member takes only the first
    m = RawMember(p.port, name)  # joins once, then never heartbeats
    got = m.fetch(max_records=6)[0]
    assert [(r.first_offset, r.last_offset) for r in got.acquired_records] == [(0, 5)]
    wait_for(lambda: _group_state(p, m.group) == "Empty", 20, "the member to time out")

    c = share_consumer(p, m.group)
    try:
        c.subscribe([name])
        taken = poll_until(c, 4, 30)  # the records no one holds, never the expired member's
        assert sorted(x.offset() for x in taken) == [6, 7, 8, 9]
        c.commit_sync()  # implicit mode: accepts them

        accept = sa.AcknowledgementBatch(first_offset=0, last_offset=2, acknowledge_types=(1,))
        fetched = m.fetch(acks=(accept,), wait_ms=10)[0]  # asserts the request is served
        assert fetched.acknowledge_error_code == 0
        rest = sa.AcknowledgementBatch(first_offset=3, last_offset=5, acknowledge_types=(1,))
        closed = m.k.call(
            sa.ShareAcknowledgeRequest(
                group_id=m.group,
                member_id=m.member,
                share_session_epoch=-1,
                topics=(
                    sa.AcknowledgeTopic(
                        topic_id=m.topic_id,
                        partitions=(
                            sa.AcknowledgePartition(
                                partition_index=0, acknowledgement_batches=(rest,)
                            ),
                        ),
                    ),
                ),
            )
        )
        assert closed.error_code == 0, closed
        assert [x.error_code for t in closed.responses for x in t.partitions] == [0]

        produce(name, 2, partitions=1)
        later = poll_until(c, 3, 5)  # the acknowledged records are never delivered again
        assert sorted(x.offset() for x in later) == [10, 11]
        assert {x.delivery_count() for x in later} == {1}
    finally:
        c.close()
        m.k.close()


def test_the_in_flight_cap_holds_within_one_producer_batch(proxy, topic):
    """With share.partition.max.record.locks at 100, a 200-record producer batch is cut at the
    cap: no poll gets more than 100, and all 200 arrive once the first are acknowledged."""
    p = proxy()
    name = topic(1)
    group = f"cap-{uuid.uuid4().hex[:6]}"
    alter_group_configs(p, group, {"share.partition.max.record.locks": "100"})
    producer = Producer({"bootstrap.servers": p.bootstrap, "linger.ms": 1000})
    for i in range(200):  # one batch: all queued within the linger
        producer.produce(name, value=f"msg-{i}".encode(), partition=0)
    assert producer.flush(30) == 0
    c = ShareConsumer(
        {
            "bootstrap.servers": p.bootstrap,
            "group.id": group,
            "share.acknowledgement.mode": "explicit",
            "max.poll.records": 200,
        }
    )
    try:
        c.subscribe([name])
        polls: list[int] = []
        deadline = time.monotonic() + 60
        while sum(polls) < 200 and time.monotonic() < deadline:
            batch = [m for m in c.poll(2.0) or [] if m.error() is None]
            if batch:
                polls.append(len(batch))
                for m in batch:
                    c.acknowledge(m, AcknowledgeType.ACCEPT)
        assert sum(polls) == 200, polls
        assert max(polls) <= 100, polls
    finally:
        c.close()


def test_a_heartbeat_member_id_longer_than_a_uuid_is_refused(proxy):
    """KafkaApis.isMemberIdValid: set and at most 36 characters, else INVALID_REQUEST."""
    from kio.schema.share_group_heartbeat.v1 import request as hb

    from tests.support.kafka_client import KafkaConnection

    k = KafkaConnection(proxy().port)
    try:

        def beat(member_id: str) -> int:
            return k.call(
                hb.ShareGroupHeartbeatRequest(
                    group_id=f"long-{uuid.uuid4().hex[:6]}",
                    member_id=member_id,
                    member_epoch=0,
                    subscribed_topic_names=("anything",),
                )
            ).error_code

        assert beat("m" * 37) == 42  # INVALID_REQUEST
        assert beat("") == 42
        assert beat("m" * 36) == 0
    finally:
        k.close()
