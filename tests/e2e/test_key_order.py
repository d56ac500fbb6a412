"""Key-ordered share delivery (beyond KIP-932) judged by librdkafka share consumers and by
Kafka's Java client: several consumers on one partition and many keys; per key, the processing
intervals never overlap and offsets are processed in order, through releases, a lock timeout
and a consumer leaving."""

from __future__ import annotations

import itertools
import random
import threading
import time
import uuid
from dataclasses import dataclass

import httpx
import pytest
from confluent_kafka import AcknowledgeType, Producer

from tests.support.consumers import share_consumer, wait_for
from tests.support.java import run_java

KEYS = 40
PER_KEY = 15
RECORDS = KEYS * PER_KEY
LOCK_MS = 2_000


@dataclass(frozen=True)
class Attempt:
    """One consumer's processing of one delivery: from the poll that returned it to its
    acknowledgement (sent to the proxy only after that)."""

    key: bytes
    offset: int
    start: float
    end: float
    accepted: bool
    consumer: str
    delivery_count: int


def produce_keyed(bootstrap: str, topic: str) -> dict[int, bytes]:
    """RECORDS records of KEYS keys, interleaved, in a few producer batches: offset -> key."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 100})
    order = [i % KEYS for i in range(RECORDS)]
    random.Random(7).shuffle(order)
    delivered: dict[int, bytes] = {}

    def sent(err, m) -> None:
        if err is None:
            delivered[m.offset()] = m.key()

    for k in order:
        p.produce(topic, key=b"key-%d" % k, value=b"v", partition=0, on_delivery=sent)
    assert p.flush(30) == 0
    assert len(delivered) == RECORDS
    return delivered


def _keyed_group(p) -> str:
    """A new group with key-ordered delivery on, set over the admin API before anyone joins."""
    group = f"keyed-{uuid.uuid4().hex[:6]}"
    httpx.put(
        f"{p.admin_url}/v1/share-groups/{group}/config",
        json={
            "configs": {
                "share.key.ordering.enable": "true",
                "share.record.lock.duration.ms": LOCK_MS,
            }
        },
        timeout=10,
    ).raise_for_status()
    return group


@pytest.mark.floors
def test_one_key_at_a_time_and_in_order_through_releases_timeouts_and_a_consumer_leaving(
    proxy, topic, broker
):
    t = topic(1)
    keys = produce_keyed(broker.bootstrap, t)
    p = proxy(group_share_min_heartbeat_interval_ms=1000, heartbeat_interval_ms=1000)
    group = _keyed_group(p)
    attempts: list[Attempt] = []
    accepted: set[int] = set()
    twice: list[int] = []
    lock = threading.Lock()
    stop = threading.Event()
    held_by_silent: list[int] = []
    rng = random.Random(11)

    def consume(name: str, leave_after: int | None = None, silent_after: int | None = None):
        c = share_consumer(p, group, mode="explicit")
        c.subscribe([t])
        polls = processed = 0
        try:
            while not stop.is_set():
                batch = [m for m in c.poll(0.3) or [] if m.error() is None]
                if not batch:
                    continue
                polls += 1
                start = time.monotonic()
                if silent_after is not None and polls > silent_after:
                    held_by_silent.extend(m.offset() for m in batch)
                    stop.wait()  # holds them, never acknowledges: their locks time out
                    return
                for m in batch:
                    if leave_after is not None and processed >= leave_after:
                        c.commit_sync()  # what it processed is acknowledged
                        return  # leaves mid-batch: close releases what it did not process
                    time.sleep(rng.uniform(0.001, 0.003))  # the processing
                    release = m.delivery_count() == 1 and m.offset() % 13 == 0
                    c.acknowledge(m, AcknowledgeType.RELEASE if release else AcknowledgeType.ACCEPT)
                    end = time.monotonic()
                    with lock:
                        attempts.append(
                            Attempt(
                                m.key(),
                                m.offset(),
                                start,
                                end,
                                not release,
                                name,
                                m.delivery_count(),
                            )
                        )
                        if not release:
                            if m.offset() in accepted:
                                twice.append(m.offset())
                            accepted.add(m.offset())
                    processed += 1
                    start = end
            c.commit_sync()
        finally:
            c.close()

    threads = [
        threading.Thread(target=consume, args=("steady",), daemon=True),
        threading.Thread(
            target=consume, args=("leaving",), kwargs={"leave_after": 60}, daemon=True
        ),
        threading.Thread(target=consume, args=("silent",), kwargs={"silent_after": 1}, daemon=True),
    ]
    for th in threads:
        th.start()
    try:
        wait_for(lambda: len(accepted) == RECORDS, 120, f"all {RECORDS} records accepted")
    finally:
        stop.set()
        for th in threads:
            th.join(30)
    assert accepted == set(keys)
    assert not twice, f"accepted twice: {twice}"
    by_key: dict[bytes, list[Attempt]] = {}
    for a in attempts:
        by_key.setdefault(a.key, []).append(a)
    for key, seq in by_key.items():
        seq.sort(key=lambda a: a.start)
        for before, after in itertools.pairwise(seq):
            assert before.end <= after.start, f"{key!r}: {before} overlaps {after}"
            assert after.offset >= before.offset, f"{key!r}: {after.offset} after {before.offset}"
            if before.accepted:
                assert after.offset > before.offset, f"{key!r}: {before.offset} processed twice"
        offsets = [a.offset for a in seq if a.accepted]
        assert offsets == sorted(o for o, k in keys.items() if k == key), key
    workers = {a.consumer for a in attempts if a.accepted}
    assert workers == {"steady", "leaving", "silent"}, workers  # each had keys of its own
    assert any(not a.accepted for a in attempts), "no release happened"
    assert held_by_silent, "the silent consumer held nothing: no lock timed out"
    retried = {a.offset for a in attempts if a.delivery_count > 1}
    assert set(held_by_silent) <= retried, "held records were not redelivered after the timeout"


def test_kafkas_java_client_gets_one_key_at_a_time_and_in_order(proxy, topic, broker, java):
    """Three KafkaShareConsumers (kafka-clients 4.3) in one JVM on one partition, releasing
    some records: the Java program checks the same per-key rules on its own clock."""
    t = topic(1)
    produce_keyed(broker.bootstrap, t)
    p = proxy(group_share_min_heartbeat_interval_ms=1000, heartbeat_interval_ms=1000)
    out = run_java(java, "keyed", p.bootstrap, t, _keyed_group(p), RECORDS, 3)
    assert out["keyed.violations"] == "[]", out
    assert out["keyed.problems"] == "[]", out
    assert out["keyed.accepted"] == str(RECORDS), out
    assert int(out["keyed.released"]) >= RECORDS // 13, out  # every 13th, on its first delivery
    assert int(out["keyed.workers"]) >= 2, out  # the keys were shared out
