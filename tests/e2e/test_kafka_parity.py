"""Where a client can tell the proxy from Kafka's own share groups, it cannot: real
librdkafka share consumers against the proxy, on what Kafka's broker does (issue 18)."""

from __future__ import annotations

import time
import uuid

from confluent_kafka import AcknowledgeType
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.consumers import poll_until, share_consumer


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


def test_acknowledging_records_of_a_deleted_topic_is_an_error_the_application_sees(
    proxy, broker, topic, produce
):
    p = proxy()
    name = topic(1)
    produce(name, 10, partitions=1)
    c = share_consumer(p, f"deleted-{uuid.uuid4().hex[:6]}", mode="explicit")
    try:
        c.subscribe([name])
        got = poll_until(c, 10, 60)
        assert len(got) == 10
        _recreate(broker.bootstrap, name, delete_only=True)
        time.sleep(6)  # the proxy's metadata refresh (5 s) has seen the deletion
        for m in got:
            c.acknowledge(m, AcknowledgeType.ACCEPT)
        results = c.commit_sync()
        assert results, "commit_sync reported nothing"
        assert all(error is not None for error in results.values()), results
    finally:
        c.close()


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
