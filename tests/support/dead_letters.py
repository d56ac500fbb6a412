"""Topics made for dead letters and read back, and the reason Kafka gives for a rejected record."""

from __future__ import annotations

import uuid

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from shareproxy.core.dead_letter import GROUP_ENABLE
from tests.support.consumers import wait_for

REJECTED = "Offset rejected by client."


def new_topic(bootstrap: str, name: str, partitions: int, enabled: bool = True) -> str:
    """A dead-letter topic, opted in (``errors.deadletterqueue.group.enable=true``) unless
    ``enabled`` is False."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    config = {GROUP_ENABLE: "true"} if enabled else {}
    for f in admin.create_topics([NewTopic(name, partitions, 1, config=config)]).values():
        f.result(30)
    return name


def read_all(bootstrap: str, topic: str, want: int, timeout: float = 30) -> list:
    """Every record of ``topic`` from the start, once ``want`` arrived (and a little more)."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{uuid.uuid4().hex[:6]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    partitions = c.list_topics(topic, timeout=30).topics[topic].partitions
    c.assign([TopicPartition(topic, i, OFFSET_BEGINNING) for i in partitions])
    got: list = []
    try:
        wait_for(
            lambda: (
                got.extend(m for m in c.consume(100, 0.5) if m.error() is None) or len(got) >= want
            ),
            timeout,
            f"{want} records in {topic}",
        )
        got.extend(m for m in c.consume(100, 2) if m.error() is None)  # none more come
    finally:
        c.close()
    return got
