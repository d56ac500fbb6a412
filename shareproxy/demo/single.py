"""``shareproxy demo``: what share groups are for, on embedded parts — a Tansu broker subprocess
(Kafka-compatible, no share groups), SQLite state in a temporary folder, the proxy — and more
real share consumers (confluent-kafka's ShareConsumer) than the topic has partitions.

The consumers join first, then records stream in, so every consumer takes turns on the same
partition. They release a few records (redelivered with a higher delivery count, often to
another consumer) and reject a few (never seen again); the rest are accepted. At the end every
record must be accepted or rejected exactly once, and the tables show who got which offsets.
"""

from __future__ import annotations

import tempfile
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from shareproxy.demo.parts import (
    ClientLog,
    ProxyLog,
    ProxyThread,
    StopRequests,
    offset_ranges,
)
from shareproxy.demo.tansu import TansuBroker
from shareproxy.host.processes import free_port
from shareproxy.settings.model import Settings

TOPIC = "demo-orders"
GROUP = "demo-workers"
SHOWN_RANGES = 8  # per table cell; the count says how many more
SHOWN_REDELIVERIES = 12
STOP_WAIT_S = 5  # for the consumers to leave; the process ends them with it after


@dataclass(frozen=True, slots=True)
class Delivery:
    consumer: int
    partition: int
    offset: int
    delivery_count: int
    decision: str  # accept, release, reject


@dataclass
class DemoOutcome:
    ok: bool
    deliveries: list[Delivery] = field(default_factory=list)
    stop_seconds: float = 0.0  # from the last record settled to everything stopped
    client_log: list[str] = field(default_factory=list)  # librdkafka's lines, kept off screen

    def consumers_of(self, partition: int) -> set[int]:
        return {d.consumer for d in self.deliveries if d.partition == partition}


def _decide(partition: int, offset: int, delivery_count: int) -> str:
    h = (partition * 7919 + offset * 104729) % 100
    if h < 3 and delivery_count == 1:
        return "release"
    if h == 3:
        return "reject"
    return "accept"


def run_demo(records: int, partitions: int, consumers: int, console: Console) -> DemoOutcome:
    with (
        StopRequests() as stop,
        tempfile.TemporaryDirectory(prefix="shareproxy-demo-") as workdir,
    ):
        return _run(records, partitions, consumers, console, Path(workdir), stop)


def _run(
    records: int,
    partitions: int,
    consumers: int,
    console: Console,
    workdir: Path,
    stop: StopRequests,
) -> DemoOutcome:
    from confluent_kafka import AcknowledgeType, Producer, ShareConsumer
    from confluent_kafka.admin import AdminClient, NewTopic

    client_log = ClientLog()
    # the proxy's log is kept until the broker has stopped: its client would report the broker gone
    with ProxyLog() as proxy_log, TansuBroker() as broker:
        stop.check()
        console.print(
            f"[bold]upstream[/bold]  Tansu broker on {broker.bootstrap} (no share groups)"
        )
        admin = AdminClient({"bootstrap.servers": broker.bootstrap, **client_log.config})
        for f in admin.create_topics([NewTopic(TOPIC, partitions, 1)]).values():
            f.result(30)
        del admin
        stop.check()
        port, admin_port = free_port(), free_port()
        settings = Settings(
            bootstrap_servers=broker.bootstrap,
            listen=f"127.0.0.1:{port}",
            admin_listen=f"127.0.0.1:{admin_port}",
            state_url=f"sqlite:///{workdir / 'state.db'}",
            auto_offset_reset="earliest",
            record_lock_duration_ms=10_000,
            group_share_min_record_lock_duration_ms=10_000,  # below Kafka's 15 s minimum
            partition_max_record_locks=100,  # consumers take turns rather than one taking all
        )
        proxy = ProxyThread(settings)
        finished = threading.Event()
        threads: list[threading.Thread] = []
        try:  # from here on, also on Ctrl-C: the consumers and the proxy stop before the broker
            proxy.start(stop)
            console.print(
                f"[bold]proxy[/bold]     shareproxy on 127.0.0.1:{port}, state in {workdir}"
            )
            deliveries: list[Delivery] = []
            settled: dict[tuple[int, int], int] = defaultdict(int)  # accepted or rejected, times
            lock = threading.Lock()
            kinds = {
                "accept": AcknowledgeType.ACCEPT,
                "release": AcknowledgeType.RELEASE,
                "reject": AcknowledgeType.REJECT,
            }

            def consume(i: int) -> None:
                c = ShareConsumer(
                    {
                        "bootstrap.servers": f"127.0.0.1:{port}",
                        "group.id": GROUP,
                        "client.id": f"consumer-{i + 1}",
                        "share.acknowledgement.mode": "explicit",
                        **client_log.config,
                    }
                )
                c.subscribe([TOPIC])
                deadline = time.monotonic() + 120
                while not finished.is_set() and time.monotonic() < deadline:
                    for m in c.poll(0.2) or []:
                        if m.error() is not None:
                            continue
                        partition, offset = m.partition(), m.offset()
                        count = m.delivery_count()
                        # a record, not an error event: all three are set
                        assert partition is not None and offset is not None and count is not None
                        decision = _decide(partition, offset, count)
                        c.acknowledge(m, kinds[decision])
                        time.sleep(0.002)  # the work a record takes: others get their turn
                        with lock:
                            deliveries.append(Delivery(i + 1, partition, offset, count, decision))
                            if decision != "release":
                                settled[(partition, offset)] += 1
                                if len(settled) >= records:
                                    finished.set()
                c.commit_sync()
                c.close()

            for i in range(consumers):
                t = threading.Thread(
                    target=consume, args=(i,), name=f"consumer-{i + 1}", daemon=True
                )
                t.start()
                threads.append(t)  # started: the ones to wait for
            with console.status(f"{consumers} share consumers joining group {GROUP!r}"):
                _wait_for_members(f"http://127.0.0.1:{admin_port}", consumers, stop)
            console.print(
                f"[bold]group[/bold]     {consumers} consumers in {GROUP!r} on {partitions} "
                f"partition{'s' if partitions > 1 else ''}: they share them"
            )
            producer = Producer(
                {"bootstrap.servers": broker.bootstrap, "linger.ms": 5, **client_log.config}
            )
            with Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                TextColumn("{task.completed}/{task.total}"),
                TimeElapsedColumn(),
                console=console,
            ) as progress:
                produced = progress.add_task("produced", total=records)
                done = progress.add_task("accepted or rejected", total=records)
                step = max(1, records // 100)  # records stream in over about two seconds
                for start in range(0, records, step):
                    stop.check()
                    for i in range(start, min(start + step, records)):
                        producer.produce(
                            TOPIC,
                            key=f"order-{i}".encode(),
                            value=f"payload {i}".encode(),
                            partition=i % partitions,
                        )
                    producer.poll(0)
                    progress.update(produced, completed=min(start + step, records))
                    with lock:
                        progress.update(done, completed=len(settled))
                    time.sleep(0.02)
                producer.flush(30)
                del producer
                while any(t.is_alive() for t in threads) and not finished.wait(0.1):
                    stop.check()
                    with lock:
                        progress.update(done, completed=len(settled))
                progress.update(done, completed=len(settled))
        finally:
            finished.set()
            stopping = time.monotonic()
            with console.status("stopping the consumers, the proxy and the broker"):
                deadline = stopping + STOP_WAIT_S
                for t in threads:
                    t.join(max(0.0, deadline - time.monotonic()))
                proxy.stop()
    outcome = DemoOutcome(
        ok=len(settled) == records and all(n == 1 for n in settled.values()),
        deliveries=deliveries,
        stop_seconds=time.monotonic() - stopping,
        client_log=client_log.lines + proxy_log.lines,
    )
    _report(outcome, records, partitions, consumers, settled, console)
    return outcome


def _wait_for_members(admin_url: str, count: int, stop: StopRequests, timeout: float = 60) -> None:
    """Until the group has ``count`` members, each with an assignment to consume."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        stop.check()
        try:
            group = httpx.get(f"{admin_url}/v1/share-groups/{GROUP}", timeout=5).json()
            members = group.get("members", [])
            if len(members) >= count and all(m["assignment"] for m in members):
                return
        except (httpx.HTTPError, ValueError):
            pass
        time.sleep(0.1)
    raise RuntimeError(f"{count} consumers did not join the group within {timeout:.0f}s")


def _report(
    outcome: DemoOutcome,
    records: int,
    partitions: int,
    consumers: int,
    settled: dict[tuple[int, int], int],
    console: Console,
) -> None:
    by: dict[tuple[int, int], list[Delivery]] = defaultdict(list)
    for d in outcome.deliveries:
        by[(d.consumer, d.partition)].append(d)
    table = Table(title=f"who got which offsets of {TOPIC!r}")
    table.add_column("consumer")
    for p in range(partitions):
        table.add_column(f"partition {p}: offsets", overflow="fold")
    for col in ("records", "accepted", "released", "rejected"):
        table.add_column(col, justify="right")
    for c in range(1, consumers + 1):
        mine = [d for d in outcome.deliveries if d.consumer == c]
        cells = []
        for p in range(partitions):
            offsets = sorted(d.offset for d in by[(c, p)])
            cells.append(offset_ranges(offsets, SHOWN_RANGES) or "-")
        counts = [sum(d.decision == k for d in mine) for k in ("accept", "release", "reject")]
        table.add_row(f"consumer-{c}", *cells, str(len(mine)), *map(str, counts))
    console.print(table)

    first: dict[tuple[int, int], Delivery] = {}
    again: list[tuple[Delivery, Delivery]] = []
    for d in outcome.deliveries:
        key = (d.partition, d.offset)
        if d.delivery_count == 1:
            first[key] = d
        elif key in first:
            again.append((first[key], d))
    again.sort(key=lambda x: (x[0].partition, x[0].offset))
    redeliveries = Table(
        title="redeliveries: released, then delivered again",
        caption=f"and {len(again) - SHOWN_REDELIVERIES} more"
        if len(again) > SHOWN_REDELIVERIES
        else None,
    )
    for col in ("partition", "offset", "first to", "then to", "delivery count", "outcome"):
        redeliveries.add_column(col)
    for a, b in again[:SHOWN_REDELIVERIES]:
        redeliveries.add_row(
            str(a.partition),
            str(a.offset),
            f"consumer-{a.consumer} (released)",
            f"consumer-{b.consumer}",
            str(b.delivery_count),
            b.decision + "ed",
        )
    console.print(redeliveries)
    shared = [p for p in range(partitions) if len(outcome.consumers_of(p)) > 1]
    console.print(
        f"{len(shared)} of {partitions} partitions were shared by several consumers; "
        f"stopped in {outcome.stop_seconds:.1f}s"
    )
    twice = sum(1 for n in settled.values() if n > 1)
    if outcome.ok:
        console.print(
            f"[green]every one of the {records} records was accepted or rejected exactly "
            "once[/green]; released records came back with a higher delivery count"
        )
    else:
        console.print(
            f"[red]{records - len(settled)} records never finished, {twice} finished twice[/red]"
        )
        for line in outcome.client_log:  # what the clients said may tell why
            console.print(f"[dim]librdkafka: {line}[/dim]", markup=True, highlight=False)
