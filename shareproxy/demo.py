"""``shareproxy demo``: everything embedded — a Tansu broker subprocess, SQLite state, the
proxy — and three real share consumers (confluent-kafka's ShareConsumer) sharing a topic.

Consumers release a few records (they come back with a higher delivery count, possibly to
another consumer) and reject a few (never seen again); the rest are accepted. At the end every
record must be accepted or rejected exactly once.
"""

from __future__ import annotations

import asyncio
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from shareproxy.config import Settings
from shareproxy.embedded import TansuBroker, free_port


@dataclass
class ConsumerStats:
    received: int = 0
    redeliveries: int = 0
    accepted: int = 0
    released: int = 0
    rejected: int = 0
    partitions: Counter[int] = field(default_factory=Counter)


class _ProxyThread:
    """The proxy on its own event loop, beside the (blocking) consumer threads."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.ready = threading.Event()
        self.error: BaseException | None = None
        self._stop: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.thread = threading.Thread(target=self._run, name="shareproxy", daemon=True)

    def _run(self) -> None:
        from shareproxy.server import Proxy

        async def main() -> None:
            proxy = Proxy(self.settings)
            self._loop = asyncio.get_running_loop()
            self._stop = asyncio.Event()
            await proxy.start()
            self.ready.set()
            await self._stop.wait()
            await proxy.stop()

        try:
            asyncio.run(main())
        except BaseException as exc:
            self.error = exc
            self.ready.set()

    def start(self) -> None:
        self.thread.start()
        self.ready.wait(60)
        if self.error is not None:
            raise RuntimeError(f"the proxy failed to start: {self.error}") from self.error

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self.thread.join(30)


_COUNTED = {"accept": "accepted", "release": "released", "reject": "rejected"}


def _decide(partition: int, offset: int, delivery_count: int) -> str:
    h = (partition * 7919 + offset * 104729) % 100
    if h < 3 and delivery_count == 1:
        return "release"
    if h == 3:
        return "reject"
    return "accept"


def run_demo(records: int, partitions: int, consumers: int, console: Console) -> bool:
    from confluent_kafka import AcknowledgeType, Producer, ShareConsumer
    from confluent_kafka.admin import AdminClient, NewTopic

    workdir = Path(tempfile.mkdtemp(prefix="shareproxy-demo-"))
    topic = "demo-orders"
    with TansuBroker() as broker:
        console.print(
            f"[bold]upstream[/bold]  Tansu broker on {broker.bootstrap} (no share groups)"
        )
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        for f in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
            f.result(30)
        producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
        for i in range(records):
            producer.produce(
                topic,
                key=f"order-{i}".encode(),
                value=f"payload {i}".encode(),
                partition=i % partitions,
            )
        producer.flush(30)
        console.print(
            f"[bold]produced[/bold]  {records} records to {topic!r} ({partitions} partitions)"
        )
        port = free_port()
        settings = Settings(
            bootstrap_servers=broker.bootstrap,
            listen=f"127.0.0.1:{port}",
            admin_listen=f"127.0.0.1:{free_port()}",
            state_url=f"sqlite:///{workdir / 'state.db'}",
            auto_offset_reset="earliest",
            record_lock_duration_ms=10_000,
        )
        proxy = _ProxyThread(settings)
        proxy.start()
        console.print(
            f"[bold]proxy[/bold]     shareproxy on 127.0.0.1:{port}, "
            f"state in {workdir / 'state.db'}"
        )
        stats = [ConsumerStats() for _ in range(consumers)]
        done: Counter[tuple[int, int]] = Counter()  # (partition, offset) -> accepted/rejected
        lock = threading.Lock()
        finished = threading.Event()
        kinds = {
            "accept": AcknowledgeType.ACCEPT,
            "release": AcknowledgeType.RELEASE,
            "reject": AcknowledgeType.REJECT,
        }

        def consume(i: int) -> None:
            c = ShareConsumer(
                {
                    "bootstrap.servers": f"127.0.0.1:{port}",
                    "group.id": "demo-workers",
                    "share.acknowledgement.mode": "explicit",
                }
            )
            c.subscribe([topic])
            s = stats[i]
            deadline = time.monotonic() + 120
            while not finished.is_set() and time.monotonic() < deadline:
                for m in c.poll(0.5) or []:
                    if m.error() is not None:
                        continue
                    s.received += 1
                    s.partitions[m.partition()] += 1
                    if m.delivery_count() > 1:
                        s.redeliveries += 1
                    decision = _decide(m.partition(), m.offset(), m.delivery_count())
                    c.acknowledge(m, kinds[decision])
                    field_name = _COUNTED[decision]
                    setattr(s, field_name, getattr(s, field_name) + 1)
                    if decision != "release":
                        with lock:
                            done[(m.partition(), m.offset())] += 1
                            if len(done) >= records:
                                finished.set()
            c.commit_sync()
            c.close()

        threads = [threading.Thread(target=consume, args=(i,)) for i in range(consumers)]
        with Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            TextColumn("{task.completed}/{task.total}"),
            TimeElapsedColumn(),
            console=console,
        ) as progress:
            task = progress.add_task("accepted or rejected", total=records)
            for t in threads:
                t.start()
            while any(t.is_alive() for t in threads):
                with lock:
                    progress.update(task, completed=len(done))
                time.sleep(0.1)
            progress.update(task, completed=len(done))
        proxy.stop()

    table = Table(title="who got what")
    for col in (
        "consumer",
        "received",
        "redeliveries",
        "accepted",
        "released",
        "rejected",
        "by partition",
    ):
        table.add_column(col, justify="right")
    for i, s in enumerate(stats):
        table.add_row(
            f"consumer-{i + 1}",
            str(s.received),
            str(s.redeliveries),
            str(s.accepted),
            str(s.released),
            str(s.rejected),
            " ".join(f"p{p}:{n}" for p, n in sorted(s.partitions.items())),
        )
    console.print(table)
    twice = [k for k, n in done.items() if n > 1]
    ok = len(done) == records and not twice
    if ok:
        console.print(
            f"[green]every one of the {records} records was accepted or rejected "
            "exactly once[/green]; released records came back with a higher "
            "delivery count"
        )
    else:
        console.print(
            f"[red]{records - len(done)} records never finished, {len(twice)} finished twice[/red]"
        )
    return ok
