"""Share-consume throughput through 1, 2 and 3 proxy nodes ÷ a plain consumer reading the same
topic directly, and the failover time of a killed node.

Same run, same topic (6 partitions unless --partitions says otherwise) on a Tansu broker
subprocess, state in Postgres (fsync on). For each cluster size, in alternation: a plain
librdkafka consumer reads every partition directly (the baseline), then ShareConsumers (implicit
acknowledgement, one bootstrapped at each node in turn) read it through the cluster. Then
failover: with consumers running on 3 nodes, one node is SIGKILLed; the figure is the time from
the kill to the first record of a partition it led delivered again (by the node that took it
over), for the node lease given.

    python -m bench.cluster [--records 100000] [--size 1024] [--consumers 3] [--runs 3]
                            [--nodes 1,2,3] [--partitions 6] [--lease-ms 3000]
                            [--failovers 3]

Each drain also gives the proxy's CPU per record: user + system time of every node process ÷
records delivered.
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
import uuid

from confluent_kafka import ShareConsumer
from confluent_kafka.admin import AdminClient, NewTopic
from rich.console import Console
from rich.table import Table

from bench.cpu import CpuPerRecord
from bench.throughput import direct_read, produce, share_read
from shareproxy.demo.tansu import TansuBroker
from tests.support.postgres import TemporaryPostgres
from tests.support.proxy import ProxyProcess


def cluster(broker: TansuBroker, pg: TemporaryPostgres, n: int, **options: object):
    url = pg.create_database(f"bench_{uuid.uuid4().hex[:8]}")
    nodes = [
        ProxyProcess(broker.bootstrap, url, node_id=i + 1, auto_offset_reset="earliest", **options)
        for i in range(n)
    ]
    for node in nodes:
        node.start()
    time.sleep(2 * int(options.get("node_lease_ms", 10_000)) / 3000)  # all have seen all
    return nodes


def leaders(node: ProxyProcess, topic: str) -> dict[int, int]:
    md = AdminClient({"bootstrap.servers": node.bootstrap}).list_topics(topic, timeout=20)
    return {p.id: p.leader for p in md.topics[topic].partitions.values()}


def failover(broker: TansuBroker, pg: TemporaryPostgres, topic: str, lease_ms: int) -> float:
    """Seconds from the kill of a node to the first record of a partition it led delivered."""
    nodes = cluster(broker, pg, 3, node_lease_ms=lease_ms)
    try:
        victim = nodes[0]
        led = {p for p, leader in leaders(nodes[1], topic).items() if leader == 1}
        group = f"failover-{uuid.uuid4().hex[:6]}"
        seen: list[tuple[float, int]] = []
        lock, done = threading.Lock(), threading.Event()

        def run(server: str) -> None:
            c = ShareConsumer({"bootstrap.servers": server, "group.id": group})
            c.subscribe([topic])
            while not done.is_set():
                for m in c.poll(0.2) or []:
                    if m.error() is None:
                        with lock:
                            seen.append((time.monotonic(), m.partition()))
                time.sleep(0.01)  # a consumer doing some work: the topic lasts the run
            c.close()

        threads = [threading.Thread(target=run, args=(n.bootstrap,)) for n in nodes[1:]]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 60
        while not any(p in led for _, p in list(seen)) and time.monotonic() < deadline:
            time.sleep(0.05)
        victim.kill()
        killed = time.monotonic()
        while time.monotonic() - killed < 60:
            with lock:
                after = [at for at, p in seen if p in led and at > killed]
            if after:
                break
            time.sleep(0.02)
        done.set()
        for t in threads:
            t.join()
        return min(after) - killed if after else float("nan")
    finally:
        for node in nodes:
            node.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--consumers", type=int, default=3)
    ap.add_argument("--runs", type=int, default=3, help="runs per cluster size; median shown")
    ap.add_argument("--nodes", default="1,2,3")
    ap.add_argument("--partitions", type=int, default=6, help="partitions of the topic")
    ap.add_argument("--lease-ms", type=int, default=3000, help="node lease in the failover")
    ap.add_argument("--failovers", type=int, default=3)
    args = ap.parse_args()
    sizes = [int(n) for n in args.nodes.split(",")]
    console = Console()
    ratios: dict[int, list[float]] = {n: [] for n in sizes}
    rates: dict[int, list[float]] = {n: [] for n in sizes}
    cpus: dict[int, list[float]] = {n: [] for n in sizes}
    with TansuBroker() as broker, TemporaryPostgres(fsync=True) as pg:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        topic = "bench"
        for f in admin.create_topics([NewTopic(topic, args.partitions, 1)]).values():
            f.result(30)
        with console.status(f"producing {args.records:,} records of {args.size} B"):
            produce(broker.bootstrap, topic, args.records, args.size, partitions=args.partitions)
        for n in sizes:
            nodes = cluster(broker, pg, n)
            try:
                for i in range(args.runs):
                    with console.status(f"{n} node(s), run {i + 1}: plain consumer, directly"):
                        direct = direct_read(
                            broker.bootstrap, topic, args.records, partitions=args.partitions
                        )
                    with (
                        console.status(f"{n} node(s), run {i + 1}: ShareConsumers"),
                        CpuPerRecord(x.proc.pid for x in nodes if x.proc) as cpu,
                    ):
                        drain = share_read(
                            [x.bootstrap for x in nodes], topic, args.records, args.consumers
                        )
                    ratios[n].append(drain.wall / direct[0])
                    rates[n].append(drain.wall)
                    cpus[n].append(cpu.per_record_us(drain.records))
                    console.print(
                        f"{n} node(s) run {i + 1}: direct {direct[0]:,.0f} rec/s, "
                        f"share {drain.wall:,.0f} rec/s, ratio {drain.wall / direct[0]:.2f}, "
                        f"proxy CPU {cpus[n][-1]:.2f} µs/record (all nodes)"
                    )
            finally:
                for node in nodes:
                    node.stop()
        times = []
        for i in range(args.failovers):
            with console.status(f"failover {i + 1}/{args.failovers}"):
                times.append(failover(broker, pg, topic, args.lease_ms))
            console.print(f"failover {i + 1}: {times[-1]:.1f} s")
    table = Table(
        title=f"{args.records:,} records × {args.size} B, {args.partitions} partitions, Tansu, "
        f"{args.consumers} ShareConsumers (median of {args.runs})"
    )
    for col in ("nodes", "share rec/s", "share ÷ direct", "proxy CPU µs/record", "runs"):
        table.add_column(col, justify="right")
    for n in sizes:
        table.add_row(
            str(n),
            f"{statistics.median(rates[n]):,.0f}",
            f"{statistics.median(ratios[n]):.2f}",
            f"{statistics.median(cpus[n]):.2f}",
            ", ".join(f"{r:.2f}" for r in ratios[n]),
        )
    console.print(table)
    if times:
        console.print(
            f"failover (kill → first record of its partitions delivered again), lease "
            f"{args.lease_ms} ms: median [bold]{statistics.median(times):.1f} s[/bold] "
            f"({', '.join(f'{t:.1f}' for t in times)})"
        )


if __name__ == "__main__":
    main()
