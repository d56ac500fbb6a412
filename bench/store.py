"""State-store benchmark on a throwaway Postgres (fsync on, as in production).

1. Group commit: one transaction carrying deltas for 1,000 share-partitions, against the same
   deltas committed one transaction per share-partition (the baseline, same run).
2. Reload: reading back a share-partition whose state has 100,000 ranges, against fetching the
   same row's raw bytes without decoding (the baseline, same run).

    python -m bench.store [--partitions 1000] [--ranges 100000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import uuid

import asyncpg
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from shareproxy.core.persisted import PersistedBatch, StateDelta
from shareproxy.core.states import RecordState
from shareproxy.core.store import PartitionWrite, SharePartitionKey
from shareproxy.persistence import migrate
from shareproxy.persistence.engine import create_engine
from shareproxy.persistence.repository import SqlShareStateStore
from tests.support.postgres import TemporaryPostgres

TOPIC = uuid.uuid4()


def delta_for(round_: int) -> StateDelta:
    """What an acknowledgement of a 500-record fetch with a few releases writes."""
    base = 1_000 + round_ * 500
    return StateDelta(
        base,
        (
            PersistedBatch(base + 10, base + 10, RecordState.AVAILABLE, 1),
            PersistedBatch(base + 11, base + 19, RecordState.ACKNOWLEDGED, 1),
            PersistedBatch(base + 20, base + 20, RecordState.ARCHIVED, 3),
        ),
    )


async def group_commit(store: SqlShareStateStore, keys, rounds: int, progress, task) -> tuple:
    together, apart = [], []
    for r in range(rounds):
        writes = [PartitionWrite(k, 0, delta_for(2 * r)) for k in keys]
        t0 = time.perf_counter()
        results = await store.write(writes)
        together.append(time.perf_counter() - t0)
        assert all(v == 0 for v in results.values())
        t0 = time.perf_counter()
        for k in keys:
            await store.write([PartitionWrite(k, 0, delta_for(2 * r + 1))])
        apart.append(time.perf_counter() - t0)
        progress.advance(task)
    return statistics.median(together), statistics.median(apart)


async def reload(store: SqlShareStateStore, url: str, ranges: int, rounds: int) -> tuple:
    key = SharePartitionKey("bench-reload", TOPIC, 0)
    await store.initialize(key, 0)
    states = (RecordState.ACKNOWLEDGED, RecordState.AVAILABLE, RecordState.ARCHIVED)
    batches = tuple(PersistedBatch(2 * i, 2 * i + 1, states[i % 3], i % 4) for i in range(ranges))
    # written as one delta, then folded into the snapshot by enough further writes
    await store.write([PartitionWrite(key, 0, StateDelta(-1, batches))])
    for _ in range(store.fold_every):
        await store.write([PartitionWrite(key, 0, StateDelta(0, ()))])
    loaded = await store.read(key)
    assert len(loaded.state.batches) == ranges
    conn = await asyncpg.connect(url)
    try:
        decoded, raw = [], []
        for _ in range(rounds):
            t0 = time.perf_counter()
            await store.read(key)
            decoded.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            await conn.fetchval(
                "select state_batches::text from share_snapshots where group_id = $1", key.group_id
            )
            raw.append(time.perf_counter() - t0)
    finally:
        await conn.close()
    return statistics.median(decoded), statistics.median(raw)


async def small_writes(store: SqlShareStateStore, ranges: int, rounds: int) -> tuple:
    """One small acknowledgement's write on a share-partition holding ``ranges`` stored ranges,
    against the same write on one holding none (the baseline): the cost must not grow."""
    out = []
    for name, size in (("big", ranges), ("empty", 0)):
        key = SharePartitionKey(f"bench-small-{name}", TOPIC, 0)
        await store.initialize(key, 0)
        states = (RecordState.ACKNOWLEDGED, RecordState.AVAILABLE)
        if size:
            batches = tuple(PersistedBatch(2 * i, 2 * i, states[i % 2], 1) for i in range(size))
            await store.write([PartitionWrite(key, 0, StateDelta(-1, batches))])
        for j in range(store.fold_every):  # fold it into the snapshot
            tail = PersistedBatch(10 * size + j + 1, 10 * size + j + 1, RecordState.ARCHIVED, 1)
            await store.write([PartitionWrite(key, 0, StateDelta(-1, (tail,)))])
        times = []
        for j in range(rounds * 4):
            one = PersistedBatch(20 * size + j + 10, 20 * size + j + 10, states[0], 1)
            t0 = time.perf_counter()
            await store.write([PartitionWrite(key, 0, StateDelta(-1, (one,)))])
            times.append(time.perf_counter() - t0)
        out.append(statistics.median(times))
    return tuple(out)


async def run(args: argparse.Namespace) -> None:
    console = Console()
    with TemporaryPostgres(fsync=True) as pg:
        url = pg.create_database("bench")
        await asyncio.to_thread(migrate.upgrade, url)
        engine = create_engine(url)
        store = SqlShareStateStore(engine, fold_every=50)
        keys = [SharePartitionKey("bench", TOPIC, p) for p in range(args.partitions)]
        for k in keys:
            await store.initialize(k, 0)
        with Progress(console=console, transient=True) as progress:
            task = progress.add_task("group commit rounds", total=args.rounds)
            together, apart = await group_commit(store, keys, args.rounds, progress, task)
        decoded, raw = await reload(store, url, args.ranges, args.rounds)
        small_big, small_empty = await small_writes(store, args.ranges // 2, args.rounds)
        await engine.dispose()
    table = Table(title="state store on Postgres 15 (fsync on), medians")
    for col in ("measure", "shareproxy", "baseline (same run)", "ratio"):
        table.add_column(col, justify="right")
    n = args.partitions
    table.add_row(
        f"write {n:,} share-partitions",
        f"{together * 1000:,.1f} ms in 1 transaction",
        f"{apart * 1000:,.1f} ms in {n:,} transactions",
        f"{apart / together:.1f}× faster",
    )
    table.add_row(
        "  per share-partition",
        f"{together / n * 1e6:,.0f} µs",
        f"{apart / n * 1e6:,.0f} µs",
        "",
    )
    table.add_row(
        f"reload {args.ranges:,} ranges",
        f"{decoded * 1000:,.1f} ms",
        f"{raw * 1000:,.1f} ms (raw row, not decoded)",
        f"{decoded / raw:.1f}× the raw fetch",
    )
    table.add_row(
        f"small write, {args.ranges // 2:,} ranges stored",
        f"{small_big * 1000:,.1f} ms",
        f"{small_empty * 1000:,.1f} ms with nothing stored",
        f"{small_big / small_empty:.1f}×",
    )
    console.print(table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--ranges", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=5)
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
