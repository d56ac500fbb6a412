"""Prometheus metrics: KIP-932's share-group set and the proxy's own, served at /metrics.

Labels are bounded: API names, acknowledgement types, states, error names; never member ids or
offsets. Gauges of live state (groups, share-partitions, sessions, in-flight records) are read
from the running proxy at scrape time rather than kept in step by hand.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

REGISTRY = CollectorRegistry(auto_describe=True)

REQUESTS = Counter(
    "shareproxy_requests",
    "Kafka requests answered, by API and top-level outcome",
    ["api", "outcome"],
    registry=REGISTRY,
)
REQUEST_SECONDS = Histogram(
    "shareproxy_request_duration_seconds",
    "Time from a request's arrival to its response being handed to the socket",
    ["api"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
    registry=REGISTRY,
)
ACKNOWLEDGEMENTS = Counter(
    "share_acknowledgements",
    "Records acknowledged, by group and acknowledgement type (gap/accept/release/reject/renew)",
    ["group", "type"],
    registry=REGISTRY,
)
DELIVERIES = Counter(
    "share_deliveries",
    "Records handed to consumers, by group: first deliveries and redeliveries",
    ["group", "delivery"],
    registry=REGISTRY,
)
LOCK_TIMEOUTS = Counter(
    "share_acquisition_lock_timeouts",
    "Records whose acquisition lock expired before they were acknowledged",
    ["group"],
    registry=REGISTRY,
)
PARTITION_LOAD_SECONDS = Histogram(
    "share_partition_load_duration_seconds",
    "Time to load a share-partition's state and take over as its leader",
    registry=REGISTRY,
)
STORE_COMMIT_SECONDS = Histogram(
    "shareproxy_store_commit_duration_seconds",
    "Time of one group-committed state-store write",
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5),
    registry=REGISTRY,
)
STORE_COMMIT_BATCH = Histogram(
    "shareproxy_store_commit_batch_size",
    "Share-partition writes per state-store transaction",
    buckets=(1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 5000),
    registry=REGISTRY,
)
UPSTREAM_FETCH_SECONDS = Histogram(
    "shareproxy_upstream_fetch_duration_seconds",
    "Time of one Fetch from the upstream cluster",
    registry=REGISTRY,
)
UPSTREAM_FETCH_BYTES = Counter(
    "shareproxy_upstream_fetch_bytes",
    "Record-batch bytes read from the upstream cluster",
    registry=REGISTRY,
)
ARCHIVED = Counter(
    "share_archived_records",
    "Records archived: rejected by a consumer, or at the delivery count limit (poison records)",
    ["group", "reason"],
    registry=REGISTRY,
)
CONNECTIONS = Counter(
    "shareproxy_connections",
    "Kafka client connections accepted, by listener and authenticated principal",
    ["listener", "principal"],
    registry=REGISTRY,
)
AUTHENTICATION_FAILURES = Counter(
    "shareproxy_authentication_failures",
    "Failed SASL authentications, by listener and mechanism",
    ["listener", "mechanism"],
    registry=REGISTRY,
)
AUTHORIZATION_DENIALS = Counter(
    "shareproxy_authorization_denials",
    "Operations refused by the ACLs, by operation and resource type",
    ["operation", "resource_type"],
    registry=REGISTRY,
)


class LiveState(Collector):
    """Gauges read from the running proxy when Prometheus scrapes."""

    def __init__(self, read: Callable[[], dict[str, Any]]) -> None:
        self.read = read

    def collect(self) -> Iterable[GaugeMetricFamily | CounterMetricFamily]:
        state = self.read()
        groups = GaugeMetricFamily("share_groups", "Share groups by state", labels=["state"])
        for name, count in sorted(state["groups_by_state"].items()):
            groups.add_metric([name], count)
        yield groups
        yield GaugeMetricFamily(
            "share_partitions", "Share-partitions this proxy leads", value=state["partitions"]
        )
        yield GaugeMetricFamily("share_sessions", "Open share sessions", value=state["sessions"])
        in_flight = GaugeMetricFamily(
            "share_in_flight_records",
            "Records between SPSO and SPEO by state, summed per group",
            labels=["group", "state"],
        )
        for (group, record_state), count in sorted(state["in_flight"].items()):
            in_flight.add_metric([group, record_state], count)
        yield in_flight
        rebalances = CounterMetricFamily(
            "share_group_rebalances",
            "Target assignments computed for a share group (members or topics changed)",
            labels=["group"],
        )
        for group, count in sorted(state["rebalances"].items()):
            rebalances.add_metric([group], count)
        yield rebalances
        labels = ["group", "topic", "partition"]
        families = {
            "lag": GaugeMetricFamily(
                "share_group_lag",
                "Records from SPSO to the high watermark not yet acknowledged or archived",
                labels=labels,
            ),
            "records": GaugeMetricFamily(
                "share_partition_in_flight_records",
                "Records between SPSO and SPEO of a share-partition",
                labels=labels,
            ),
            "batches": GaugeMetricFamily(
                "share_partition_in_flight_batches",
                "In-flight batches (ranges of one state) of a share-partition",
                labels=labels,
            ),
        }
        for (group, topic, partition), values in sorted(state["partitions_detail"].items()):
            for name, family in families.items():
                family.add_metric([group, topic, str(partition)], values[name])
        yield from families.values()
        open_connections = GaugeMetricFamily(
            "shareproxy_open_connections",
            "Kafka client connections open now, by listener and principal",
            labels=["listener", "principal"],
        )
        for (listener, principal), count in sorted(state["connections"].items()):
            open_connections.add_metric([listener, principal], count)
        yield open_connections


_live: LiveState | None = None


def install_live_state(read: Callable[[], dict[str, Any]]) -> None:
    """Point the live-state gauges at a running proxy (the last one started in a process)."""
    global _live
    if _live is None:
        _live = LiveState(read)
        REGISTRY.register(_live)
    else:
        _live.read = read
