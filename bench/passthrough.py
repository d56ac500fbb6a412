"""Producing and plain consuming through the proxy ÷ the same directly against the broker.

Same run, same Tansu broker subprocess: a librdkafka producer writes ``--records`` records to a
fresh topic directly, then another fresh topic through the proxy; a plain consumer (assign, no
group) reads each topic back, directly and through the proxy. Each pair alternates the order
per run so neither side always has the warmer broker. The ratios are what the transparent
endpoint costs (a Java pass-through proxy measures 0.94-0.97). The proxy's CPU per record read
through it is the floor of the share path: the same bytes in from the broker and out to a client,
with no share-group work around them.

    python -m bench.passthrough [--records 200000] [--size 1024] [--runs 5]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import uuid

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from rich.console import Console
from rich.table import Table

from bench import throughput
from bench.cpu import CpuPerRecord
from shareproxy.demo.tansu import TansuBroker
from tests.support.proxy import ProxyProcess

PARTITIONS = 3


def produce(bootstrap: str, topic: str, count: int, size: int) -> float:
    """Records per second, from the first produce to the last acknowledgement."""
    start = time.monotonic()
    throughput.produce(bootstrap, topic, count, size)
    return count / (time.monotonic() - start)


def consume(bootstrap: str, topic: str, count: int) -> float:
    """Records per second reading every partition from the start."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 100,
        }
    )
    c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    n = 0
    start = time.monotonic()
    while n < count and time.monotonic() - start < 300:
        for m in c.consume(10000, 0.5):
            if m.error() is None:
                n += 1
    elapsed = time.monotonic() - start
    c.close()
    assert n == count, f"read {n} of {count}"
    return count / elapsed


def topic(admin: AdminClient) -> str:
    name = f"bench-{uuid.uuid4().hex[:8]}"
    for f in admin.create_topics([NewTopic(name, PARTITIONS, 1)]).values():
        f.result(30)
    return name


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    console = Console()
    rows: list[tuple[float, float, float, float]] = []
    cpu_us: list[tuple[float, float]] = []  # the proxy's µs per record relayed: produce, consume
    with TansuBroker() as broker:
        state = tempfile.TemporaryDirectory(prefix="bench-passthrough-")
        proxy = ProxyProcess(broker.bootstrap, f"sqlite+aiosqlite:///{state.name}/state.db").start()
        try:
            admin = AdminClient({"bootstrap.servers": broker.bootstrap})
            for run in range(args.runs):
                direct_topic, proxied_topic = topic(admin), topic(admin)
                order = [("direct", broker.bootstrap, direct_topic)]
                order.append(("proxy", proxy.bootstrap, proxied_topic))
                if run % 2:
                    order.reverse()
                rates: dict[str, tuple[float, float]] = {}
                assert proxy.proc is not None
                for side, bootstrap, name in order:
                    with CpuPerRecord([proxy.proc.pid]) as producing:
                        wrote = produce(bootstrap, name, args.records, args.size)
                    with CpuPerRecord([proxy.proc.pid]) as consuming:
                        read = consume(bootstrap, name, args.records)
                    rates[side] = (wrote, read)
                    if side == "proxy":
                        cpu_us.append(
                            (
                                producing.per_record_us(args.records),
                                consuming.per_record_us(args.records),
                            )
                        )
                (dp, dc), (pp, pc) = rates["direct"], rates["proxy"]
                rows.append((dp, pp, dc, pc))
                console.print(
                    f"run {run + 1}: produce {pp:,.0f}/{dp:,.0f} = {pp / dp:.2f}; "
                    f"consume {pc:,.0f}/{dc:,.0f} = {pc / dc:.2f}; proxy CPU µs/record "
                    f"produce {cpu_us[-1][0]:.2f}, consume {cpu_us[-1][1]:.2f}"
                )
        finally:
            proxy.stop()
            state.cleanup()
    table = Table(title=f"{args.records:,} records of {args.size} B, {args.runs} runs (median)")
    for column in ("", "direct rec/s", "proxy rec/s", "proxy ÷ direct", "proxy CPU µs/record"):
        table.add_column(column, justify="right")
    for label, d, p, cpu in (
        ("produce", [r[0] for r in rows], [r[1] for r in rows], [c[0] for c in cpu_us]),
        ("plain consume", [r[2] for r in rows], [r[3] for r in rows], [c[1] for c in cpu_us]),
    ):
        ratios = [b / a for a, b in zip(d, p, strict=True)]
        table.add_row(
            label,
            f"{statistics.median(d):,.0f}",
            f"{statistics.median(p):,.0f}",
            f"{statistics.median(ratios):.2f}",
            f"{statistics.median(cpu):.2f}",
        )
    console.print(table)


if __name__ == "__main__":
    main()
