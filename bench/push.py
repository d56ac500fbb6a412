"""Push delivery end to end: records produced to a topic, then pushed by one proxy node (state in
Postgres, fsync on) to a local HTTP endpoint (uvicorn, in this process) that answers 200 to
each, once without key order and once with ``"ordered": "key"`` (a key per 16 records), each on
a group of its own over the same records.

Gives the records pushed per second (from the push being set to the last acceptance) and the
proxy's CPU per pushed record (user + system of its process over that time ÷ records). The
baseline, in the same run: as many POSTs of the same size sent to the endpoint straight from
this process, as many at once (what the endpoint and this machine's loopback take without the
proxy). The endpoint shares the machine: on a small one it takes CPU the proxy could have used,
so compare the ratios of one run, not runs on different machines.

    python -m bench.push [--records 20000] [--size 1024] [--max-in-flight 64] [--partitions 3]
"""

from __future__ import annotations

import argparse
import asyncio
import time
import uuid

import httpx
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from rich.console import Console
from rich.table import Table

from bench.cpu import CpuPerRecord
from shareproxy.demo.tansu import TansuBroker
from tests.support.postgres import TemporaryPostgres
from tests.support.proxy import ProxyProcess
from tests.support.push_endpoint import PushEndpoint

KEYS_EVERY = 16  # records per key, with key order


def produce(bootstrap: str, topic: str, count: int, size: int, partitions: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 512 * 1024})
    payload = b"x" * size
    for i in range(count):
        key = b"k%d" % (i // KEYS_EVERY)
        while True:
            try:
                p.produce(topic, key=key, value=payload, partition=i % partitions)
                break
            except BufferError:
                p.poll(0.05)
        if i % 1000 == 0:
            p.poll(0)
    assert p.flush(120) == 0


def direct(endpoint: PushEndpoint, records: int, size: int, concurrency: int) -> float:
    """POSTs per second straight to the endpoint, ``concurrency`` at once."""
    from shareproxy.push.connections import Connections

    async def send() -> float:
        connections = Connections(concurrency, None)
        body = b"x" * size
        left = records

        async def worker() -> None:
            nonlocal left
            while left > 0:
                left -= 1
                await connections.post(endpoint.url, [("ce-id", "x")], body, 30)

        began = time.monotonic()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        took = time.monotonic() - began
        await connections.aclose()
        return records / took

    endpoint.seen.clear()
    return asyncio.run(send())


def run(
    proxy: ProxyProcess, endpoint: PushEndpoint, topic: str, records: int, spec: dict[str, object]
) -> tuple[float, float]:
    """Records per second and proxy CPU µs per record for one push over every record."""
    assert proxy.proc is not None
    group = f"push-{uuid.uuid4().hex[:8]}"
    endpoint.seen.clear()
    with CpuPerRecord([proxy.proc.pid]) as cpu:
        began = time.monotonic()
        r = httpx.put(
            f"{proxy.admin_url}/v1/share-groups/{group}/push",
            json={"url": endpoint.url, "topics": [topic], **spec},
            timeout=30,
        )
        r.raise_for_status()
        deadline = began + 600
        while len(endpoint.seen) < records and time.monotonic() < deadline:
            time.sleep(0.05)
        took = time.monotonic() - began
    httpx.delete(f"{proxy.admin_url}/v1/share-groups/{group}/push", timeout=30)
    pushed = len(endpoint.seen)
    assert pushed >= records, f"only {pushed} of {records} records were pushed"
    return pushed / took, cpu.per_record_us(pushed)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=20_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--max-in-flight", type=int, default=64)
    ap.add_argument("--partitions", type=int, default=3)
    args = ap.parse_args()
    console = Console()
    endpoint = PushEndpoint().start()
    try:
        with TansuBroker() as broker, TemporaryPostgres(fsync=True) as pg:
            topic = f"pushed-{uuid.uuid4().hex[:6]}"
            admin = AdminClient({"bootstrap.servers": broker.bootstrap})
            for f in admin.create_topics([NewTopic(topic, args.partitions, 1)]).values():
                f.result(30)
            with console.status(f"producing {args.records:,} records"):
                produce(broker.bootstrap, topic, args.records, args.size, args.partitions)
            proxy = ProxyProcess(
                broker.bootstrap,
                pg.create_database("bench"),
                push_allowed_urls=endpoint.url,
                auto_offset_reset="earliest",
            )
            proxy.start()
            table = Table(
                "order", "records", "records/s", "÷ direct", "proxy CPU µs/record",
                title=f"push to a local endpoint ({args.size} B records, {args.partitions} "
                f"partitions, max_in_flight {args.max_in_flight}, one node)",
            )  # fmt: skip
            try:
                with console.status("POSTing straight to the endpoint"):
                    base = direct(endpoint, args.records, args.size, args.max_in_flight)
                table.add_row("direct POSTs", f"{args.records:,}", f"{base:,.0f}", "1.00", "-")
                for name, extra in (("none", {}), ("key", {"ordered": "key"})):
                    spec = {"max_in_flight": args.max_in_flight, **extra}
                    with console.status(f"pushing, order: {name}"):
                        rate, cpu = run(proxy, endpoint, topic, args.records, spec)
                    table.add_row(
                        name,
                        f"{args.records:,}",
                        f"{rate:,.0f}",
                        f"{rate / base:.2f}",
                        f"{cpu:.0f}",
                    )
            finally:
                proxy.stop()
            console.print(table)
    finally:
        endpoint.stop()


if __name__ == "__main__":
    main()
