"""Fair work when consumers outnumber partitions: N ShareConsumers that each spend a fixed time
per record, on fewer partitions holding large producer batches, with the group config
``share.fair.acquisition.enable`` on (the proxy's default) ÷ off (Kafka's behaviour: whole
batches per fetch) in the same run.

    python -m bench.fair_work [--records 12000] [--consumers 6] [--partitions 3]
                              [--per-record-ms 1] [--runs 3]

Reports records processed per second and each consumer's share, per mode; the median run.
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
import uuid

import httpx
from confluent_kafka import Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, NewTopic
from rich.console import Console
from rich.table import Table

from shareproxy.core import group_config as gc
from shareproxy.demo.tansu import TansuBroker
from tests.support.postgres import TemporaryPostgres
from tests.support.proxy import ProxyProcess


def produce_large_batches(bootstrap: str, topic: str, count: int, partitions: int) -> None:
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 500,
            "batch.num.messages": 100_000,
            "batch.size": 1_000_000,
        }
    )
    for i in range(count):
        p.produce(topic, value=b"v" * 100, partition=i % partitions)
    assert p.flush(60) == 0


def process(proxy: ProxyProcess, topic: str, records: int, consumers: int, per_record_s: float,
            fair: bool) -> tuple[float, list[int]]:  # fmt: skip
    """(records processed per second, records per consumer) for a new group reading ``topic``
    from the start."""
    group = f"fair-{uuid.uuid4().hex[:8]}"
    r = httpx.put(
        f"{proxy.admin_url}/v1/share-groups/{group}/config",
        json={"configs": {gc.FAIR_ACQUISITION: "true" if fair else "false"}},
        timeout=30,
    )
    r.raise_for_status()
    counts = [0] * consumers
    lock = threading.Lock()
    done = threading.Event()
    ready = threading.Barrier(consumers + 1)

    def run(i: int) -> None:
        c = ShareConsumer({"bootstrap.servers": proxy.bootstrap, "group.id": group})
        c.subscribe([topic])
        ready.wait()
        deadline = time.monotonic() + 300
        while not done.is_set() and time.monotonic() < deadline:
            batch = [m for m in c.poll(0.2) or [] if m.error() is None]
            time.sleep(len(batch) * per_record_s)  # the work
            with lock:
                counts[i] += len(batch)
                if sum(counts) >= records:
                    done.set()
        c.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(consumers)]
    for t in threads:
        t.start()
    ready.wait()
    t0 = time.monotonic()
    done.wait(300)
    elapsed = time.monotonic() - t0
    for t in threads:
        t.join()
    return sum(counts) / elapsed, counts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--records", type=int, default=12_000)
    ap.add_argument("--consumers", type=int, default=6)
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--per-record-ms", type=float, default=1.0)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    console = Console()
    with TansuBroker() as broker, TemporaryPostgres(fsync=True) as pg:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        topic = "fair"
        for f in admin.create_topics([NewTopic(topic, args.partitions, 1)]).values():
            f.result(30)
        with console.status(f"producing {args.records:,} records in large batches"):
            produce_large_batches(broker.bootstrap, topic, args.records, args.partitions)
        proxy = ProxyProcess(
            broker.bootstrap, pg.create_database("bench"), auto_offset_reset="earliest"
        ).start()
        try:
            runs = []
            for i in range(args.runs):
                per = args.per_record_ms / 1000
                with console.status(f"run {i + 1}/{args.runs}: fair acquisition off"):
                    off = process(proxy, topic, args.records, args.consumers, per, fair=False)
                with console.status(f"run {i + 1}/{args.runs}: fair acquisition on"):
                    on = process(proxy, topic, args.records, args.consumers, per, fair=True)
                runs.append((on, off))
                console.print(
                    f"run {i + 1}: on {on[0]:,.0f} rec/s {on[1]}, off {off[0]:,.0f} rec/s "
                    f"{off[1]}, ratio {on[0] / off[0]:.2f}"
                )
        finally:
            proxy.stop()
    ratios = [on[0] / off[0] for on, off in runs]
    median = sorted(runs, key=lambda r: r[0][0] / r[1][0])[len(runs) // 2]
    table = Table(
        title=f"{args.records:,} records, {args.partitions} partitions, {args.consumers} "
        f"ShareConsumers, {args.per_record_ms} ms per record (median run)"
    )
    for col in ("fair acquisition", "records/s processed", "records per consumer"):
        table.add_column(col)
    for name, (rate, counts) in (("on (default)", median[0]), ("off (as Kafka)", median[1])):
        table.add_row(name, f"{rate:,.0f}", " / ".join(map(str, counts)))
    console.print(table)
    console.print(
        f"throughput ratio on ÷ off of the {len(runs)} runs: "
        + ", ".join(f"{r:.2f}" for r in ratios)
        + f"; median {statistics.median(ratios):.2f}"
    )


if __name__ == "__main__":
    main()
