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
each build's median over the first build's.
"""

from __future__ import annotations

import argparse
import statistics
import uuid
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic
from rich.console import Console
from rich.table import Table

from bench import throughput
from bench.builds import checkouts, outside_checkouts
from bench.cpu import CpuPerRecord
from shareproxy.demo.tansu import TansuBroker
from tests.support.postgres import TemporaryPostgres
from tests.support.proxy import ProxyProcess

CONSUMERS = 3


def one_build(
    bootstrap: str, state_url: str, topic: str, build: Path, records: int, modes: list[str]
) -> dict[str, float]:
    """The build's proxy CPU µs per record delivered, by acknowledgement mode."""
    proxy = ProxyProcess(bootstrap, state_url, auto_offset_reset="earliest")
    proxy.start(env={"PYTHONPATH": str(build)})
    found: dict[str, float] = {}
    try:
        assert proxy.proc is not None
        for mode in modes:
            with CpuPerRecord([proxy.proc.pid]) as cpu:
                drain = throughput.share_read(
                    proxy.bootstrap, topic, records, CONSUMERS, explicit=mode == "explicit"
                )
            if drain.records < records:
                raise SystemExit(f"{build}: {mode} drained {drain.records} of {records} records")
            found[mode] = cpu.per_record_us(drain.records)
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
    results: dict[str, dict[str, list[float]]] = {n: {m: [] for m in modes} for n in builds}
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
                for mode, us in found.items():
                    results[name][mode].append(us)
                shown = ", ".join(f"{m} {us:.2f}" for m, us in found.items())
                print(f"round {r + 1} {name}: µs/record {shown}")
    table = Table(
        title=f"proxy CPU µs per record, {args.records:,} records of 1 KiB, "
        f"{CONSUMERS} ShareConsumers, {args.rounds} rounds (medians)"
    )
    table.add_column("build")
    for mode in modes:
        table.add_column(mode, justify="right")
        table.add_column(f"{mode} ÷ {names[0]}", justify="right")
    base = {m: statistics.median(results[names[0]][m]) for m in modes}
    for name in names:
        cells = []
        for mode in modes:
            median = statistics.median(results[name][mode])
            cells += [f"{median:.2f}", f"{median / base[mode]:.2f}"]
        table.add_row(name, *cells)
    Console().print(table)


if __name__ == "__main__":
    main()
