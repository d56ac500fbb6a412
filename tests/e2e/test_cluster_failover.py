"""Several proxy nodes serving one share group, judged by real librdkafka share
consumers: a node killed mid-run costs seconds, never a record: what it had handed out is
delivered again by the node that takes its partitions over, and no acceptance it confirmed is
lost or redelivered; the same through a rolling restart, a node cut off from the store and a
leader paused past its lease."""

from __future__ import annotations

import signal
import threading
import time
import uuid
from dataclasses import dataclass, field

import httpx
import pytest
from confluent_kafka import AcknowledgeType, KafkaException, ShareConsumer

from tests.support.cluster import LEASE_MS, led_by, led_partitions, owned, started, until_led
from tests.support.proxy import ProxyProcess
from tests.support.relay import TcpRelay

# each record costs its consumer this much work, so a run lasts seconds and a disruption lands
# while the partitions it hits still hold records (unpaced, 30,000 records drain in about 1 s)
WORK_S = 0.0005


@dataclass
class Tally:
    """What the consumers saw: confirmed acceptances, every delivery's count, and when."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    confirmed: dict[tuple[int, int], int] = field(default_factory=dict)  # record -> consumer
    counts: dict[tuple[int, int], int] = field(default_factory=dict)  # last delivery count
    redelivered_confirmed: list[tuple[int, int]] = field(default_factory=list)
    counts_down: list[tuple[tuple[int, int], int, int]] = field(default_factory=list)
    deliveries: list[tuple[float, int]] = field(default_factory=list)  # (time, partition)
    failed_commits: int = 0


def _consume(c: ShareConsumer, me: int, tally: Tally, total: int, stop: threading.Event) -> None:
    while not stop.is_set():
        with tally.lock:
            if len(tally.confirmed) >= total:
                return
        try:
            polled = c.poll(0.5) or []
        except KafkaException:  # a read the paused node let time out, raised: poll again
            continue
        batch = [m for m in polled if m.error() is None]
        now = time.monotonic()
        with tally.lock:
            for m in batch:
                key = (m.partition(), m.offset())
                if key in tally.confirmed:
                    tally.redelivered_confirmed.append(key)
                before = tally.counts.get(key)
                # a first delivery is not stored (as in Kafka): one the dead node made comes
                # again with count 1; a stored count (a release, a lock timeout) is kept
                if before is not None and m.delivery_count() < before:
                    tally.counts_down.append((key, before, m.delivery_count()))
                tally.counts[key] = m.delivery_count()
                tally.deliveries.append((now, m.partition()))
        if not batch:
            continue
        time.sleep(WORK_S * len(batch))
        for m in batch:
            c.acknowledge(m, AcknowledgeType.ACCEPT)
        try:
            results = c.commit_sync(30)
        except Exception:  # nothing confirmed: these may come again
            with tally.lock:
                tally.failed_commits += 1
            continue
        ok = {tp.partition for tp, err in results.items() if err is None}
        with tally.lock:
            for m in batch:
                if m.partition() in ok:
                    tally.confirmed.setdefault((m.partition(), m.offset()), me)
                else:
                    tally.failed_commits += 1


class Run:
    """Explicit-ack share consumers, one bootstrapped at each node, accepting everything in a
    topic while the test disrupts the cluster; the invariants are checked at the end."""

    def __init__(self, nodes: list[ProxyProcess], topic: str, total: int, partitions: int):
        self.topic, self.total, self.partitions = topic, total, partitions
        self.group = group = f"g-{uuid.uuid4().hex[:6]}"
        self.consumers = [
            ShareConsumer(
                {
                    "bootstrap.servers": n.bootstrap,
                    "group.id": group,
                    "share.acknowledgement.mode": "explicit",
                }
            )
            for n in nodes
        ]
        self.tally, self.stop = Tally(), threading.Event()

    def __enter__(self) -> Run:
        for c in self.consumers:
            c.subscribe([self.topic])
        self.threads = [
            threading.Thread(
                target=_consume, args=(c, i, self.tally, self.total, self.stop), daemon=True
            )
            for i, c in enumerate(self.consumers)
        ]
        for th in self.threads:
            th.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for th in self.threads:
            th.join(60)
        for c in self.consumers:
            c.close()

    def until_confirmed(self, count: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while len(self.tally.confirmed) < count:
            assert time.monotonic() < deadline, (
                f"only {len(self.tally.confirmed)} of {count}: " + self.missing()
            )
            time.sleep(0.1)

    def missing(self) -> str:
        """Which records were never confirmed, per partition (first offset and count)."""
        every = {(i % self.partitions, i // self.partitions) for i in range(self.total)}
        gone: dict[int, list[int]] = {}
        for p, o in sorted(every - set(self.tally.confirmed)):
            gone.setdefault(p, []).append(o)
        return ", ".join(f"p{p}: {len(os)} from {os[0]}" for p, os in gone.items())

    def until_confirmed_in(self, partitions: set[int], count: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while sum(1 for p, _ in list(self.tally.confirmed) if p in partitions) < count:
            assert time.monotonic() < deadline, f"fewer than {count} in {partitions}"
            time.sleep(0.02)

    def until_all_accepted(self, nodes: list[ProxyProcess], timeout: float) -> None:
        """Until every record is accepted: confirmed to a consumer, or, where the answer was
        lost (a connection cut between the store's commit and the reply, so the consumer saw
        the acknowledgement fail), below its share-partition's start offset in the store."""
        deadline = time.monotonic() + timeout
        while len(self.tally.confirmed) < self.total and not self._stored_done(nodes):
            assert time.monotonic() < deadline, f"not all accepted: {self.missing()}"
            time.sleep(0.2)

    def _stored_done(self, nodes: list[ProxyProcess]) -> bool:
        starts: dict[int, int] = {}
        for node in nodes:
            if node.proc is None:
                continue  # killed
            url = f"{node.admin_url}/v1/share-groups/{self.group}/offsets"
            for row in httpx.get(url, timeout=10).json().get("partitions", []):
                if row["start_offset"] is not None:
                    p = row["partition"]
                    starts[p] = max(starts.get(p, 0), row["start_offset"])
        self.starts = starts
        per = self.total // self.partitions
        return all(starts.get(p, 0) >= per for p in range(self.partitions))

    def check(self) -> None:
        tally = self.tally
        assert tally.redelivered_confirmed == [], "a confirmed acceptance was delivered again"
        assert tally.counts_down == [], "a delivery count went down"
        unconfirmed = len(self.tally.confirmed) < self.total
        if unconfirmed:  # accepted in the store: the last start offsets read passed them all
            print(f"accepted but not confirmed to the consumer: {self.missing()}")


@pytest.mark.long
def test_a_node_killed_mid_run_costs_seconds_and_never_a_confirmed_record(cluster, topic, produce):
    total = 50_000
    nodes, t, leaders = started(cluster, topic, produce, 3, total)
    victim = nodes[1]
    orphaned = led_by(leaders, victim)
    with Run(nodes, t, total, 6) as run:
        run.until_confirmed_in(orphaned, 1000, 120)  # mid-run on the partitions it leads
        victim.kill()
        killed_at = time.monotonic()
        run.until_all_accepted(nodes, 180)
    run.check()
    resumed = [at for at, p in run.tally.deliveries if p in orphaned and at > killed_at]
    assert resumed, "the killed node's partitions were never served again"
    failover_s = min(resumed) - killed_at
    print(f"failover {failover_s:.1f} s (lease {LEASE_MS} ms)")
    assert failover_s < LEASE_MS / 1000 + 15


@pytest.mark.long
def test_a_proxy_killed_and_restarted_at_once_serves_every_record_again(cluster, topic, produce):
    """One node under three explicit-ack consumers, SIGKILLed at 40% and started again at
    once, while its old lease is still live: the restarted node serves every record not yet
    accepted (none stays Available unserved) and no confirmed acceptance comes again."""
    total = 20_000
    nodes, t, _ = started(cluster, topic, produce, 1, total, partitions=3)
    (node,) = nodes
    with Run(nodes * 3, t, total, 3) as run:
        run.until_confirmed(total * 2 // 5, 120)
        node.kill()
        node.start()  # same node id and port
        run.until_all_accepted(nodes, 120)
    run.check()


@pytest.mark.long
def test_a_rolling_restart_under_load_loses_nothing_and_redelivers_nothing_confirmed(
    cluster, topic, produce
):
    total = 30_000
    nodes, t, _ = started(cluster, topic, produce, 3, total)
    with Run(nodes, t, total, 6) as run:
        for i, node in enumerate(nodes):
            run.until_confirmed(total * (i + 1) // 5, 120)
            assert node.stop() == 0  # a clean stop: its lease is given up at once
            node.start()  # same node id and port
        run.until_all_accepted(nodes, 180)
    run.check()


@pytest.mark.long
def test_a_node_cut_off_from_the_store_stops_serving_and_another_takes_over(
    cluster, topic, produce, postgres
):
    total = 30_000
    relay = TcpRelay(postgres.port).start()
    try:
        nodes, t, leaders = started(cluster, topic, produce, 2, total, via={1: relay.port})
        cut, other = nodes
        orphaned = led_by(leaders, cut)
        with Run(nodes, t, total, 6) as run:
            run.until_confirmed_in(orphaned, 1000, 120)  # mid-run on the partitions it leads
            relay.cut()
            until_led(other, orphaned, 30)  # the other node serves it all meanwhile
            assert owned(other)["live_nodes"] == [int(other.options["node_id"])]
            run.until_confirmed(total * 2 // 5, 120)
            relay.start()  # back: it joins again, and the other lets its partitions go
            deadline = time.monotonic() + 30
            while led_partitions(other) & orphaned or len(owned(cut)["live_nodes"]) != 2:
                assert time.monotonic() < deadline, "the node back from the cut never rejoined"
                time.sleep(0.2)
            run.until_all_accepted(nodes, 180)
        run.check()
        assert "had lost its lease" in cut.log()
    finally:
        relay.cut()


def _accept_over_http(node: ProxyProcess, group: str, topic: str, tally: Tally) -> int:
    """Fetch from a node over HTTP and accept it all; what is confirmed joins the tally."""
    url = f"{node.admin_url}/v1/share-groups/{group}/records"
    got = httpx.post(
        f"{url}/fetch", json={"topics": [topic], "max_records": 2000}, timeout=30
    ).json()
    acks = [
        {
            "topic": topic,
            "partition": r["partition"],
            "first_offset": r["offset"],
            "last_offset": r["offset"],
            "type": "accept",
        }
        for r in got["records"]
    ]
    if not acks:
        return 0
    answer = httpx.post(
        f"{url}/acknowledge",
        json={"consumer_id": got["consumer_id"], "acknowledgements": acks},
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    ok = {r["partition"] for r in answer.json()["results"] if r["error_code"] is None}
    with tally.lock:
        for r in got["records"]:
            if r["partition"] in ok:
                tally.confirmed.setdefault((r["partition"], r["offset"]), -1)
    return sum(1 for r in got["records"] if r["partition"] in ok)


@pytest.mark.long
def test_a_paused_leader_resumed_after_its_lease_passed_is_fenced(cluster, topic, produce):
    """Node 1 is paused (it still believes it leads its partitions); node 2 reaps its lease,
    claims those partitions and has records of them accepted over HTTP; node 1 resumes with
    fetches and acknowledgements in flight. What node 1 held is stale: it serves none of it,
    its writes are refused by the state epoch, and nothing node 2 confirmed comes again."""
    total = 30_000
    nodes, t, leaders = started(cluster, topic, produce, 2, total)
    paused, other = nodes
    its = led_by(leaders, paused)
    with Run(nodes, t, total, 6) as run:
        run.until_confirmed_in(its, 1000, 120)  # mid-run on the partitions it leads
        group = run.group
        assert paused.proc is not None
        paused.proc.send_signal(signal.SIGSTOP)
        try:
            deadline = time.monotonic() + 30
            while owned(other)["live_nodes"] != [int(other.options["node_id"])]:
                assert time.monotonic() < deadline, "the paused node's lease never passed"
                time.sleep(0.2)
            taken = 0
            while not led_partitions(other) >= its or taken == 0:
                assert time.monotonic() < deadline + 30, "the other node took nothing over"
                taken += _accept_over_http(other, group, t, run.tally)
        finally:
            paused.proc.send_signal(signal.SIGCONT)
        run.until_all_accepted(nodes, 180)
    run.check()
    assert "had lost its lease" in paused.log()
