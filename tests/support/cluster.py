"""Several proxy nodes on one store, as the cluster tests see them: what each node tells a
client (brokers, leaders, coordinator) and what it says it owns (/readyz)."""

from __future__ import annotations

import time

import httpx
from confluent_kafka.admin import AdminClient

from tests.support.kafka_client import call
from tests.support.proxy import ProxyProcess

LEASE_MS = 3000  # a node is taken to be dead this long after its last renewal


def view(node: ProxyProcess, topic: str) -> tuple[dict[int, str], dict[int, int]]:
    """The brokers and the partition leaders a client learns from one node."""
    md = AdminClient({"bootstrap.servers": node.bootstrap}).list_topics(topic, timeout=20)
    brokers = {b.id: f"{b.host}:{b.port}" for b in md.brokers.values()}
    return brokers, {p.id: p.leader for p in md.topics[topic].partitions.values()}


def owned(node: ProxyProcess) -> dict:
    return httpx.get(f"{node.admin_url}/readyz", timeout=10).json()["node"]


def wait_for_agreement(nodes: list[ProxyProcess]) -> None:
    """Until every node has seen the same live set, these nodes (within a renewal, a third of
    the lease: until then a client, or a call passed on, may be told either placement)."""
    ids = sorted(int(n.options["node_id"]) for n in nodes)
    deadline = time.monotonic() + 30
    while True:
        seen = [(o["live_nodes"], o["generation"]) for o in map(owned, nodes)]
        if seen[0][0] == ids and all(v == seen[0] for v in seen):
            return
        assert time.monotonic() < deadline, f"the nodes never agreed: {seen}"
        time.sleep(0.2)


def wait_for_view(nodes: list[ProxyProcess], topic: str) -> dict[int, int]:
    """The partition leaders, once every node has seen the same live set and topic catalogue
    (the first node asked about a topic new to the proxy catalogues it: a new generation)."""
    view(nodes[0], topic)
    wait_for_agreement(nodes)
    views = [view(n, topic) for n in nodes]
    assert all(v == views[0] for v in views), views
    return views[0][1]


def started(cluster, topic, produce, n: int, total: int, partitions: int = 6, **kw):
    """n nodes and a topic of which each node leads a partition or more (placement is by
    topic id: a topic that puts all on fewer nodes, a few percent of them, is passed over)."""
    nodes = cluster(n, **kw)
    for _ in range(20):
        t = topic(partitions)
        leaders = wait_for_view(nodes, t)
        if len(set(leaders.values())) == n:
            produce(t, total, partitions=partitions)
            return nodes, t, leaders
    raise AssertionError("no topic spread over every node in 20 tries")


def until_led(node: ProxyProcess, partitions: set[int], timeout: float) -> None:
    """Until the node leads (has loaded) these partitions' share-partitions."""
    deadline = time.monotonic() + timeout
    while True:
        led = led_partitions(node)
        if led >= partitions:
            return
        assert time.monotonic() < deadline, f"{node.options['node_id']} leads only {led}"
        time.sleep(0.2)


def led_by(leaders: dict[int, int], node: ProxyProcess) -> set[int]:
    led = {p for p, leader in leaders.items() if leader == int(node.options["node_id"])}
    assert led, f"node {node.options['node_id']} leads nothing: {leaders}"
    return led


def led_partitions(node: ProxyProcess) -> set[int]:
    return {int(k.rsplit("/", 1)[1]) for k in owned(node)["share_partitions_led"]}


def coordinator(node: ProxyProcess, group: str) -> int:
    from kio.schema.find_coordinator.v4 import request as find

    located = call(node.port, find.FindCoordinatorRequest(key_type=0, coordinator_keys=(group,)))
    return int(located.coordinators[0].node_id)
