"""What a relayed Produce costs the proxy and adds to a producer's wait, for two or more builds
in one call, on one Tansu broker.

Each round starts each build's proxy in turn (a fresh SQLite store each), and a librdkafka
producer that flushes after every two records of 100 B times each flush through it and, pair by
pair, directly; the figures are the proxy's CPU per flush and what it added to the flush at the
median and the 99th percentile. Builds alternate round by round, so neither gets the quieter
machine. A build is a checkout of the repository (``git worktree add /tmp/old <commit>``):

    python -m bench.relay_builds --build old=/tmp/old --build new=. [--rounds 5] [--flushes 3000]
                                 [--bulk-records 100000]

A proxy is started with its build first on ``PYTHONPATH`` and from a directory outside every
checkout (``python -m`` puts the current directory before ``PYTHONPATH``).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from rich.console import Console
from rich.table import Table

from bench import throughput
from bench.builds import checkouts, outside_checkouts
from bench.cpu import CpuPerRecord, cpu_seconds
from shareproxy.demo.tansu import TansuBroker
from tests.support.proxy import ProxyProcess

PAYLOAD = b"x" * 100


def flush_pair(producer: Producer, topic: str) -> float:
    start = time.perf_counter()
    producer.produce(topic, value=PAYLOAD)
    producer.produce(topic, value=PAYLOAD)
    producer.flush(30)
    return time.perf_counter() - start


def ms(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] * 1000


def one_round(
    bootstrap: str, topic: str, direct: Producer, build: Path, flushes: int, bulk: tuple[str, int]
) -> tuple[float, float, float, float]:
    """(proxy CPU per flush in µs, added p50 ms, added p99 ms, proxy CPU per bulk record in
    µs) of one build; ``bulk``: the topic and how many records for the bulk leg."""
    state = tempfile.TemporaryDirectory(prefix="bench-relay-builds-")
    proxy = ProxyProcess(bootstrap, f"sqlite+aiosqlite:///{state.name}/state.db")
    proxy.start(env={"PYTHONPATH": str(build)})
    try:
        proxied = Producer({"bootstrap.servers": proxy.bootstrap, "linger.ms": 0})
        for producer in (proxied, direct):  # connections made, metadata known
            for _ in range(100):
                flush_pair(producer, topic)
        assert proxy.proc is not None
        before = sum(cpu_seconds([proxy.proc.pid]))
        through: list[float] = []
        straight: list[float] = []
        for i in range(flushes):
            sides = [(proxied, through), (direct, straight)]
            for producer, waits in sides if i % 2 else reversed(sides):
                waits.append(flush_pair(producer, topic))
        cpu = (sum(cpu_seconds([proxy.proc.pid])) - before) / flushes
        bulk_topic, records = bulk
        with CpuPerRecord([proxy.proc.pid]) as bulk_cpu:
            if records:
                throughput.produce(proxy.bootstrap, bulk_topic, records, 1024)
    finally:
        proxy.stop()
        state.cleanup()
    added = ms(through, 50) - ms(straight, 50), ms(through, 99) - ms(straight, 99)
    return cpu * 1e6, *added, bulk_cpu.per_record_us(records)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build", action="append", required=True, metavar="NAME=PATH")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--flushes", type=int, default=3000)
    parser.add_argument("--bulk-records", type=int, default=100_000)
    args = parser.parse_args()
    builds = checkouts(parser, args.build)
    outside_checkouts("bench-relay-builds-")
    results: dict[str, list[tuple[float, float, float, float]]] = {name: [] for name in builds}
    with TansuBroker() as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        topic = f"bench-{uuid.uuid4().hex[:8]}"
        bulk_topic = f"bench-bulk-{uuid.uuid4().hex[:8]}"
        created = [NewTopic(topic, 1, 1), NewTopic(bulk_topic, throughput.PARTITIONS, 1)]
        for f in admin.create_topics(created).values():
            f.result(30)
        direct = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
        for r in range(args.rounds):
            for name, root in builds.items():
                bulk = (bulk_topic, args.bulk_records)
                found = one_round(broker.bootstrap, topic, direct, root, args.flushes, bulk)
                results[name].append(found)
                cpu, p50, p99, per_record = found
                print(
                    f"round {r + 1} {name}: {cpu:.0f} µs, {p50:+.3f} / {p99:+.3f} ms; "
                    f"bulk {per_record:.2f} µs/record"
                )
    table = Table(
        title=f"{args.flushes:,} flushes of two 100 B records, then {args.bulk_records:,} "
        f"records of 1 KiB in batches of 500, {args.rounds} rounds (medians)"
    )
    columns = ("build", "proxy CPU per flush", "added p50", "added p99", "bulk: CPU per record")
    for column in columns:
        table.add_column(column, justify="left" if column == "build" else "right")
    for name, rows in results.items():
        cpu, p50, p99, per_record = (
            statistics.median(column) for column in zip(*rows, strict=True)
        )
        table.add_row(
            name, f"{cpu:.0f} µs", f"{p50:+.3f} ms", f"{p99:+.3f} ms", f"{per_record:.2f} µs"
        )
    Console().print(table)


if __name__ == "__main__":
    main()
