"""Share-consume throughput through the proxy ÷ a plain consumer reading the same topic directly.

Same run, same topic on a Tansu broker subprocess: first a plain librdkafka consumer reads every
partition directly (the baseline), then ShareConsumers read it through shareproxy with its state
in Postgres (fsync on), once with implicit acknowledgement and once explicit (every record
acknowledged, ``commit_sync`` after each poll). Each share drain also gives the proxy's CPU per
record: user + system time of the proxy process ÷ records delivered, the figure that machines of
different sizes agree on. Then produce→deliver latency for both, with records produced at a
steady rate while each reader runs.

    python -m bench.throughput [--records 200000] [--size 1024] [--batch-records 500]
                               [--consumers 3] [--runs 5] [--modes implicit,explicit] [--secure]
                               [--max-poll-records N]

--secure: the ShareConsumers log in with SCRAM-SHA-512 over a SASL_PLAINTEXT listener and the
proxy enforces ACLs (one prefixed group rule, one topic rule), the cost of security on.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

import httpx
from confluent_kafka import AcknowledgeType, Consumer, Producer, ShareConsumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from rich.console import Console
from rich.table import Table

from bench.cpu import CpuPerRecord
from bench.requests import per_thousand, scrape
from shareproxy.demo.tansu import TansuBroker
from tests.support.postgres import TemporaryPostgres
from tests.support.proxy import ProxyProcess

PARTITIONS = 3
# records in each producer batch. The proxy hands out whole batches up to the ShareFetch's
# MaxRecords (librdkafka asks 500), so the records per answer, and with them the proxy's CPU per
# record, follow the batch size: batches cut by linger held 300-475 records, by how fast the
# machine produced that run, and the CPU per record swung by 1.5 µs between runs with it
BATCH_RECORDS = 500


def produce(
    bootstrap: str,
    topic: str,
    count: int,
    size: int,
    rate: float | None = None,
    partitions: int = PARTITIONS,
    batch_records: int = BATCH_RECORDS,
) -> None:
    """``count`` records round-robin over the partitions; unless sent at a ``rate`` (one at a
    time, for latency), in batches of exactly ``batch_records`` (the last ones shorter)."""
    batched = {
        "linger.ms": 1000,  # never the limit: a batch is sent once it holds batch_records
        "batch.num.messages": batch_records,
        "batch.size": min(batch_records * (size + 128), 2**31 - 1),
    }
    p = Producer(
        {"bootstrap.servers": bootstrap, **(batched if rate is None else {"linger.ms": 0})}
    )
    payload = b"x" * size
    start = time.monotonic()
    for i in range(count):
        while True:
            try:
                p.produce(topic, value=payload, partition=i % partitions)
                break
            except BufferError:  # the local queue is full: let deliveries drain
                p.poll(0.05)
        if i % 1000 == 0:
            p.poll(0)
        if rate is not None:
            ahead = (i / rate) - (time.monotonic() - start)
            if ahead > 0:
                time.sleep(ahead)
    p.flush(120)


def direct_read(
    bootstrap: str,
    topic: str,
    count: int,
    latencies: list | None = None,
    partitions: int = PARTITIONS,
) -> tuple[float, float]:
    """(records/s from start, records/s from the first record to the last)."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"direct-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 100,
        }
    )
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    n = 0
    t0 = time.monotonic()
    first = None
    while n < count and time.monotonic() - t0 < 300:
        for m in c.consume(1000, 0.5):
            if m.error() is None:
                if first is None:
                    first = time.monotonic()
                n += 1
                if latencies is not None:
                    latencies.append(time.time() * 1000 - m.timestamp()[1])
    end = time.monotonic()
    c.close()
    return n / (end - t0), n / (end - (first or t0))


@dataclass(frozen=True)
class Drain:
    records: int
    wall: float  # records/s from the start
    first_to_last: float  # records/s from the first record to the last

    @property
    def rates(self) -> tuple[float, float]:
        return self.wall, self.first_to_last


def share_read(
    bootstrap: str | list[str],
    topic: str,
    count: int,
    consumers: int,
    latencies: list | None = None,
    client: dict | None = None,
    explicit: bool = False,
    progress: Callable[[int], None] | None = None,
) -> Drain:
    """Consumer i bootstraps at ``bootstrap[i % len]`` when several nodes are given; explicit:
    every record acknowledged (ACCEPT) and ``commit_sync`` after each poll that returned any;
    ``progress`` is told the records delivered so far after each poll that returned any."""
    servers = [bootstrap] if isinstance(bootstrap, str) else bootstrap
    if explicit:
        client = {**(client or {}), "share.acknowledgement.mode": "explicit"}
    group = f"bench-{uuid.uuid4().hex[:8]}"
    total = [0]
    first: list[float] = []
    lock = threading.Lock()
    done = threading.Event()

    def run(server: str) -> None:
        c = ShareConsumer({"bootstrap.servers": server, "group.id": group, **(client or {})})
        c.subscribe([topic])
        deadline = time.monotonic() + 300
        while not done.is_set() and time.monotonic() < deadline:
            msgs = c.poll(0.5) or []
            now = time.time() * 1000
            ok = [m for m in msgs if m.error() is None]
            if explicit and ok:
                for m in ok:
                    c.acknowledge(m, AcknowledgeType.ACCEPT)
                c.commit_sync()
            with lock:
                if ok and not first:
                    first.append(time.monotonic())
                total[0] += len(ok)
                if progress is not None and ok:
                    progress(total[0])
                if latencies is not None:
                    latencies.extend(now - m.timestamp()[1] for m in ok)
                if total[0] >= count:
                    done.set()
        c.close()

    threads = [
        threading.Thread(target=run, args=(servers[i % len(servers)],)) for i in range(consumers)
    ]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    while not done.is_set() and time.monotonic() - t0 < 300:
        time.sleep(0.01)
    end = time.monotonic()
    done.set()
    for t in threads:
        t.join()
    return Drain(total[0], total[0] / (end - t0), total[0] / (end - (first[0] if first else t0)))


USERS = {"admin": "bench-Admin-1", "bench": "bench-User-2"}


def secure(proxy: ProxyProcess, state_url: str) -> dict:
    """Users in the store, a SCRAM listener and authorization on; the consumers' settings."""
    cli = [sys.executable, "-m", "shareproxy.cli"]
    subprocess.run([*cli, "migrate", "--state-url", state_url], check=True, capture_output=True)
    for name, password in USERS.items():
        subprocess.run(
            [*cli, "users", "add", name, "--password-stdin", "--state-url", state_url],
            input=password + "\n",
            text=True,
            check=True,
            capture_output=True,
        )
    proxy.options.update(
        listeners=f"SASL_PLAINTEXT://127.0.0.1:{proxy.port}",
        super_users="User:admin",
        authorization="on",
    )
    return {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "bench",
        "sasl.password": USERS["bench"],
    }


def grant(proxy: ProxyProcess) -> None:
    rules = [("GROUP", "bench-", "PREFIXED"), ("TOPIC", "bench", "LITERAL")]
    rules.append(("TOPIC", "lat-share", "LITERAL"))
    body = [
        {"principal": "User:bench", "resource_type": t, "resource_name": n, "pattern_type": p}
        | {"operation": "READ", "permission": "ALLOW"}
        for t, n, p in rules
    ]
    r = httpx.post(
        f"{proxy.admin_url}/v1/acls", json=body, auth=("admin", USERS["admin"]), timeout=30
    )
    r.raise_for_status()


def pct(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100)[int(q) - 1] if len(values) > 1 else float("nan")


MODES = ("implicit", "explicit")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument(
        "--batch-records", type=int, default=BATCH_RECORDS, help="records per producer batch"
    )
    ap.add_argument("--consumers", type=int, default=3)
    ap.add_argument("--runs", type=int, default=5, help="throughput runs; the median is shown")
    ap.add_argument("--modes", default=",".join(MODES), help="acknowledgement modes to drain in")
    ap.add_argument("--latency-records", type=int, default=5000)
    ap.add_argument("--latency-rate", type=float, default=1000.0)
    ap.add_argument("--secure", action="store_true", help="SASL SCRAM listener and ACLs on")
    ap.add_argument(
        "--max-poll-records",
        type=int,
        help="the ShareConsumers' max.poll.records (librdkafka's default: 500), which is the "
        "MaxRecords of their ShareFetch: the records per answer, so the per-request costs",
    )
    args = ap.parse_args()
    modes = [m for m in args.modes.split(",") if m]
    if not modes or set(modes) - set(MODES):
        ap.error(f"--modes: a comma-separated list of {', '.join(MODES)}")
    console = Console()
    with TansuBroker() as broker, TemporaryPostgres(fsync=True) as pg:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        topic = "bench"
        for f in admin.create_topics([NewTopic(topic, PARTITIONS, 1)]).values():
            f.result(30)
        with console.status(f"producing {args.records:,} records of {args.size} B"):
            produce(
                broker.bootstrap, topic, args.records, args.size, batch_records=args.batch_records
            )
        url = pg.create_database("bench")
        proxy = ProxyProcess(broker.bootstrap, url, auto_offset_reset="earliest")
        client: dict = {}
        if args.secure:
            client = secure(proxy, url)
        if args.max_poll_records is not None:
            client["max.poll.records"] = args.max_poll_records
        proxy.start()
        assert proxy.proc is not None
        if args.secure:
            grant(proxy)
        try:
            # per mode: (direct rates, share drain, proxy µs of CPU per record) of each run
            runs: dict[str, list[tuple[tuple[float, float], Drain, float]]] = {m: [] for m in modes}
            for i in range(args.runs):
                with console.status(f"run {i + 1}/{args.runs}: plain consumer, directly"):
                    direct = direct_read(broker.bootstrap, topic, args.records)
                for mode in modes:
                    seen = scrape(proxy.admin_url)
                    with (
                        console.status(f"run {i + 1}/{args.runs}: ShareConsumers, {mode} acks"),
                        CpuPerRecord([proxy.proc.pid]) as cpu,
                    ):
                        drain = share_read(
                            proxy.bootstrap,
                            topic,
                            args.records,
                            args.consumers,
                            client=client,
                            explicit=mode == "explicit",
                        )
                    us = cpu.per_record_us(drain.records)
                    runs[mode].append((direct, drain, us))
                    kernel = cpu.system_share()
                    console.print(
                        f"run {i + 1} {mode}: direct {direct[0]:,.0f} rec/s, share "
                        f"{drain.wall:,.0f} rec/s, ratio {drain.wall / direct[0]:.2f} "
                        f"(first→last {drain.first_to_last / direct[1]:.2f}), "
                        f"proxy CPU {us:.2f} µs/record ({kernel:.0%} in the kernel)"
                    )
                    console.print(
                        f"  per 1,000 records: "
                        f"{per_thousand(seen, scrape(proxy.admin_url), drain.records)}"
                    )
            lat_direct: list[float] = []
            lat_share: list[float] = []
            for name, reader, sink in (("direct", "d", lat_direct), ("share", "s", lat_share)):
                t2 = f"lat-{name}"
                for f in admin.create_topics([NewTopic(t2, PARTITIONS, 1)]).values():
                    f.result(30)
                if reader == "d":
                    th = threading.Thread(
                        target=direct_read, args=(broker.bootstrap, t2, args.latency_records, sink)
                    )
                else:
                    th = threading.Thread(
                        target=share_read,
                        args=(proxy.bootstrap, t2, args.latency_records, args.consumers, sink),
                        kwargs={"client": client},
                    )
                th.start()
                time.sleep(3)  # let the reader join and settle
                with console.status(f"latency: {name}"):
                    produce(broker.bootstrap, t2, args.latency_records, 100, args.latency_rate)
                    th.join()
        finally:
            proxy.stop()
    table = Table(
        title=f"{args.records:,} records × {args.size} B, {PARTITIONS} partitions, Tansu "
        + ("(SASL SCRAM + ACLs, median run)" if args.secure else "(median run)")
    )
    columns = ("reader", "records/s (wall)", "records/s (first→last)", "share ÷ direct")
    for col in (*columns, "proxy CPU µs/record", "p50 ms", "p99 ms"):
        table.add_column(col, justify="right")
    # the run with the median wall-clock ratio stands for each mode; its direct read is the baseline
    median = {
        m: sorted(r, key=lambda run: run[1].wall / run[0][0])[len(r) // 2] for m, r in runs.items()
    }
    direct = median[modes[0]][0]
    table.add_row(
        "plain consumer, direct (baseline)",
        f"{direct[0]:,.0f}",
        f"{direct[1]:,.0f}",
        "1",
        "",
        f"{pct(lat_direct, 50):.1f}",
        f"{pct(lat_direct, 99):.1f}",
    )
    for mode in modes:
        d, drain, _ = median[mode]
        cpu_us = statistics.median(us for _, _, us in runs[mode])
        implicit = mode == "implicit"
        table.add_row(
            f"{args.consumers} ShareConsumers via shareproxy, {mode} acks",
            f"{drain.wall:,.0f}",
            f"{drain.first_to_last:,.0f}",
            f"{drain.wall / d[0]:.2f}",
            f"{cpu_us:.2f}",
            f"{pct(lat_share, 50):.1f}" if implicit else "",
            f"{pct(lat_share, 99):.1f}" if implicit else "",
        )
    console.print(table)
    for mode in modes:
        ratios = sorted(drain.wall / d[0] for d, drain, _ in runs[mode])
        cpu = sorted(us for _, _, us in runs[mode])
        console.print(
            f"{mode}: wall-clock ratios of the {len(ratios)} runs "
            + ", ".join(f"{r:.2f}" for r in ratios)
            + f"; proxy CPU µs/record {', '.join(f'{u:.2f}' for u in cpu)} — median "
            f"[bold]{statistics.median(cpu):.2f}[/bold]"
        )


if __name__ == "__main__":
    main()
