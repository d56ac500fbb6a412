"""Scheduled delivery end to end: records produced with ``x-deliver-at`` times rising with the
offset, read by one librdkafka ShareConsumer through the proxy (state in Postgres, fsync on),
each accepted as it comes. The times start once every record has been produced and read in,
so all of them wait in the proxy at once, then fall due at ``--rate`` a second.

Gives each record's lateness (when the consumer got it ÷ its time; the producer, the proxy and
the consumer share this machine's clock), the proxy's CPU per record (user + system of its
process over the whole run ÷ records), and its resident memory while all of them wait, over
what it held before they were produced.

    python -m bench.schedule_e2e [--records 100000] [--rate 5000] [--size 1024]
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid

from confluent_kafka import AcknowledgeType, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, NewTopic
from rich.console import Console
from rich.table import Table

from bench.cpu import CpuPerRecord
from shareproxy.core import group_config as gc
from shareproxy.demo.tansu import TansuBroker
from tests.support.group_configs import alter_group_configs
from tests.support.postgres import TemporaryPostgres
from tests.support.proxy import ProxyProcess

BATCH_RECORDS = 500


def resident_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def produce(bootstrap: str, topic: str, count: int, size: int, first_due: int, rate: int) -> None:
    """``count`` records to partition 0, record i due at first_due + i / rate seconds."""
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 1000,
            "batch.num.messages": BATCH_RECORDS,
            "batch.size": BATCH_RECORDS * (size + 160),
        }
    )
    payload = b"x" * size
    for i in range(count):
        at = b"%d" % (first_due + i * 1000 // rate)
        while True:
            try:
                p.produce(topic, value=payload, partition=0, headers=[("x-deliver-at", at)])
                break
            except BufferError:
                p.poll(0.05)
        if i % 1000 == 0:
            p.poll(0)
    assert p.flush(120) == 0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--rate", type=int, default=5_000, help="records falling due per second")
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--lead-s", type=float, default=20.0, help="from the start to the first time")
    args = ap.parse_args()
    console = Console()
    with TansuBroker() as broker, TemporaryPostgres(fsync=True) as pg:
        topic = "scheduled"
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        for f in admin.create_topics([NewTopic(topic, 1, 1)]).values():
            f.result(30)
        proxy = ProxyProcess(broker.bootstrap, pg.create_database("bench"))
        proxy.start()
        assert proxy.proc is not None
        pid = proxy.proc.pid
        group = f"scheduled-{uuid.uuid4().hex[:8]}"
        alter_group_configs(
            proxy, group, {gc.DELIVER_AT_HEADER: "true", gc.AUTO_OFFSET_RESET: "earliest"}
        )
        consumer = ShareConsumer(
            {
                "bootstrap.servers": proxy.bootstrap,
                "group.id": group,
                "share.acknowledgement.mode": "explicit",
            }
        )
        consumer.subscribe([topic])
        consumer.poll(1.0)  # joined, and reading the partition
        before = resident_mib(pid)
        first_due = int(time.time() * 1000 + args.lead_s * 1000)
        late_ms: list[int] = []
        with CpuPerRecord([pid]) as cpu:
            with console.status(f"producing {args.records:,} records, due from the lead on"):
                produce(broker.bootstrap, topic, args.records, args.size, first_due, args.rate)
            waiting_mib = None
            deadline = time.monotonic() + args.lead_s + args.records / args.rate + 120
            with console.status("consuming as the records fall due"):
                while len(late_ms) < args.records and time.monotonic() < deadline:
                    if waiting_mib is None and time.time() * 1000 >= first_due - 1000:
                        waiting_mib = resident_mib(pid) - before  # all read in, none due yet
                    msgs = list(consumer.poll(0.5) or [])
                    now = time.time() * 1000
                    for m in msgs:
                        if m.error() is not None:
                            continue
                        at = int(bytes(dict(m.headers() or [])["x-deliver-at"]))
                        late_ms.append(int(now - at))
                        consumer.acknowledge(m, AcknowledgeType.ACCEPT)
                    if msgs:
                        consumer.commit_sync()
        consumer.close()
        proxy.stop()
    late = sorted(late_ms) or [0]
    table = Table(
        "records", "falling due /s", "early", "lateness p50 ms", "p99 ms", "max ms",
        "proxy CPU µs/record", "proxy memory while waiting MiB",
        title="scheduled delivery through the proxy (one partition, one ShareConsumer)",
    )  # fmt: skip
    table.add_row(
        f"{len(late_ms):,} of {args.records:,}",
        f"{args.rate:,}",
        str(sum(1 for x in late_ms if x < 0)),
        f"{statistics.median(late):.0f}",
        f"{late[min(len(late) - 1, int(len(late) * 0.99))]}",
        f"{late[-1]}",
        f"{cpu.per_record_us(len(late_ms)):.2f}",
        f"{waiting_mib:.1f}" if waiting_mib is not None else "-",
    )
    console.print(table)


if __name__ == "__main__":
    main()
