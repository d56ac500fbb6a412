"""While a group's target assignment settles, its members are asked to heartbeat sooner than
the configured interval (5 s here, Kafka's default), so a member that heard its assignment just
before another joined moves to its share within a fraction of it: real librdkafka share
consumers and Kafka's Java client, their assignments as the REST view shows them."""

from __future__ import annotations

import threading
import time
import uuid

import httpx

from tests.support.consumers import share_consumer, wait_for
from tests.support.java import start_java


def test_a_member_moves_to_its_share_soon_after_another_joins(proxy, topic):
    p = proxy()
    t = topic(6)
    group = f"settle-{uuid.uuid4().hex[:6]}"
    stop = threading.Event()

    def consume(c) -> None:
        while not stop.is_set():
            c.poll(0.2)

    def shares() -> list[int]:
        return _shares(p.admin_url, group, t)

    first, second = share_consumer(p, group), share_consumer(p, group)
    threads = [threading.Thread(target=consume, args=(c,)) for c in (first, second)]
    first.subscribe([t])
    threads[0].start()
    try:
        wait_for(lambda: shares() == [6], 30, "the first member holding all six partitions")
        heard = time.monotonic()
        second.subscribe([t])
        threads[1].start()
        wait_for(lambda: shares() == [3, 3], 30, "each member holding three partitions")
        took = time.monotonic() - heard
        # at the configured interval the first member would keep all six until ~5 s after it
        # joined; settling asks it back within 250 ms of the second one's join
        assert took < 3.5, f"the first member kept its old assignment for {took:.1f} s"
    finally:
        stop.set()
        for th in threads:
            th.join(10)
        first.close()
        second.close()


def test_a_java_member_moves_to_its_share_soon_after_another_joins(proxy, topic, java):
    """Kafka's Java client reads the interval from every answer as librdkafka does: the first
    member, a KafkaShareConsumer, gives up half its partitions within the settling interval."""
    p = proxy()
    t = topic(6)
    group = f"settle-java-{uuid.uuid4().hex[:6]}"

    def shares() -> list[int]:
        return _shares(p.admin_url, group, t)

    first = start_java(java, "polling", p.bootstrap, t, group, 60)
    second = share_consumer(p, group)
    stop = threading.Event()

    def consume() -> None:
        while not stop.is_set():
            second.poll(0.2)

    polling = threading.Thread(target=consume)
    try:
        wait_for(lambda: shares() == [6], 60, "the Java member holding all six partitions")
        heard = time.monotonic()
        second.subscribe([t])
        polling.start()
        wait_for(lambda: shares() == [3, 3], 30, "each member holding three partitions")
        took = time.monotonic() - heard
        assert took < 3.5, f"the Java member kept its old assignment for {took:.1f} s"
    finally:
        stop.set()
        if polling.is_alive():
            polling.join(10)
        second.close()
        first.kill()
        first.communicate(timeout=30)


def _shares(admin_url: str, group: str, topic: str) -> list[int]:
    """How many of the topic's partitions each member holds, as the REST view shows them."""
    view = httpx.get(f"{admin_url}/v1/share-groups/{group}", timeout=10).json()
    return sorted(len(m["assignment"].get(topic, [])) for m in view.get("members", []))
