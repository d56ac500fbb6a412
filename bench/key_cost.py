"""The cost of key-ordered delivery on the proxy's own work, keyed ÷ unkeyed in the same run:
reading a fetch into the log cache (keys parsed, decompressed when compressed) and the pure
engine's acquire + accept cycles over 500-record fetches of 100 keys.

    python -m bench.key_cost [--fetches 2000]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from aiokafka.record.default_records import DefaultRecordBatchBuilder
from rich.console import Console
from rich.table import Table

from shareproxy.core.acknowledgement import AckBatch
from shareproxy.core.acquisition import BatchHeader, PartitionLimits
from shareproxy.core.key_order import key_hash
from shareproxy.core.share_partition import SharePartition
from shareproxy.runtime.consuming.cache_budget import CacheBudget
from shareproxy.runtime.consuming.log_cache import LogCache
from shareproxy.upstream.client import PartitionData

FETCH = 500
BATCH = 100  # records per producer batch
KEYS = 100
CODECS = {"none": 0, "lz4": 3, "zstd": 4}


def fetch_bytes(first: int, codec: int) -> bytes:
    out = b""
    for b in range(FETCH // BATCH):
        builder = DefaultRecordBatchBuilder(2, codec, 0, -1, -1, -1, 1 << 22)
        for i in range(BATCH):
            builder.append(i, timestamp=0, key=b"key-%d" % ((b * BATCH + i) % KEYS),
                           value=b"v" * 100, headers=[])  # fmt: skip
        batch = bytearray(builder.build())
        batch[0:8] = (first + b * BATCH).to_bytes(8, "big")  # base offset
        out += bytes(batch)
    return out


def cache_reads(fetches: int, codec: int, keyed: bool) -> None:
    data = fetch_bytes(0, codec)
    for _ in range(fetches):
        cache = LogCache(0, keyed, budget=CacheBudget(None))
        cache.add(PartitionData(0, FETCH, FETCH, 0, data))


def engine(fetches: int, keyed: bool) -> None:
    sp = SharePartition(0, PartitionLimits(max_record_locks=10_000, key_ordered=keyed))
    keys = tuple(key_hash(b"key-%d" % (i % KEYS)) for i in range(BATCH)) if keyed else None
    for c in range(fetches):
        first = c * FETCH
        headers = [
            BatchHeader(first + b * BATCH, first + (b + 1) * BATCH - 1, key_hashes=keys)
            for b in range(FETCH // BATCH)
        ]
        while sp.speo <= headers[-1].last_offset or sp.in_flight_count:
            got = sp.acquire("m", headers, c, FETCH)
            for a in got:
                sp.acknowledge("m", [AckBatch(a.first_offset, a.last_offset, (1,))], c)


def rate(fn: Callable[[], None], fetches: int) -> float:
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return fetches * FETCH / statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--fetches", type=int, default=2_000)
    n = ap.parse_args().fetches
    table = Table(title=f"records/s, {FETCH}-record fetches of {KEYS} keys (median of 3)")
    for col in ("work", "unkeyed", "keyed", "keyed ÷ unkeyed"):
        table.add_column(col)
    for name, codec in CODECS.items():
        plain = rate(lambda c=codec: cache_reads(n, c, False), n)
        keyed = rate(lambda c=codec: cache_reads(n, c, True), n)
        table.add_row(f"log cache read, {name}", f"{plain:,.0f}", f"{keyed:,.0f}",
                      f"{keyed / plain:.3f}")  # fmt: skip
    plain = rate(lambda: engine(n // 4, False), n // 4)
    keyed = rate(lambda: engine(n // 4, True), n // 4)
    table.add_row("engine acquire + accept", f"{plain:,.0f}", f"{keyed:,.0f}",
                  f"{keyed / plain:.3f}")  # fmt: skip
    Console().print(table)


if __name__ == "__main__":
    main()
