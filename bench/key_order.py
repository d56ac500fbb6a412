"""Key-ordered share delivery: N ShareConsumers on ONE partition that spend 1-5 ms per record,
with ``share.key.ordering.enable`` on, against one plain consumer keeping partition order (the
way to get per-key order on Kafka without share groups) and against N share consumers with no
order at all, in the same run.

    python -m bench.key_order [--records 4000] [--keys 100] [--consumers 8] [--runs 3]

Reports records processed per second per mode and the ratios to partition order; the median
run. (Confluent's Parallel Consumer reports about 10x over partition order with 50+ keys.)
"""

from __future__ import annotations

import argparse
import random
import statistics
import threading
import time
import uuid

import httpx
from confluent_kafka import Consumer, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, NewTopic
from rich.console import Console
from rich.table import Table

from shareproxy.core import group_config as gc
from shareproxy.demo.tansu import TansuBroker
from tests.support.postgres import TemporaryPostgres
from tests.support.proxy import ProxyProcess

DELAY_S = (0.001, 0.005)  # processing time per record, uniform


def produce(bootstrap: str, topic: str, records: int, keys: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50})
    for i in range(records):
        p.produce(topic, key=b"key-%d" % (i % keys), value=b"v" * 100, partition=0)
    assert p.flush(60) == 0


def work(rng: random.Random) -> None:
    time.sleep(rng.uniform(*DELAY_S))


def partition_order(bootstrap: str, topic: str, records: int) -> float:
    """One consumer reading the partition directly, record after record."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"plain-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    c.subscribe([topic])
    rng = random.Random(1)
    done = 0
    t0 = None
    deadline = time.monotonic() + 600
    while done < records and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is None or m.error() is not None:
            continue
        t0 = t0 or time.monotonic()
        work(rng)
        done += 1
    elapsed = time.monotonic() - (t0 or time.monotonic())
    c.close()
    return done / elapsed


def shared(proxy: ProxyProcess, topic: str, records: int, consumers: int, keyed: bool) -> float:
    """N share consumers of a new group; records processed per second."""
    group = f"keys-{uuid.uuid4().hex[:8]}"
    httpx.put(
        f"{proxy.admin_url}/v1/share-groups/{group}/config",
        json={"configs": {gc.KEY_ORDERING: "true" if keyed else "false"}},
        timeout=30,
    ).raise_for_status()
    count = [0]
    lock = threading.Lock()
    done = threading.Event()
    ready = threading.Barrier(consumers + 1)

    def run(i: int) -> None:
        c = ShareConsumer({"bootstrap.servers": proxy.bootstrap, "group.id": group})
        c.subscribe([topic])
        rng = random.Random(i)
        ready.wait()
        deadline = time.monotonic() + 600
        while not done.is_set() and time.monotonic() < deadline:
            for m in c.poll(0.2) or []:
                if m.error() is None:
                    work(rng)
                    with lock:
                        count[0] += 1
                        if count[0] >= records:
                            done.set()
        c.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(consumers)]
    for t in threads:
        t.start()
    ready.wait()
    t0 = time.monotonic()
    done.wait(600)
    elapsed = time.monotonic() - t0
    for t in threads:
        t.join()
    return count[0] / elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--records", type=int, default=4_000)
    ap.add_argument("--keys", type=int, default=100)
    ap.add_argument("--consumers", type=int, default=8)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    console = Console()
    with TansuBroker() as broker, TemporaryPostgres(fsync=True) as pg:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        topic = "keyed"
        for f in admin.create_topics([NewTopic(topic, 1, 1)]).values():
            f.result(30)
        with console.status(f"producing {args.records:,} records of {args.keys} keys"):
            produce(broker.bootstrap, topic, args.records, args.keys)
        proxy = ProxyProcess(
            broker.bootstrap, pg.create_database("bench"), auto_offset_reset="earliest"
        ).start()
        runs = []
        try:
            for i in range(args.runs):
                with console.status(f"run {i + 1}/{args.runs}: one consumer, partition order"):
                    plain = partition_order(broker.bootstrap, topic, args.records)
                with console.status(f"run {i + 1}/{args.runs}: key-ordered share consumers"):
                    keyed = shared(proxy, topic, args.records, args.consumers, keyed=True)
                with console.status(f"run {i + 1}/{args.runs}: unordered share consumers"):
                    loose = shared(proxy, topic, args.records, args.consumers, keyed=False)
                runs.append((plain, keyed, loose))
                console.print(
                    f"run {i + 1}: partition order {plain:,.0f} rec/s, key-ordered {keyed:,.0f} "
                    f"({keyed / plain:.1f}x), unordered {loose:,.0f} ({loose / plain:.1f}x)"
                )
        finally:
            proxy.stop()
    plain, keyed, loose = sorted(runs, key=lambda r: r[1] / r[0])[len(runs) // 2]
    table = Table(
        title=f"{args.records:,} records of {args.keys} keys on one partition, "
        f"{DELAY_S[0] * 1000:g}–{DELAY_S[1] * 1000:g} ms per record (median run)"
    )
    for col in ("mode", "records/s processed", "÷ partition order"):
        table.add_column(col)
    table.add_row("one consumer, partition order", f"{plain:,.0f}", "1.0")
    table.add_row(f"{args.consumers} share consumers, key-ordered", f"{keyed:,.0f}",
                  f"{keyed / plain:.1f}")  # fmt: skip
    table.add_row(f"{args.consumers} share consumers, unordered", f"{loose:,.0f}",
                  f"{loose / plain:.1f}")  # fmt: skip
    console.print(table)
    ratios = [k / p for p, k, _ in runs]
    console.print(
        "key-ordered ÷ partition order of the runs: "
        + ", ".join(f"{r:.1f}" for r in ratios)
        + f"; median {statistics.median(ratios):.1f}"
    )


if __name__ == "__main__":
    main()
