"""The two share-group assignors side by side when consumers outnumber partitions: the proxy's
``sticky-balanced`` (each consumer one partition, members per partition within one) ÷ Kafka's
``simple`` (each partition the same number of members, some consumers two partitions). One
proxy per assignor on the same broker and topic, alternated in each run.

    python -m bench.assignors [--records 12000] [--consumers 8] [--partitions 3]
                              [--per-record-ms 1] [--runs 3]

Reports records processed per second and each consumer's share (fairness: the smallest share
÷ the largest), per assignor; the median run.
"""

from __future__ import annotations

import argparse
import statistics

from confluent_kafka.admin import AdminClient, NewTopic
from rich.console import Console
from rich.table import Table

from bench.fair_work import process, produce_large_batches
from shareproxy.core import assignor
from shareproxy.demo.tansu import TansuBroker
from tests.support.postgres import TemporaryPostgres
from tests.support.proxy import ProxyProcess

NAMES = (assignor.DEFAULT, "simple")


def fairness(counts: list[int]) -> float:
    return min(counts) / max(counts) if max(counts) else 0.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--records", type=int, default=12_000)
    ap.add_argument("--consumers", type=int, default=8)
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--per-record-ms", type=float, default=1.0)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    console = Console()
    per = args.per_record_ms / 1000
    with TansuBroker() as broker, TemporaryPostgres(fsync=True) as pg:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        topic = "assignors"
        for f in admin.create_topics([NewTopic(topic, args.partitions, 1)]).values():
            f.result(30)
        with console.status(f"producing {args.records:,} records in large batches"):
            produce_large_batches(broker.bootstrap, topic, args.records, args.partitions)
        proxies = {
            name: ProxyProcess(
                broker.bootstrap,
                pg.create_database(f"bench_{i}"),
                auto_offset_reset="earliest",
                group_share_assignors=name,
            ).start()
            for i, name in enumerate(NAMES)
        }
        try:
            runs = []
            for i in range(args.runs):
                run = {}
                for name, proxy in proxies.items():
                    with console.status(f"run {i + 1}/{args.runs}: {name}"):
                        run[name] = process(
                            proxy, topic, args.records, args.consumers, per, fair=True
                        )
                runs.append(run)
                console.print(
                    f"run {i + 1}: "
                    + ", ".join(
                        f"{n} {r:,.0f} rec/s {counts} (fairness {fairness(counts):.2f})"
                        for n, (r, counts) in run.items()
                    )
                )
        finally:
            for proxy in proxies.values():
                proxy.stop()
    ratios = [r[NAMES[0]][0] / r[NAMES[1]][0] for r in runs]
    median = sorted(runs, key=lambda r: r[NAMES[0]][0] / r[NAMES[1]][0])[len(runs) // 2]
    table = Table(
        title=f"{args.records:,} records, {args.partitions} partitions, {args.consumers} "
        f"ShareConsumers, {args.per_record_ms} ms per record (median run)"
    )
    for col in ("assignor", "records/s processed", "records per consumer", "fairness"):
        table.add_column(col)
    for name in NAMES:
        rate, counts = median[name]
        table.add_row(name, f"{rate:,.0f}", " / ".join(map(str, counts)), f"{fairness(counts):.2f}")
    console.print(table)
    console.print(
        f"throughput ratio {NAMES[0]} ÷ {NAMES[1]} of the {len(runs)} runs: "
        + ", ".join(f"{r:.2f}" for r in ratios)
        + f"; median {statistics.median(ratios):.2f}"
    )


if __name__ == "__main__":
    main()
