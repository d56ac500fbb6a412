"""Topics and records on a real broker, through confluent-kafka's own clients (so what the
proxy reads was written by a client nobody here wrote)."""

from __future__ import annotations

import uuid


def create_topic(bootstrap: str, partitions: int = 3) -> str:
    """A new topic with a unique name."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    name = f"t-{uuid.uuid4().hex[:10]}"
    for f in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        f.result(30)
    return name


def produce(bootstrap: str, topic: str, count: int, partitions: int = 3, size: int = 100) -> None:
    """``count`` records spread round-robin over the first ``partitions`` partitions; record
    ``i`` has key ``str(i)`` and a value of ``size`` bytes."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(count):
        p.produce(topic, key=str(i).encode(), value=b"v" * size, partition=i % partitions)
        if i % 1000 == 0:
            p.poll(0)
    assert p.flush(30) == 0
