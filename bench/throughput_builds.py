"""The proxy's CPU per record delivered to ShareConsumers, for two or more builds in one call.

The figure that decides a change to the share path is its ratio to an older build measured in
the same call, as a machine's speed moves by up to 2x from one day to the next. One Tansu broker
and one Postgres (fsync on) serve every build; the topic is written once, in batches of 500
records of 1 KiB. Each round starts each build's proxy in turn on a fresh database, and three
ShareConsumers drain the whole topic through it in each acknowledgement mode (a group of their
own each time); the figure is the proxy's CPU (user + system) per record. Builds alternate
round by round, and the order within a round turns each round, so neither gets the quieter
machine. A build is a checkout of the repository (``git worktree add /tmp/old <commit>``):

    python -m bench.throughput_builds --build base=/tmp/old --build new=. [--rounds 4]
                                      [--records 200000] [--modes implicit,explicit]

A proxy is started with its build first on ``PYTHONPATH`` and from a directory outside every
checkout (``python -m`` puts the current directory before ``PYTHONPATH``). The ratio column is
each build's median over the first build's. Each figure comes twice: over the whole drain, and
over its last three quarters (steady), leaving out the group's start (its partitions loaded, its
members joined) and a new proxy's first requests, which cost 40-120 ms of CPU whatever the
records.
"""

from __future__ import annotations

import argparse
import statistics
import uuid
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic
from rich.console import Console
from rich.table import Table

from bench import throughput
from bench.builds import checkouts, outside_checkouts
from bench.cpu import CpuPerRecord, cpu_seconds
from shareproxy.demo.tansu import TansuBroker
from tests.support.postgres import TemporaryPostgres
from tests.support.proxy import ProxyProcess

CONSUMERS = 3


# the part of each drain left out of its steady figure: the share group's start (its
# partitions loaded, its members joined and assigned) and, in a proxy's first drain, the
# process's own first requests
WARM_UP_SHARE = 4


@dataclass(frozen=True, slots=True)
class Figures:
    """A drain's proxy CPU µs per record: whole, and past its first quarter (steady)."""

    whole: float
    steady: float


def one_build(
    bootstrap: str, state_url: str, topic: str, build: Path, records: int, modes: list[str]
) -> dict[str, Figures]:
    """The build's proxy CPU µs per record delivered, by acknowledgement mode."""
    proxy = ProxyProcess(bootstrap, state_url, auto_offset_reset="earliest")
    proxy.start(env={"PYTHONPATH": str(build)})
    found: dict[str, Figures] = {}
    try:
        assert proxy.proc is not None
        pids = [proxy.proc.pid]
        for mode in modes:
            warm: list[tuple[int, float]] = []  # (records delivered, CPU seconds) once warm

            def progress(delivered: int, warm: list[tuple[int, float]] = warm) -> None:
                if not warm and delivered >= records // WARM_UP_SHARE:
                    warm.append((delivered, sum(cpu_seconds(pids))))

            with CpuPerRecord(pids) as cpu:
                drain = throughput.share_read(
                    proxy.bootstrap,
                    topic,
                    records,
                    CONSUMERS,
                    explicit=mode == "explicit",
                    progress=progress,
                )
            if drain.records < records or not warm:
                raise SystemExit(f"{build}: {mode} drained {drain.records} of {records} records")
            (at, cpu_then), cpu_end = warm[0], sum(cpu_seconds(pids))
            steady = (cpu_end - cpu_then) * 1e6 / max(1, drain.records - at)
            found[mode] = Figures(cpu.per_record_us(drain.records), steady)
    finally:
        proxy.stop()
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build", action="append", required=True, metavar="NAME=PATH")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--modes", default=",".join(throughput.MODES))
    args = parser.parse_args()
    modes = [m for m in args.modes.split(",") if m]
    if not modes or set(modes) - set(throughput.MODES):
        parser.error(f"--modes: a comma-separated list of {', '.join(throughput.MODES)}")
    builds = checkouts(parser, args.build)
    outside_checkouts("bench-throughput-builds-")
    results: dict[str, dict[str, list[Figures]]] = {n: {m: [] for m in modes} for n in builds}
    with TansuBroker() as broker, TemporaryPostgres(fsync=True) as pg:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        topic = f"bench-{uuid.uuid4().hex[:8]}"
        for f in admin.create_topics([NewTopic(topic, throughput.PARTITIONS, 1)]).values():
            f.result(30)
        throughput.produce(broker.bootstrap, topic, args.records, 1024)
        names = list(builds)
        for r in range(args.rounds):
            for name in names if r % 2 == 0 else reversed(names):
                url = pg.create_database(f"b{r}{name.lower()}{uuid.uuid4().hex[:6]}")
                found = one_build(broker.bootstrap, url, topic, builds[name], args.records, modes)
                for mode, figures in found.items():
                    results[name][mode].append(figures)
                shown = ", ".join(
                    f"{m} {f.whole:.2f} (steady {f.steady:.2f})" for m, f in found.items()
                )
                print(f"round {r + 1} {name}: µs/record {shown}")
    table = Table(
        title=f"proxy CPU µs per record, {args.records:,} records of 1 KiB, "
        f"{CONSUMERS} ShareConsumers, {args.rounds} rounds (medians)"
    )
    table.add_column("build")
    for mode in modes:
        for part in ("", " steady"):
            table.add_column(f"{mode}{part}", justify="right")
            table.add_column(f"÷ {names[0]}", justify="right")

    def median(name: str, mode: str, steady: bool) -> float:
        return statistics.median(f.steady if steady else f.whole for f in results[name][mode])

    for name in names:
        cells = []
        for mode in modes:
            for steady in (False, True):
                value = median(name, mode, steady)
                cells += [f"{value:.2f}", f"{value / median(names[0], mode, steady):.2f}"]
        table.add_row(name, *cells)
    Console().print(table)


if __name__ == "__main__":
    main()
