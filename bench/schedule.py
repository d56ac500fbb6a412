"""What waiting costs the pure engine: a share-partition holding N records that wait for their
delivery time (core.schedule), its memory, the CPU to read them in and to deliver them as they
fall due at a given rate, and their lateness on a virtual clock (a fetch every 10 ms, each
taking up to 500 records from the log from its next fetch offset, as the runtime does).

Three orders of times: ``delay`` (a delay queue: each 500-record batch due its delay after its
timestamp), ``ascending`` (each record its own x-deliver-at, rising with the offset) and
``random`` (each record a random time within the window).

    python -m bench.schedule [--records 1000000] [--rate 10000] [--orders delay,ascending,random]
"""

from __future__ import annotations

import argparse
import gc
import random
import statistics
import time
import tracemalloc
from collections.abc import Callable

from rich.console import Console
from rich.table import Table

from shareproxy.core.acknowledgement import AckBatch
from shareproxy.core.acquisition import BatchHeader, PartitionLimits
from shareproxy.core.schedule import DeliverySchedule
from shareproxy.core.share_partition import SharePartition

T = 1_700_000_000_000  # when the records were produced
BATCH = 500  # records per producer batch
FETCH_EVERY_MS = 10
FETCH_BATCHES = 4  # a fetch reads this many batches from its next fetch offset (~500 KiB)
ACCEPT = (1,)


def log_of(order: str, records: int, rate: int) -> list[BatchHeader]:
    """The log: ``records`` records falling due over records / rate seconds, from T + 1 s."""
    window_ms = records * 1000 // rate
    rng = random.Random(1)
    out = []
    for base in range(0, records, BATCH):
        offsets = range(base, base + BATCH)
        if order == "delay":
            out.append(BatchHeader(base, base + BATCH - 1, max_timestamp=T + base * 1000 // rate))
            continue
        times = (
            tuple(T + 1_000 + o * 1000 // rate for o in offsets)
            if order == "ascending"
            else tuple(T + 1_000 + rng.randrange(window_ms) for _ in offsets)
        )
        out.append(BatchHeader(base, base + BATCH - 1, max_timestamp=T, deliver_at=times))
    return out


def schedule_of(order: str) -> DeliverySchedule:
    return DeliverySchedule(delay_ms=1_000) if order == "delay" else DeliverySchedule(headers=True)


def read_in(sp: SharePartition, log: list[BatchHeader]) -> None:
    """Every record read from the log at T, none due: all wait."""
    for i in range(0, len(log), FETCH_BATCHES):
        sp.acquire("m", log[i : i + FETCH_BATCHES], T, BATCH * FETCH_BATCHES)


def deliver(sp: SharePartition, log: list[BatchHeader], limit_s: float) -> tuple[int, list[int]]:
    """Fetch every 10 ms of virtual time from the next fetch offset, accepting at once, until
    all is delivered or ``limit_s`` of CPU is spent: (records delivered, lateness per record
    in ms, sampled one per range)."""
    now = T
    delivered = 0
    lateness: list[int] = []
    records = log[-1].last_offset + 1
    spent = time.process_time() + limit_s
    while delivered < records and time.process_time() < spent:
        now += FETCH_EVERY_MS
        first = sp.next_fetch_offset(now) // BATCH
        got = sp.acquire("m", log[first : first + FETCH_BATCHES], now, BATCH * FETCH_BATCHES)
        for a in got:
            delivered += a.last_offset - a.first_offset + 1
            sp.acknowledge("m", [AckBatch(a.first_offset, a.last_offset, ACCEPT)], now)
        for n, late in sp.lateness:
            lateness.extend([late] * n)
        sp.lateness.clear()
    return delivered, lateness


def measure(order: str, records: int, rate: int, limit_s: float) -> dict[str, object]:
    log = log_of(order, records, rate)
    limits = PartitionLimits(schedule=schedule_of(order), max_record_locks=2_000)
    gc.collect()
    tracemalloc.start()
    sp = SharePartition(0, limits)
    read_in(sp, log)
    held, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    ranges = len(sp.ranges)
    del sp
    sp = SharePartition(0, limits)  # again, untraced, for the CPU
    started = time.process_time()
    read_in(sp, log)
    read_cpu = time.process_time() - started
    started = time.process_time()
    delivered, lateness = deliver(sp, log, limit_s)
    deliver_cpu = time.process_time() - started
    late = sorted(lateness) or [0]
    return {
        "order": order,
        "waiting": records,
        "ranges": ranges,
        "memory_mib": held / 2**20,
        "read_in_us": read_cpu / records * 1e6,
        "delivered": delivered,
        "deliver_us": deliver_cpu / max(delivered, 1) * 1e6,
        "p50_ms": statistics.median(late),
        "p99_ms": late[min(len(late) - 1, int(len(late) * 0.99))],
    }


def main(argv: list[str] | None = None, print_: Callable[..., None] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--rate", type=int, default=10_000, help="records falling due per s")
    parser.add_argument("--orders", default="delay,ascending,random")
    parser.add_argument("--limit-s", type=float, default=60.0, help="CPU for delivering, each")
    args = parser.parse_args(argv)
    table = Table(
        "order", "waiting", "ranges", "memory MiB", "read in µs/rec", "delivered",
        "deliver µs/rec", "lateness p50 ms", "p99 ms",
        title=f"{args.records:,} records waiting, {args.rate:,}/s falling due",
    )  # fmt: skip
    for order in args.orders.split(","):
        m = measure(order, args.records, args.rate, args.limit_s)
        table.add_row(
            str(m["order"]),
            f"{m['waiting']:,}",
            f"{m['ranges']:,}",
            f"{m['memory_mib']:.1f}",
            f"{m['read_in_us']:.2f}",
            f"{m['delivered']:,}",
            f"{m['deliver_us']:.2f}" if m["delivered"] else "-",
            f"{m['p50_ms']}" if m["delivered"] else "-",
            f"{m['p99_ms']}" if m["delivered"] else "-",
        )
    (print_ or Console().print)(table)


if __name__ == "__main__":
    main()
