"""Engine throughput: acquire + accept cycles over 500-record fetches.

Prints records/s for the range engine and, measured in the same run, for a per-record baseline
(one dict entry per in-flight record, the design ARCHITECTURE.md argues against), and their ratio.

    python -m bench.engine [--records 5000000]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from shareproxy.core.acknowledgement import AckBatch
from shareproxy.core.acquisition import BatchHeader, PartitionLimits
from shareproxy.core.share_partition import SharePartition

FETCH = 500
BATCHES_PER_FETCH = 5  # upstream record batches of 100 records each
ACCEPT = 1


def headers(first: int) -> list[BatchHeader]:
    size = FETCH // BATCHES_PER_FETCH
    return [
        BatchHeader(first + i * size, first + (i + 1) * size - 1) for i in range(BATCHES_PER_FETCH)
    ]


def engine_cycles(cycles: int, ack_style: str) -> None:
    sp = SharePartition(0, PartitionLimits(max_record_locks=10_000))
    per_offset = (ACCEPT,) * FETCH
    for c in range(cycles):
        first = c * FETCH
        got = sp.acquire("member", headers(first), c, FETCH)
        last = got[-1].last_offset
        if ack_style == "range":
            acks = [AckBatch(first, last, (ACCEPT,))]
        elif ack_style == "types-per-offset":
            acks = [AckBatch(first, last, per_offset)]
        else:  # one batch per offset, as a client acknowledging record by record might send
            acks = [AckBatch(o, o, (ACCEPT,)) for o in range(first, last + 1)]
        delta = sp.acknowledge("member", acks, c)
        assert delta.start_offset == last + 1


def per_record_baseline(cycles: int, ack_style: str) -> None:
    """The same work with one dict entry per record: what "ranges, not records" avoids."""
    inflight: dict[int, list] = {}
    spso = 0
    for c in range(cycles):
        first = c * FETCH
        for o in range(first, first + FETCH):
            inflight[o] = [1, 1, "member", c + 30_000]  # Acquired, delivery count 1
        for o in range(first, first + FETCH):
            rec = inflight[o]
            if rec[0] != 1 or rec[2] != "member":
                raise AssertionError
            rec[0] = 2
        while spso in inflight and inflight[spso][0] == 2:
            del inflight[spso]
            spso += 1


def timed(fn: Callable[[int, str], None], cycles: int, style: str) -> float:
    t0 = time.perf_counter()
    fn(cycles, style)
    return cycles * FETCH / (time.perf_counter() - t0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=5_000_000)
    args = parser.parse_args()
    cycles = args.records // FETCH
    table = Table(title=f"acquire + accept, {FETCH}-record fetches, {cycles * FETCH:,} records")
    for col in ("acknowledgement", "engine rec/s", "per-record rec/s", "engine ÷ per-record"):
        table.add_column(col, justify="right")
    styles = ["range", "types-per-offset", "batch-per-offset"]
    with Progress(transient=True) as progress:
        task = progress.add_task("benchmarking", total=len(styles) * 2)
        for style in styles:
            engine = timed(engine_cycles, cycles, style)
            progress.advance(task)
            base = timed(per_record_baseline, cycles, style)
            progress.advance(task)
            table.add_row(style, f"{engine:,.0f}", f"{base:,.0f}", f"{engine / base:.1f}×")
    Console().print(table)


if __name__ == "__main__":
    main()
