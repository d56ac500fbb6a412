"""The share path's own Python, without sockets, a broker or a database: ShareFetch requests as
a librdkafka share consumer sends them (implicit acknowledgement: each request accepts what the
one before it got), decoded, handled and answered as the listener does, over the node's runtime
on the in-memory store, the scripted upstream and the virtual clock.

What the proxy spends per ShareFetch and per record here is the interpreter's part of a steady
drain, free of the kernel's copies and wake-ups and of the machine's noise, so that changes to
the path can be compared in seconds; the client's part (encoding each request, decoding each
answer) and the fakes' (the scripted upstream's assembling of a Fetch answer, the in-memory
store's applying of a write) are timed apart and left out. ``--profile`` prints where the time
goes (cProfile).

    python -m bench.share_path [--records 200000] [--batch 100] [--max-records 500]
                               [--rounds 5] [--profile]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import statistics
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from kio.schema.share_fetch.v1 import request as sf
from rich.console import Console
from rich.table import Table

from shareproxy.core.share_session import OPEN_EPOCH
from shareproxy.core.states import AcknowledgeType
from shareproxy.kafka.handlers import share_fetch
from shareproxy.protocol.api_keys import ApiKey
from shareproxy.protocol.codec import (
    decode_request,
    decode_response,
    encode_request,
    encode_response_chunks,
    response_type,
)
from tests.support import virtual_clock
from tests.support.middle import MiddleRuntime, middle_runtime
from tests.support.share_wire import WireContext, connection

GROUP = "bench-share-path"
SERVED: dict[int, tuple[int, int]] = {ApiKey.SHARE_FETCH: (1, 1)}
VALUE = b"x" * 1024


@dataclass
class Drain:
    records: int = 0
    fetches: int = 0
    proxy_s: float = 0.0  # CPU of the whole drain less the client's and the fakes' parts
    client_s: float = 0.0
    fakes_s: float = 0.0

    def per_fetch_us(self) -> float:
        return self.proxy_s / max(self.fetches, 1) * 1e6

    def per_record_us(self) -> float:
        return self.proxy_s / max(self.records, 1) * 1e6


def _request(
    topic_id: Any, epoch: int, acks: list[tuple[int, int]], max_records: int
) -> sf.ShareFetchRequest:
    accept = (int(AcknowledgeType.ACCEPT),)
    return sf.ShareFetchRequest(
        group_id=GROUP,
        member_id="m-bench",
        share_session_epoch=epoch,
        max_wait=timedelta(milliseconds=500),
        min_bytes=1,
        max_bytes=50 << 20,
        max_records=max_records,
        batch_size=max_records,
        topics=(
            sf.FetchTopic(
                topic_id=topic_id,
                partitions=(
                    sf.FetchPartition(
                        partition_index=0,
                        acknowledgement_batches=tuple(
                            sf.AcknowledgementBatch(
                                first_offset=first,
                                last_offset=last,
                                acknowledge_types=accept,
                            )
                            for first, last in acks
                        ),
                    ),
                ),
            ),
        ),
        forgotten_topics_data=(),
    )


class _TimedFakes:
    """The fakes' own CPU, counted into a drain: the scripted upstream's reads are synchronous,
    and the memory store's write is, once its simulated round trip has ended."""

    def __init__(self, drain: Drain) -> None:
        self.drain = drain
        self.write_began = 0.0

    def install(self, rt: MiddleRuntime) -> None:
        upstream, store = rt.cluster, rt.store
        read, round_trip, write = upstream._read, store._round_trip, store.write

        def timed_read(*args: Any) -> Any:
            began = time.process_time()
            try:
                return read(*args)
            finally:
                self.drain.fakes_s += time.process_time() - began

        async def timed_round_trip() -> None:
            await round_trip()
            self.write_began = time.process_time()

        async def timed_write(writes: Any) -> Any:
            try:
                return await write(writes)
            finally:
                self.drain.fakes_s += time.process_time() - self.write_began

        upstream._read = timed_read  # type: ignore[method-assign]
        store._round_trip = timed_round_trip  # type: ignore[method-assign]
        store.write = timed_write  # type: ignore[method-assign]


async def _drain(rt: MiddleRuntime, records: int, batch: int, max_records: int) -> Drain:
    t = rt.topic()
    for _ in range(records // batch):
        rt.produce(t, [(None, VALUE)] * batch)
    topic_id, _ = await rt.partition(t)
    ctx, conn = WireContext(rt), connection(1)
    cls = response_type(ApiKey.SHARE_FETCH, 1)
    drain = Drain()
    _TimedFakes(drain).install(rt)
    epoch, acks = OPEN_EPOCH, []
    started = time.process_time()
    while drain.records < records:
        client = time.process_time()
        frame = encode_request(epoch + 1, "bench", _request(topic_id, epoch, acks, max_records))
        drain.client_s += time.process_time() - client
        request = decode_request(frame[4:], SERVED)
        answer = await share_fetch.handle(ctx, conn, request)
        chunks = encode_response_chunks(request.correlation_id, answer)
        client = time.process_time()
        raw = b"".join(chunks)  # as the client receives it: the copy is the kernel's, not ours
        body = decode_response(raw[4:], cls)[1]
        (partition,) = body.responses[0].partitions
        if partition.error_code or partition.acknowledge_error_code:
            raise SystemExit(f"the share path answered an error: {partition}")
        acks = [(a.first_offset, a.last_offset) for a in partition.acquired_records]
        drain.records += sum(last - first + 1 for first, last in acks)
        drain.fetches += 1
        epoch += 1
        drain.client_s += time.process_time() - client
    drain.proxy_s = time.process_time() - started - drain.client_s - drain.fakes_s
    return drain


def one_drain(
    records: int, batch: int, max_records: int, profile: cProfile.Profile | None
) -> Drain:
    """A drain on a fresh runtime and virtual clock (the loading of the share-partition and the
    first requests are in it: a few milliseconds)."""
    result: list[Drain] = []

    async def run() -> None:
        async with middle_runtime() as rt:
            if profile is not None:
                profile.enable()
            try:
                result.append(await _drain(rt, records, batch, max_records))
            finally:
                if profile is not None:
                    profile.disable()

    with asyncio.Runner(loop_factory=virtual_clock.VirtualClockLoop) as runner:
        runner.run(run())
    return result[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--batch", type=int, default=100, help="records per upstream batch")
    parser.add_argument("--max-records", type=int, default=500, help="a ShareFetch's MaxRecords")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--profile", action="store_true", help="print cProfile's top functions")
    args = parser.parse_args()
    console = Console()
    profile = cProfile.Profile() if args.profile else None
    drains = [
        one_drain(args.records, args.batch, args.max_records, profile) for _ in range(args.rounds)
    ]
    table = Table(
        title=f"the share path's Python, {args.records:,} records of 1 KiB in batches of "
        f"{args.batch}, MaxRecords {args.max_records}, {args.rounds} rounds"
    )
    columns = ("round", "ShareFetch", "fakes' share", "proxy µs per ShareFetch", "per record")
    for column in columns:
        table.add_column(column, justify="right")
    for i, d in enumerate(drains, 1):
        fakes = d.fakes_s / (d.fakes_s + d.proxy_s)
        table.add_row(
            str(i),
            f"{d.fetches:,}",
            f"{fakes:.0%}",
            f"{d.per_fetch_us():.0f}",
            f"{d.per_record_us():.3f}",
        )
    table.add_row(
        "median",
        "",
        "",
        f"{statistics.median(d.per_fetch_us() for d in drains):.0f}",
        f"{statistics.median(d.per_record_us() for d in drains):.3f}",
    )
    console.print(table)
    if profile is not None:
        pstats.Stats(profile).sort_stats("tottime").print_stats(30)


if __name__ == "__main__":
    main()
