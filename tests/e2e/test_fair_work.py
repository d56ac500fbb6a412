"""Fair work when consumers outnumber partitions (beyond KIP-932): six librdkafka share consumers
on three partitions whose records came in large producer batches all get a share of the work.

Without it, each fetch acquires whole producer batches (max.poll.records is a soft limit in
KIP-932's batch-optimized mode), so the first consumers to fetch take a partition's backlog and
the others wait idle.
"""

from __future__ import annotations

import threading
import time
import uuid

import httpx
import pytest
from confluent_kafka import Producer

from tests.support.consumers import share_consumer, wait_for

CONSUMERS = 6
PARTITIONS = 3
RECORDS = 12_000
PER_RECORD_S = 0.001  # processing time: the work to share
# every consumer processes within this spread of an even share (1/6 of the records); measured
# runs stay within 0.5% of it
SPREAD = 0.25


def produce_in_large_batches(bootstrap: str, topic: str) -> int:
    """Records in producer batches of thousands; the number of batches the log holds."""
    delivered: list[int] = []
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 500,
            "batch.num.messages": 100_000,
            "batch.size": 1_000_000,
        }
    )
    for i in range(RECORDS):
        p.produce(
            topic,
            key=str(i).encode(),
            value=b"v" * 50,
            partition=i % PARTITIONS,
            on_delivery=lambda err, m: delivered.append(m.offset()) if err is None else None,
        )
    assert p.flush(30) == 0
    assert len(delivered) == RECORDS
    return len(delivered)


@pytest.mark.long
def test_six_consumers_on_three_partitions_all_get_work(proxy, topic, broker):
    t = topic(PARTITIONS)
    p = proxy(group_share_min_heartbeat_interval_ms=1000, heartbeat_interval_ms=1000)
    group = f"g-{uuid.uuid4().hex[:6]}"
    counts = [0] * CONSUMERS
    seen: set[tuple[int, int]] = set()
    lock = threading.Lock()
    done = threading.Event()
    stop = threading.Event()

    def run(i: int) -> None:
        c = share_consumer(p, group)
        c.subscribe([t])
        try:
            while not stop.is_set():
                batch = c.poll(0.2) or []
                for m in batch:
                    assert m.error() is None, m.error()
                    with lock:
                        assert (m.partition(), m.offset()) not in seen, "delivered twice"
                        seen.add((m.partition(), m.offset()))
                        counts[i] += 1
                        if len(seen) == RECORDS:
                            done.set()
                time.sleep(len(batch) * PER_RECORD_S)
            c.commit_sync()
        finally:
            c.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(CONSUMERS)]
    for th in threads:
        th.start()
    try:
        with httpx.Client(base_url=p.admin_url, timeout=30) as http:

            def all_assigned() -> bool:
                r = http.get(f"/v1/share-groups/{group}")
                members = r.json()["members"] if r.status_code == 200 else []
                return len(members) == CONSUMERS and all(m["assignment"] for m in members)

            wait_for(all_assigned, 60, "six members with partitions")
        time.sleep(2)  # each member has heard its assignment (heartbeats every second)
        produce_in_large_batches(broker.bootstrap, t)
        assert done.wait(120), f"{len(seen)} of {RECORDS} processed: {counts}"
    finally:
        stop.set()
        for th in threads:
            th.join(60)
    even = RECORDS / CONSUMERS
    assert all(abs(n - even) <= SPREAD * even for n in counts), f"records per consumer: {counts}"
    assert sum(counts) == RECORDS
