"""Many members on many share-partitions: the proxy's memory and its CPU per record there.

One proxy node (state in Postgres, fsync on) before a Tansu broker; a topic of --partitions
partitions with --per-partition records of --size bytes each; --members librdkafka
ShareConsumers in one share group, spread over --processes worker processes (each polls its
consumers in turn), drain it. The proxy's resident memory is sampled throughout; the table gives
its peak and its size once drained; the time members took to subscribe; when the node answered
their joins (from its log, counted from the start: the median and the last; a join librdkafka
retried after its request timed out counts twice); the time to drain; how many members got any
record (the others' partitions were drained by members that held them first, as happens while
joins are answered slowly); and the proxy's CPU per record delivered (joining and heartbeats
included). Then every member polls on, with nothing left, for --idle seconds: what the node
spends on members that only wait (their heartbeats and ShareFetch long polls), per member.

    python -m bench.members [--members 1000] [--partitions 1000] [--per-partition 100]
                            [--size 1024] [--processes 8] [--idle 10]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import statistics
import sys
import threading
import time
import uuid
from collections import Counter
from datetime import datetime
from multiprocessing.sharedctypes import Synchronized

from confluent_kafka import KafkaException, ShareConsumer
from confluent_kafka.admin import AdminClient, NewTopic
from rich.console import Console
from rich.table import Table

from bench.cpu import CpuPerRecord, cpu_seconds
from bench.requests import answered_by_api
from bench.throughput import produce
from shareproxy.demo.tansu import TansuBroker
from tests.support.postgres import TemporaryPostgres
from tests.support.proxy import ProxyProcess

TOPIC = "members"


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def worker(
    bootstrap: str,
    group: str,
    members: int,
    delivered: Synchronized,  # type: ignore[type-arg]
    joined: Synchronized,  # type: ignore[type-arg]
    served: Synchronized,  # type: ignore[type-arg]
    failed: Synchronized,  # type: ignore[type-arg]
    stop: Synchronized,  # type: ignore[type-arg]
) -> None:
    """``members`` ShareConsumers in this process, each polled without waiting in turn."""
    consumers = []
    try:
        for _ in range(members):
            c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, "log_level": 3})
            c.subscribe([TOPIC])
            consumers.append(c)
            with joined.get_lock():
                joined.value += 1
        unserved = set(range(len(consumers)))  # members that have had no record yet
        while not stop.value:
            got = 0
            for i, c in enumerate(consumers):
                n = sum(1 for m in c.poll(0) or [] if m.error() is None)
                if n and i in unserved:
                    unserved.discard(i)
                    with served.get_lock():
                        served.value += 1
                got += n
            if got:
                with delivered.get_lock():
                    delivered.value += got
            else:
                time.sleep(0.01)
    except KafkaException as exc:
        print(f"a worker's consumer failed: {exc}", file=sys.stderr)
        with failed.get_lock():
            failed.value += 1
    closing = [threading.Thread(target=c.close) for c in consumers]  # each waits on the proxy
    for t in closing:
        t.start()
    for t in closing:
        t.join()


class RssPeak:
    """The proxy's resident size, sampled every 0.2 s until stopped."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            self.peak = max(self.peak, rss_bytes(self.pid))

    def __enter__(self) -> RssPeak:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--members", type=int, default=1000)
    ap.add_argument("--partitions", type=int, default=1000)
    ap.add_argument("--per-partition", type=int, default=100)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--processes", type=int, default=8)
    ap.add_argument("--timeout", type=float, default=600, help="seconds for joining and draining")
    ap.add_argument(
        "--idle", type=float, default=10, help="seconds the members poll on once drained"
    )
    args = ap.parse_args()
    records = args.partitions * args.per_partition
    console = Console()
    ctx = mp.get_context("spawn")
    delivered, joined, failed = ctx.Value("q", 0), ctx.Value("q", 0), ctx.Value("q", 0)
    served = ctx.Value("q", 0)
    stop = ctx.Value("b", 0)
    with TansuBroker() as broker, TemporaryPostgres(fsync=True) as pg:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        for f in admin.create_topics([NewTopic(TOPIC, args.partitions, 1)]).values():
            f.result(60)
        with console.status(f"producing {records:,} records of {args.size} B"):
            produce(broker.bootstrap, TOPIC, records, args.size, partitions=args.partitions)
        url = pg.create_database("members")
        proxy = ProxyProcess(
            broker.bootstrap,
            url,
            auto_offset_reset="earliest",
            group_share_max_size=args.members,
            log_format="json",
        ).start()
        assert proxy.proc is not None
        pid = proxy.proc.pid
        idle_rss = rss_bytes(pid)
        group = f"members-{uuid.uuid4().hex[:8]}"
        share = [args.members // args.processes] * args.processes
        for i in range(args.members % args.processes):
            share[i] += 1
        counters = (delivered, joined, served, failed, stop)
        procs = [
            ctx.Process(target=worker, args=(proxy.bootstrap, group, n, *counters))
            for n in share
            if n
        ]
        try:
            with RssPeak(pid) as rss, CpuPerRecord([pid]) as cpu:
                t0, started = time.monotonic(), time.time()
                all_joined = float("nan")
                for p in procs:
                    p.start()
                deadline = t0 + args.timeout
                with console.status("members joining and draining") as status:
                    while (
                        delivered.value < records
                        and time.monotonic() < deadline
                        and not failed.value  # a worker's error ends the run
                    ):
                        status.update(
                            f"{joined.value:,}/{args.members:,} members, "
                            f"{delivered.value:,}/{records:,} records, "
                            f"proxy RSS {rss_bytes(pid) / 2**20:,.0f} MiB"
                        )
                        if joined.value >= args.members and all_joined != all_joined:
                            all_joined = time.monotonic() - t0  # subscribed, not yet assigned
                        time.sleep(0.2)
                drained = time.monotonic() - t0
                end_rss = rss_bytes(pid)
            idle = Idle(pid, proxy.admin_url, args.idle) if not failed.value else None
            stop.value = 1
            for p in procs:
                p.join(60)
        finally:
            for p in procs:
                if p.is_alive():
                    p.kill()
            proxy.stop()
    table = Table(
        title=f"{args.members:,} members, {args.partitions:,} share-partitions, "
        f"{records:,} records × {args.size} B, one node"
    )
    for col in ("measure", "value"):
        table.add_column(col)
    table.add_row("records delivered", f"{delivered.value:,} of {records:,}")
    if failed.value:
        table.add_row("worker processes failed", f"{failed.value} (their error is above)")
    table.add_row("members joined (s)", f"{all_joined:.1f}")
    joins = joins_answered(proxy.log(), started)
    shown = f"{statistics.median(joins):.1f} / {joins[-1]:.1f}" if joins else "none"
    table.add_row(f"joins answered by the node: {len(joins):,}, median / last (s)", shown)
    # the members that took part: where joins are answered slowly, the first few drain most
    table.add_row("members that got records", f"{served.value:,} of {args.members:,}")
    table.add_row("start to drained (s)", f"{drained:.1f}")
    table.add_row("proxy RSS idle / peak / drained (MiB)", _mib(idle_rss, rss.peak, end_rss))
    table.add_row("proxy CPU µs/record", f"{cpu.per_record_us(delivered.value):.2f}")
    if idle is not None and idle.seconds:
        table.add_row(
            f"idle {idle.seconds:.0f} s: proxy CPU per member (µs/s)",
            f"{idle.cpu / idle.seconds / args.members * 1e6:,.0f}",
        )
        table.add_row(
            "idle: heartbeats / ShareFetches per member per second",
            f"{idle.requests['ShareGroupHeartbeat'] / idle.seconds / args.members:.2f} / "
            f"{idle.requests['ShareFetch'] / idle.seconds / args.members:.2f}",
        )
    console.print(table)


class Idle:
    """The node while every member polls with nothing left: its CPU (user + system) and the
    requests it answered, over ``seconds``."""

    def __init__(self, pid: int, admin_url: str, seconds: float) -> None:
        self.seconds = seconds
        self.cpu = 0.0
        self.requests: Counter[str] = Counter()
        if seconds <= 0:
            return
        before, cpu_before = answered_by_api(admin_url), sum(cpu_seconds([pid]))
        time.sleep(seconds)
        self.cpu = sum(cpu_seconds([pid])) - cpu_before
        self.requests = answered_by_api(admin_url)
        self.requests.subtract(before)


def joins_answered(log: str, started: float) -> list[float]:
    """When the node answered each join (its "member joined" lines), in seconds from
    ``started``, in order: a join librdkafka retried after its request timed out counts again."""
    times = []
    for line in log.splitlines():
        if '"member joined"' not in line:
            continue
        entry = json.loads(line)
        at = datetime.fromisoformat(entry["ts"]).timestamp()
        times.append(at - started)
    return sorted(times)


def _mib(*sizes: int) -> str:
    return " / ".join(f"{s / 2**20:,.0f}" for s in sizes)


if __name__ == "__main__":
    main()
