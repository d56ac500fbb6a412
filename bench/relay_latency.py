"""What a relayed request waits through the proxy, against the same request sent straight to the
broker, in the same run.

A librdkafka producer that flushes after every two records (as test suites and request/response
services do) times each flush, directly and through the proxy, the two sides interleaved pair by
pair so neither has the warmer broker or the quieter machine; a plain consumer (assign, no group)
at the log's end times each produced pair's arrival too, so a relayed Fetch is measured beside
the Produce. With ``--share-load N``, N share consumers read another topic through the proxy
meanwhile, which a producer keeps filling: the relay's latency while the proxy is busy with the
share path. Then, the consumers closed, each side times Fetches of records its topic already
holds, on a plain connection: a relayed Fetch without the long poll's phase in it. With
``--floor``, a third side goes through a byte pump (``bench.byte_pump``) in front of a second
broker: what any relay adds on the machine, beside what the proxy adds.

The proxy's CPU over the timed pairs, divided by the pairs, is printed too.

    python -m bench.relay_latency [--pairs 2000] [--size 100] [--share-load 0] [--floor]
                               [--fetch-wait-ms 10]
"""

from __future__ import annotations

import argparse
import contextlib
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from datetime import timedelta

from confluent_kafka import Consumer, Producer, ShareConsumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.fetch.v12 import request as fetch_v12
from kio.static.primitive import i32, i64
from rich.console import Console
from rich.table import Table

from bench import throughput
from bench.cpu import cpu_seconds
from shareproxy.demo.tansu import LOOPBACK, TansuBroker
from shareproxy.host.processes import free_port, stop_process, wait_for_port
from shareproxy.protocol.codec import encode_request
from shareproxy.protocol.kio_types import as_i32_timedelta, as_topic_name
from tests.support.kafka_client import KafkaConnection
from tests.support.proxy import ProxyProcess


def new_topic(admin: AdminClient, partitions: int = 1) -> str:
    name = f"bench-{uuid.uuid4().hex[:8]}"
    for f in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        f.result(30)
    return name


def _fetch_from_start(topic: str) -> fetch_v12.FetchRequest:
    """A Fetch of a few of the topic's first records, which the broker need not wait to answer
    (a wait of 1 ms: Tansu answers a wait of 0 with no partitions at all)."""
    partition = fetch_v12.FetchPartition(
        partition=i32(0), fetch_offset=i64(0), partition_max_bytes=i32(4096)
    )
    return fetch_v12.FetchRequest(
        max_wait=as_i32_timedelta(timedelta(milliseconds=1)),
        min_bytes=i32(1),
        max_bytes=i32(4096),
        topics=(fetch_v12.FetchTopic(topic=as_topic_name(topic), partitions=(partition,)),),
        forgotten_topics_data=(),
    )


class Side:
    """One way to the broker: a producer and a tail-reading consumer on one topic, and a plain
    connection for Fetches of records the log holds already (what relaying a Fetch adds, free
    of the long poll's phase)."""

    def __init__(self, bootstrap: str, topic: str, fetch_wait_ms: int = 10) -> None:
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
        self.consumer: Consumer | None = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"bench-{uuid.uuid4().hex}",
                "enable.auto.commit": False,
                "fetch.wait.max.ms": fetch_wait_ms,  # a short long poll: the relay is timed
                "fetch.error.backoff.ms": 10,
            }
        )
        self.topic = topic
        self.consumer.assign([TopicPartition(topic, 0, 0)])  # a new topic: all that comes
        self.flushes: list[float] = []
        self.arrivals: list[float] = []
        self.fetches: list[float] = []
        host, _, port = bootstrap.rpartition(":")
        self._kafka = KafkaConnection(int(port), host.strip("[]"))
        self._kafka.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._fetch = _fetch_from_start(topic)

    def pair(self, payload: bytes) -> None:
        """Two records, one flush: the flush's wait, then how long until both were read."""
        start = time.perf_counter()
        self.producer.produce(self.topic, value=payload)
        self.producer.produce(self.topic, value=payload)
        self.producer.flush(30)
        self.flushes.append(time.perf_counter() - start)
        read = 0
        assert self.consumer is not None, "reading has stopped"
        while read < 2:
            for m in self.consumer.consume(2 - read, 5):
                if m.error() is None:
                    read += 1
            assert time.perf_counter() - start < 30, "a pair was not read back within 30 s"
        self.arrivals.append(time.perf_counter() - start)

    def fetch(self) -> None:
        """One Fetch of the topic's first records (written by the pairs before), timed from
        its send to its whole answer."""
        kafka = self._kafka
        if not self.fetches:  # the first answer read whole: records, no error
            body = kafka.call(self._fetch)
            (partition,) = body.responses[0].partitions
            assert body.error_code == 0 and partition.error_code == 0, "a Fetch failed"
            assert partition.records, "a Fetch came back empty"
        kafka.correlation += 1
        frame = encode_request(kafka.correlation, "bench-relay-latency", self._fetch)
        start = time.perf_counter()
        kafka.sock.sendall(frame)
        kafka.read_frame()
        self.fetches.append(time.perf_counter() - start)

    def stop_reading(self) -> None:
        if self.consumer is not None:
            self.consumer.close()
            self.consumer = None

    def close(self) -> None:
        self.stop_reading()
        self._kafka.close()


def share_load(
    bootstrap: str, upstream: str, topic: str, consumers: int, stop: threading.Event
) -> None:
    """Share consumers accepting records through the proxy until ``stop``, while a producer
    writes more straight to the broker, so the share path stays busy throughout."""

    def feed() -> None:
        while not stop.is_set():
            throughput.produce(upstream, topic, 50_000, 1024)

    def drain(index: int) -> None:
        c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": f"bench-load-{topic}"})
        c.subscribe([topic])
        try:
            while not stop.is_set():
                c.poll(0.5)
        finally:
            c.close()

    threads = [threading.Thread(target=drain, args=(i,), daemon=True) for i in range(consumers)]
    threads.append(threading.Thread(target=feed, daemon=True))
    for t in threads:
        t.start()


def ms(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1] * 1000


def _in_turn(sides: list[Side], i: int) -> list[Side]:
    """The sides in the order of round ``i``: each goes first in turn, so that none has the
    warmer broker or the quieter machine."""
    k = i % len(sides)
    return sides[k:] + sides[:k]


class BytePump:
    """A second broker behind ``bench.byte_pump``, the broker advertising the pump's address so
    that its clients' every request goes through it."""

    def __init__(self) -> None:
        self.port = free_port()
        self.broker = TansuBroker()
        self.broker.bootstrap = f"{LOOPBACK}:{self.port}"  # what the broker advertises
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> BytePump:
        self.broker.start()
        args = [sys.executable, "-m", "bench.byte_pump", str(self.port), str(self.broker.port)]
        self.proc = subprocess.Popen(args)
        proc = self.proc
        wait_for_port(self.port, 30, "the byte pump", lambda: proc.poll() is None, LOOPBACK)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None:
            stop_process(self.proc)
        self.broker.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=2000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--share-load", type=int, default=0, metavar="N")
    parser.add_argument("--fetch-wait-ms", type=int, default=10, help="the readers' long poll")
    parser.add_argument(
        "--floor",
        action="store_true",
        help="time a third side through a byte pump (bench.byte_pump) in front of a second broker",
    )
    args = parser.parse_args()
    console = Console(width=120)
    payload = b"x" * args.size
    stop = threading.Event()
    with contextlib.ExitStack() as stack:
        broker = stack.enter_context(TansuBroker())
        pumped = stack.enter_context(BytePump()) if args.floor else None
        state = stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-relay-"))
        proxy = ProxyProcess(
            broker.bootstrap, f"sqlite+aiosqlite:///{state}/state.db", auto_offset_reset="earliest"
        ).start()
        stack.callback(proxy.stop)
        stack.callback(stop.set)
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        if args.share_load:
            backlog = new_topic(admin, 3)
            throughput.produce(broker.bootstrap, backlog, 200_000, 1024)
            share_load(proxy.bootstrap, broker.bootstrap, backlog, args.share_load, stop)
            time.sleep(3)  # the consumers joined and fetching
        sides = {
            "direct": Side(broker.bootstrap, new_topic(admin), args.fetch_wait_ms),
            "proxy": Side(proxy.bootstrap, new_topic(admin), args.fetch_wait_ms),
        }
        if pumped is not None:
            pump_admin = AdminClient({"bootstrap.servers": pumped.broker.bootstrap})
            sides["byte pump"] = Side(
                pumped.broker.bootstrap, new_topic(pump_admin), args.fetch_wait_ms
            )
        for side in sides.values():  # connections made, metadata known
            for _ in range(20):
                side.pair(payload)
            side.flushes.clear()
            side.arrivals.clear()
        assert proxy.proc is not None
        before = sum(cpu_seconds([proxy.proc.pid]))
        order = list(sides.values())
        for i in range(args.pairs):
            for side in _in_turn(order, i):
                side.pair(payload)
        cpu_per_pair = (sum(cpu_seconds([proxy.proc.pid])) - before) / args.pairs
        for side in order:  # their long polls no longer hold the broker meanwhile
            side.stop_reading()
        for i in range(args.pairs):
            for side in _in_turn(order, i):
                side.fetch()
        for side in sides.values():
            side.close()
    load = f", {args.share_load} share consumers draining" if args.share_load else ", idle"
    table = Table(title=f"{args.pairs:,} pairs of {args.size} B records{load}")
    for column in ("", "through", "direct p50", "p50", "added", "direct p99", "p99", "added"):
        table.add_column(column, justify="right")
    direct = sides.pop("direct")
    for label, times in (
        ("produce (flush of 2)", lambda s: s.flushes),
        ("produced → read", lambda s: s.arrivals),
        ("fetch of records there", lambda s: s.fetches),
    ):
        d50, d99 = ms(times(direct), 50), ms(times(direct), 99)
        for through, side in sides.items():
            p50, p99 = ms(times(side), 50), ms(times(side), 99)
            table.add_row(
                label if through == "proxy" else "",
                through,
                f"{d50:.2f} ms",
                f"{p50:.2f} ms",
                f"{p50 - d50:+.2f} ms",
                f"{d99:.2f} ms",
                f"{p99:.2f} ms",
                f"{p99 - d99:+.2f} ms",
            )
    console.print(table)
    extra = " (and the share consumers')" if args.share_load else ""
    console.print(
        f"proxy CPU per proxied pair (its Produce and the reads that fetch it{extra}): "
        f"{cpu_per_pair * 1e6:.0f} µs"
    )


if __name__ == "__main__":
    main()
