"""What one node holds right now, read for the admin API's /readyz and the Prometheus gauges:
with several nodes, which one serves what and how much is in flight where."""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import TypedDict

from shareproxy.core.lag import first_unacked, oldest_unacked_age, partition_lag
from shareproxy.core.share_group import GroupState
from shareproxy.core.share_session import ShareSessionCache
from shareproxy.kafka.listener import KafkaListener
from shareproxy.runtime.cluster import ClusterNodes
from shareproxy.runtime.consuming.partitions import SharePartitions
from shareproxy.runtime.groups.census import StoredCensus
from shareproxy.runtime.groups.coordinator import Coordinator
from shareproxy.telemetry.logs import STORE_OUTAGE
from shareproxy.telemetry.metrics import NodeFigures, PartitionLabels
from shareproxy.upstream.client import Upstream


class Owned(TypedDict):
    """What this node owns now, as /readyz shows it."""

    node_id: int
    live_nodes: list[int]
    generation: int
    share_partitions_led: list[str]  # group/topic/partition
    groups_coordinated: list[str]


def owned(nodes: ClusterNodes, partitions: SharePartitions, coordinator: Coordinator) -> Owned:
    """What this node owns now, for /readyz."""
    return {
        "node_id": nodes.node_id,
        "live_nodes": list(nodes.placement.nodes),
        "generation": nodes.placement.generation,
        "share_partitions_led": sorted(
            f"{ld.key.group_id}/{ld.topic}/{ld.key.partition}" for ld in partitions.led()
        ),
        "groups_coordinated": sorted(coordinator.groups),
    }


def live_state(
    nodes: ClusterNodes,
    partitions: SharePartitions,
    coordinator: Coordinator,
    census: StoredCensus,
    sessions: ShareSessionCache,
    listeners: Iterable[KafkaListener],
    upstream: Upstream,
) -> NodeFigures:
    """The gauges' values (``metrics.install_live_state``), read at each scrape: from what
    the runtime keeps anyway, so a scrape adds no work to serving. Each node counts the groups
    it coordinates and their stored share-partitions, and what it leads, so the nodes' figures
    add up to the cluster's."""
    by_state: dict[str, int] = {s.value: 0 for s in GroupState}
    for group_id, group in coordinator.groups.items():
        if nodes.coordinates(group_id):
            by_state[group.state.value] += 1
    # stored groups no member has joined here since start are Empty
    by_state[GroupState.EMPTY.value] += sum(
        1 for g in census.group_ids - coordinator.groups.keys() if nodes.coordinates(g)
    )
    in_flight: dict[tuple[str, str], int] = {}
    detail: dict[PartitionLabels, dict[str, int]] = {}
    oldest: dict[PartitionLabels, float] = {}
    ages: dict[PartitionLabels, float] = {}
    now_ms = int(time.time() * 1000)
    led = partitions.led()
    # stored share-partitions of the groups coordinated here; those led here count at once,
    # before the next census has seen them
    led_of: dict[str, int] = {}
    for leader in led:
        led_of[leader.key.group_id] = led_of.get(leader.key.group_id, 0) + 1
    stored_partitions = sum(
        max(census.partitions_of.get(g, 0), led_of.get(g, 0))
        for g in census.partitions_of.keys() | led_of.keys()
        if nodes.coordinates(g)
    )
    for leader in led:
        key = leader.key
        for r in leader.ranges:
            slot = (key.group_id, r.state.name.lower())
            in_flight[slot] = in_flight.get(slot, 0) + r.last - r.first + 1
        ranges = [(r.first, r.last, r.state) for r in leader.ranges]
        waiting = leader.waiting_runs(now_ms)
        lag = partition_lag(
            leader.spso,
            leader.speo,
            ranges,
            max(leader.cache.high_watermark, leader.speo),
            waiting,
        )
        labels = (key.group_id, leader.topic, key.partition)
        detail[labels] = {
            "lag": lag.lag or 0,  # known: the cache's high watermark is given
            "records": sum(lag.in_flight.values()),
            "batches": len(leader.ranges),
            "start_offset": leader.spso,
        }
        first = first_unacked(leader.spso, ranges, waiting)
        if lag.lag:  # records are owed: the first of them is at or past SPSO
            timestamp_ms = leader.cache.timestamp_from(first)
            if timestamp_ms is not None:
                oldest[labels] = timestamp_ms / 1000
        waited = oldest_unacked_age(
            first, lag.high_watermark, leader.cache.timestamp_from(first), now_ms
        )
        if waited is not None:  # unknown while the batch holding it is not cached
            ages[labels] = waited
    return NodeFigures(
        groups_by_state=by_state,
        partitions=stored_partitions,
        partitions_led=len(led),
        sessions=len(sessions),
        live_nodes=len(nodes.live),
        groups_coordinated=len(coordinator.groups),
        generation=nodes.placement.generation,
        in_flight=in_flight,
        rebalances=coordinator.rebalances(),
        partitions_detail=detail,
        oldest_waiting=oldest,
        oldest_unacked_age=ages,
        log_cache_bytes=partitions.cache_budget.held,
        connections={k: v for x in listeners for k, v in x.open_connections().items()},
        store_up=not STORE_OUTAGE.down,
        upstream_up=upstream.answering,
        lease_held=nodes.holds_lease(),
    )
