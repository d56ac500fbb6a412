"""What a waiting member costs a node: the proxy's CPU per ShareFetch that finds nothing.

One proxy node (state in Postgres, fsync on) before a Tansu broker; a topic of --partitions
partitions holding --per-partition records each; --members members of one share group. Each
member is two raw Kafka connections, no client library: one joins with ShareGroupHeartbeat and
heartbeats at the interval the node asks, the other long-polls partition ``i % partitions`` with
ShareFetch (MaxWaitMs --wait-ms) in a share session, accepting what it gets, as a librdkafka
member does. The records are taken during the warm-up; then every member only waits. The
clients cost the machine little and each request is counted where it is sent; with --pin (the
default where there are two cores) the node has a core of its own, as the broker, Postgres and
the members share the others.

After --warmup seconds, --rounds rounds of --seconds each; per round, the proxy's CPU (user +
system) per ShareFetch answered (heartbeats included in the CPU, their share printed), per
member-second, and the time a ShareFetch took to answer. The table gives the median round and
the spread. --per-partition 0 waits on a topic nobody has written to.

    python -m bench.empty_fetch [--members 200] [--partitions 200] [--per-partition 1]
                                [--wait-ms 500] [--rounds 5] [--seconds 5] [--warmup 5]
                                [--no-pin]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import struct
import time
import uuid
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from confluent_kafka.admin import AdminClient, NewTopic
from kio.index import load_response_schema
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.share_fetch.v1.request import (
    AcknowledgementBatch,
    FetchPartition,
    FetchTopic,
    ShareFetchRequest,
)
from kio.schema.share_group_heartbeat.v1.request import ShareGroupHeartbeatRequest
from kio.schema.types import GroupId, TopicName
from kio.static.primitive import i8, i32, i32Timedelta
from rich.console import Console
from rich.table import Table

from bench.cpu import cpu_seconds
from bench.throughput import produce
from shareproxy.demo.tansu import TansuBroker
from shareproxy.protocol.codec import decode_response, encode_request
from tests.support.postgres import TemporaryPostgres
from tests.support.proxy import ProxyProcess

TOPIC = "waiting"
ACCEPT = 1  # AcknowledgeType


class Connection:
    """One Kafka connection, one request at a time."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.correlation = 0

    @classmethod
    async def open(cls, port: int) -> Connection:
        return cls(*await asyncio.open_connection("127.0.0.1", port))

    async def call(self, body: Any) -> Any:
        self.correlation += 1
        self.writer.write(encode_request(self.correlation, "bench-empty-fetch", body))
        (size,) = struct.unpack(">i", await self.reader.readexactly(4))
        frame = await self.reader.readexactly(size)
        schema: Any = load_response_schema(body.__api_key__, body.__version__)
        cid, response = decode_response(frame, schema)
        if cid != self.correlation:
            raise RuntimeError(f"correlation {cid}, expected {self.correlation}")
        return response

    def close(self) -> None:
        self.writer.close()


@dataclass
class Counts:
    fetches: int = 0
    heartbeats: int = 0
    answered_ms: list[float] = field(default_factory=list)
    records: int = 0
    errors: list[str] = field(default_factory=list)


async def heartbeats(
    port: int, group: str, member: str, counts: Counts, stop: asyncio.Event
) -> None:
    conn = await Connection.open(port)
    epoch = 0
    try:
        while not stop.is_set():
            r = await conn.call(
                ShareGroupHeartbeatRequest(
                    group_id=GroupId(group),
                    member_id=member,
                    member_epoch=i32(epoch),
                    rack_id=None,
                    subscribed_topic_names=(TopicName(TOPIC),) if epoch == 0 else None,
                )
            )
            if r.error_code:
                counts.errors.append(f"heartbeat: error {r.error_code} {r.error_message}")
                return
            counts.heartbeats += 1
            epoch = r.member_epoch
            with_stop = asyncio.ensure_future(stop.wait())
            await asyncio.wait([with_stop], timeout=r.heartbeat_interval.total_seconds())
            with_stop.cancel()
    finally:
        conn.close()


async def fetches(
    port: int,
    group: str,
    member: str,
    topic_id: uuid.UUID,
    partition: int,
    wait_ms: int,
    counts: Counts,
    stop: asyncio.Event,
) -> None:
    conn = await Connection.open(port)
    epoch, taken = 0, tuple[AcknowledgementBatch, ...]()
    try:
        while not stop.is_set():
            # the session's one partition, named to open it or to accept what the last fetch
            # acquired (as a client acknowledging records does)
            topics = (
                (
                    FetchTopic(
                        topic_id=topic_id,
                        partitions=(
                            FetchPartition(
                                partition_index=i32(partition), acknowledgement_batches=taken
                            ),
                        ),
                    ),
                )
                if epoch == 0 or taken
                else ()
            )
            sent = time.monotonic()
            r = await conn.call(
                ShareFetchRequest(
                    group_id=GroupId(group),
                    member_id=member,
                    share_session_epoch=i32(epoch),
                    max_wait=i32Timedelta.parse(timedelta(milliseconds=wait_ms)),
                    min_bytes=i32(1),
                    max_bytes=i32(1 << 20),
                    max_records=i32(500),
                    batch_size=i32(500),
                    topics=topics,
                    forgotten_topics_data=(),
                )
            )
            if r.error_code:
                counts.errors.append(f"ShareFetch: error {r.error_code} {r.error_message}")
                return
            taken = ()
            for t in r.responses:
                for p in t.partitions:
                    if p.error_code or p.acknowledge_error_code:
                        counts.errors.append(
                            f"ShareFetch partition: error {p.error_code}, "
                            f"acknowledgement error {p.acknowledge_error_code}"
                        )
                        return
                    taken = tuple(
                        AcknowledgementBatch(
                            first_offset=a.first_offset,
                            last_offset=a.last_offset,
                            acknowledge_types=(i8(ACCEPT),),
                        )
                        for a in p.acquired_records
                    )
                    counts.records += sum(int(b.last_offset) - b.first_offset + 1 for b in taken)
            counts.fetches += 1
            counts.answered_ms.append((time.monotonic() - sent) * 1000)
            epoch = epoch + 1 if epoch < 2**31 - 1 else 1
    finally:
        conn.close()


async def topic_id_of(port: int, name: str) -> uuid.UUID:
    conn = await Connection.open(port)
    try:
        r = await conn.call(
            MetadataRequest(
                topics=(MetadataRequestTopic(topic_id=None, name=TopicName(name)),),
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            )
        )
    finally:
        conn.close()
    if r.topics[0].error_code:
        raise RuntimeError(f"Metadata for {name!r}: error {r.topics[0].error_code}")
    return r.topics[0].topic_id


@dataclass
class Round:
    cpu_us_per_fetch: float
    cpu_us_per_member_second: float
    fetches_per_member_second: float
    heartbeat_share: float
    answered_p50_ms: float
    answered_p99_ms: float


async def measure(port: int, pid: int, args: argparse.Namespace) -> list[Round]:
    group = f"waiting-{uuid.uuid4().hex[:8]}"
    topic_id = await topic_id_of(port, TOPIC)
    counts, stop = Counts(), asyncio.Event()
    members = [str(uuid.uuid4()) for _ in range(args.members)]
    tasks = [asyncio.ensure_future(heartbeats(port, group, m, counts, stop)) for m in members]
    tasks += [
        asyncio.ensure_future(
            fetches(port, group, m, topic_id, i % args.partitions, args.wait_ms, counts, stop)
        )
        for i, m in enumerate(members)
    ]
    rounds: list[Round] = []
    try:
        await asyncio.sleep(args.warmup)
        for _ in range(args.rounds):
            f0, h0, c0, t0 = counts.fetches, counts.heartbeats, cpu_seconds([pid]), time.monotonic()
            counts.answered_ms.clear()
            await asyncio.sleep(args.seconds)
            if counts.errors or any(t.done() for t in tasks):
                break
            c1, seconds = cpu_seconds([pid]), time.monotonic() - t0
            cpu = sum(c1) - sum(c0)
            fetched, beats = counts.fetches - f0, counts.heartbeats - h0
            rounds.append(
                Round(
                    cpu / max(fetched, 1) * 1e6,
                    cpu / seconds / args.members * 1e6,
                    fetched / seconds / args.members,
                    beats / max(fetched + beats, 1),
                    *_p50_p99(counts.answered_ms),
                )
            )
    finally:
        stop.set()
        await asyncio.wait(tasks, timeout=args.wait_ms / 1000 + 10)
        for t in tasks:
            t.cancel()
    failed = [t.exception() for t in tasks if t.done() and not t.cancelled() and t.exception()]
    if failed:
        raise SystemExit(f"a member failed: {failed[0]!r}")
    if counts.errors:
        raise SystemExit(f"a member failed: {counts.errors[0]}")
    expected = min(args.members, args.partitions) * args.per_partition  # the fetched ones'
    if counts.records != expected:
        raise SystemExit(f"{counts.records:,} records were acquired, {expected:,} expected")
    return rounds


def _p50_p99(values: list[float]) -> tuple[float, float]:
    if len(values) < 2:
        return (values or [float("nan")])[0], (values or [float("nan")])[0]
    q = statistics.quantiles(values, n=100)
    return q[49], q[98]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--members", type=int, default=200)
    ap.add_argument("--partitions", type=int, default=200)
    ap.add_argument(
        "--per-partition",
        type=int,
        default=1,
        help="records each partition holds, acquired and accepted during the warm-up "
        "(0: a topic nobody has written to)",
    )
    ap.add_argument(
        "--pin",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="the node alone on one core, everything else on the others (where there are two)",
    )
    ap.add_argument("--wait-ms", type=int, default=500, help="each ShareFetch's MaxWaitMs")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=5, help="length of a round")
    ap.add_argument("--warmup", type=float, default=5, help="seconds before the first round")
    args = ap.parse_args()
    console = Console()
    cores = sorted(os.sched_getaffinity(0))
    node_core, others = (
        ({cores[0]}, set(cores[1:])) if args.pin and len(cores) > 1 else (None, None)
    )
    if others:  # the broker, Postgres and these members off the node's core
        os.sched_setaffinity(0, others)
    with TansuBroker() as broker, TemporaryPostgres(fsync=True) as pg:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        for f in admin.create_topics([NewTopic(TOPIC, args.partitions, 1)]).values():
            f.result(60)
        if args.per_partition:
            produce(
                broker.bootstrap,
                TOPIC,
                args.partitions * args.per_partition,
                100,
                partitions=args.partitions,
            )
        if node_core:  # the node inherits its core
            os.sched_setaffinity(0, node_core)
        proxy = ProxyProcess(
            broker.bootstrap,
            pg.create_database("waiting"),
            group_share_max_size=args.members,
            auto_offset_reset="earliest",
        ).start()
        if others:
            os.sched_setaffinity(0, others)
        assert proxy.proc is not None
        try:
            console.print(f"proxy pid {proxy.proc.pid}, log {proxy.log_path}")
            rounds = asyncio.run(measure(proxy.port, proxy.proc.pid, args))
        finally:
            proxy.stop()
    table = Table(
        title=f"{args.members:,} waiting members on {args.partitions:,} empty share-partitions, "
        f"MaxWaitMs {args.wait_ms}, one node{' on a core of its own' * bool(node_core)} "
        f"({len(rounds)} rounds of {args.seconds:g} s)"
    )
    for col in ("measure", "median", "min – max"):
        table.add_column(col)

    def row(name: str, values: list[float], fmt: str) -> None:
        table.add_row(
            name,
            format(statistics.median(values), fmt),
            f"{format(min(values), fmt)} – {format(max(values), fmt)}",
        )

    row("proxy CPU µs per ShareFetch", [r.cpu_us_per_fetch for r in rounds], ",.0f")
    row("proxy CPU µs per member-second", [r.cpu_us_per_member_second for r in rounds], ",.0f")
    row("ShareFetches per member-second", [r.fetches_per_member_second for r in rounds], ".2f")
    row("ShareFetch answered in, p50 (ms)", [r.answered_p50_ms for r in rounds], ",.0f")
    row("ShareFetch answered in, p99 (ms)", [r.answered_p99_ms for r in rounds], ",.0f")
    row("heartbeats among requests", [r.heartbeat_share * 100 for r in rounds], ".1f")
    console.print(table)


if __name__ == "__main__":
    main()
