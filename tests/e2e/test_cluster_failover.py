"""Several proxy nodes serving one share group (issue 19), judged by real librdkafka share
consumers: every node names the same brokers, leaders and coordinator; each partition is
served by its leader only; and a node killed mid-run costs seconds, never a record: what it had
handed out is delivered again by the node that takes its partitions over, and no acceptance it
confirmed is lost or redelivered."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import httpx
import pytest
from confluent_kafka import AcknowledgeType, ShareConsumer
from confluent_kafka.admin import AdminClient

from shareproxy.embedded import TansuBroker
from tests.support.postgres import TemporaryPostgres
from tests.support.proxy import ProxyProcess

LEASE_MS = 3000  # a node is taken to be dead this long after its last renewal


@pytest.fixture
def cluster(
    broker: TansuBroker, postgres: TemporaryPostgres
) -> Iterator[Callable[[int], list[ProxyProcess]]]:
    started: list[ProxyProcess] = []

    def start(n: int) -> list[ProxyProcess]:
        url = postgres.create_database(f"cluster_{uuid.uuid4().hex[:8]}", "template_migrated")
        nodes = [
            ProxyProcess(
                broker.bootstrap,
                url,
                node_id=i,
                node_lease_ms=LEASE_MS,
                auto_offset_reset="earliest",
                group_share_min_record_lock_duration_ms=1000,
                record_lock_duration_ms=5000,
            )
            for i in range(1, n + 1)
        ]
        started.extend(nodes)
        for node in nodes:
            node.start()
        return nodes

    try:
        yield start
    finally:
        for p in started:
            p.stop()
    for p in started:
        assert "Traceback" not in p.log(), p.log_path


def _view(node: ProxyProcess, topic: str) -> tuple[dict[int, str], dict[int, int]]:
    """The brokers and the partition leaders a client learns from one node."""
    md = AdminClient({"bootstrap.servers": node.bootstrap}).list_topics(topic, timeout=20)
    brokers = {b.id: f"{b.host}:{b.port}" for b in md.brokers.values()}
    return brokers, {p.id: p.leader for p in md.topics[topic].partitions.values()}


def _owned(node: ProxyProcess) -> dict:
    return httpx.get(f"{node.admin_url}/readyz", timeout=10).json()["node"]


def _wait_for_view(nodes: list[ProxyProcess], topic: str) -> dict[int, int]:
    """The partition leaders, once every node has seen the same live set (within a renewal,
    a third of the lease: until then a client may be told either placement)."""
    ids = sorted(int(n.options["node_id"]) for n in nodes)
    deadline = time.monotonic() + 30
    while True:
        seen = [(o["live_nodes"], o["generation"]) for o in map(_owned, nodes)]
        if seen[0][0] == ids and all(v == seen[0] for v in seen):
            break
        assert time.monotonic() < deadline, f"the nodes never agreed: {seen}"
        time.sleep(0.2)
    views = [_view(n, topic) for n in nodes]
    assert all(v == views[0] for v in views), views
    return views[0][1]


def test_every_node_names_the_same_brokers_and_leaders_and_each_leads_a_share(
    cluster, topic, produce
):
    nodes = cluster(3)
    t = topic(6)
    produce(t, 600, partitions=6)
    leaders = _wait_for_view(nodes, t)
    brokers, _ = _view(nodes[0], t)
    assert brokers == {i + 1: n.bootstrap for i, n in enumerate(nodes)}
    assert set(leaders.values()) <= {1, 2, 3} and len(set(leaders.values())) >= 2
    group = f"g-{uuid.uuid4().hex[:6]}"
    c = ShareConsumer({"bootstrap.servers": nodes[2].bootstrap, "group.id": group})
    c.subscribe([t])
    seen: set[tuple[int, int]] = set()
    deadline = time.monotonic() + 60
    while len(seen) < 600 and time.monotonic() < deadline:
        for m in c.poll(0.5) or []:
            assert m.error() is None, m.error()
            seen.add((m.partition(), m.offset()))
        c.commit_sync()
    c.close()
    assert seen == {(i % 6, i // 6) for i in range(600)}
    coordinators = set()
    for node in nodes:  # each node loaded exactly the share-partitions Metadata says it leads
        me = int(node.options["node_id"])
        owned = _owned(node)
        assert owned["node_id"] == me and owned["live_nodes"] == [1, 2, 3]
        led = {f"{group}/{t}/{p}" for p, leader in leaders.items() if leader == me}
        assert set(owned["share_partitions_led"]) == led
        if group in owned["groups_coordinated"]:
            coordinators.add(me)
    assert len(coordinators) == 1  # the group lives on one node only


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
        batch = [m for m in (c.poll(0.5) or []) if m.error() is None]
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
        for m in batch:
            c.acknowledge(m, AcknowledgeType.ACCEPT)
        if not batch:
            continue
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


def test_a_node_killed_mid_run_costs_seconds_and_never_a_confirmed_record(cluster, topic, produce):
    total, partitions = 50_000, 6
    nodes = cluster(3)
    t = topic(partitions)
    produce(t, total, partitions=partitions)
    leaders = _wait_for_view(nodes, t)
    victim = nodes[1]
    victim_id = int(victim.options["node_id"])
    orphaned = {p for p, leader in leaders.items() if leader == victim_id}
    assert orphaned, f"node {victim_id} leads nothing: {leaders}"
    group = f"g-{uuid.uuid4().hex[:6]}"
    consumers = [
        ShareConsumer(
            {
                "bootstrap.servers": n.bootstrap,
                "group.id": group,
                "share.acknowledgement.mode": "explicit",
            }
        )
        for n in nodes
    ]
    for c in consumers:
        c.subscribe([t])
    tally, stop = Tally(), threading.Event()
    threads = [
        threading.Thread(target=_consume, args=(c, i, tally, total, stop), daemon=True)
        for i, c in enumerate(consumers)
    ]
    for th in threads:
        th.start()
    try:
        deadline = time.monotonic() + 120
        while len(tally.confirmed) < total // 3:
            assert time.monotonic() < deadline, f"only {len(tally.confirmed)} before the kill"
            time.sleep(0.1)
        victim.kill()
        killed_at = time.monotonic()
        deadline = killed_at + 180
        while len(tally.confirmed) < total and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        stop.set()
        for th in threads:
            th.join(60)
        for c in consumers:
            c.close()
    assert tally.redelivered_confirmed == [], "a confirmed acceptance was delivered again"
    assert tally.counts_down == [], "a delivery count went down"
    assert set(tally.confirmed) == {(i % partitions, i // partitions) for i in range(total)}
    resumed = [at for at, p in tally.deliveries if p in orphaned and at > killed_at]
    assert resumed, "the killed node's partitions were never served again"
    failover_s = min(resumed) - killed_at
    print(
        f"failover: {failover_s:.1f} s (lease {LEASE_MS} ms); failed commits {tally.failed_commits}"
    )
    assert failover_s < LEASE_MS / 1000 + 15
