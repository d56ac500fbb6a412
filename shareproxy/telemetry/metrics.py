"""Prometheus metrics: KIP-932's share-group set and the proxy's own, served at /metrics.

Labels are bounded: API names, acknowledgement types, states, error names; never member ids or
offsets. Gauges of live state (groups, share-partitions, sessions, in-flight records) are read
from the running proxy at scrape time rather than kept in step by hand.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from shareproxy.telemetry.kafka_metrics import KafkaNames, aliases

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
DELIVERY_LATENESS = Histogram(
    "shareproxy_delivery_lateness_seconds",
    "How long after its delivery time a record with one (x-deliver-at, or a group's "
    "share.delivery.delay.ms) was first delivered, by group",
    ["group"],
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300),
    registry=REGISTRY,
)
DELIVERY_TIMES_NOT_READ = Counter(
    "shareproxy_delivery_times_not_read",
    "Records whose x-deliver-at header is not a time (ms since the epoch, ASCII digits): "
    "delivered at once, by group",
    ["group"],
    registry=REGISTRY,
)
DELIVERY_TIMES_CUT = Counter(
    "shareproxy_delivery_times_cut",
    "Records due later than share.delivery.max.delay.ms allows (their x-deliver-at, or the "
    "group's delay): delivered at the bound, by group",
    ["group"],
    registry=REGISTRY,
)
DELIVERY_TIMES_PAST_RETENTION = Counter(
    "shareproxy_delivery_times_past_retention",
    "Records due after their topic's retention.ms runs out (counted from their timestamp): "
    "the cluster may delete them before they are due, by group",
    ["group"],
    registry=REGISTRY,
)
PUSHED = Counter(
    "shareproxy_push_records",
    "Records pushed to a group's endpoint, by group and outcome: accepted (2xx), released "
    "(408, 429, 5xx), rejected (another 4xx), timed_out (no answer in time, or none at all)",
    ["group", "outcome"],
    registry=REGISTRY,
)
PUSH_SECONDS = Histogram(
    "shareproxy_push_duration_seconds",
    "How long a group's endpoint took to answer one pushed record, by group",
    ["group"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
    registry=REGISTRY,
)
PUSH_ENDPOINT_DOWN = Gauge(
    "shareproxy_push_endpoint_down",
    "1 while a group's push endpoint fails (no answer, 408, 429 or 5xx) and pushes back off",
    ["group"],
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
DEAD_LETTERS = Counter(
    "shareproxy_dead_letter_records",
    "Records written to their group's dead-letter topic (KIP-1191), then archived",
    ["group"],
    registry=REGISTRY,
)
DEAD_LETTER_FAILURES = Counter(
    "shareproxy_dead_letter_failures",
    "Attempts to write a share-partition's dead letters that failed (a missing topic, a failed "
    "produce); the records stay Archiving and are retried",
    ["group"],
    registry=REGISTRY,
)
OFFSET_EXPIRATIONS = Counter(
    "share_offset_expirations",
    "Share-partitions whose state the proxy deleted after the retention: an expired group's, "
    "or a topic no member of a live group has subscribed to for that long",
    registry=REGISTRY,
)
OFFSET_DELETIONS = Counter(
    "share_offset_deletions",
    "Share-partitions whose state an admin deleted (DeleteShareGroupOffsets, DeleteGroups, REST)",
    registry=REGISTRY,
)
GROUP_EXPIRATIONS = Counter(
    "share_group_expirations",
    "Share groups deleted by the proxy after being empty for longer than the retention",
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


REGISTRY.register(
    KafkaNames(
        (
            ACKNOWLEDGEMENTS,
            PARTITION_LOAD_SECONDS,
            DEAD_LETTERS,
            DEAD_LETTER_FAILURES,
            LOCK_TIMEOUTS,
            OFFSET_EXPIRATIONS,
            OFFSET_DELETIONS,
            STORE_COMMIT_SECONDS,
            REQUESTS,
        )
    )
)


Family = GaugeMetricFamily | CounterMetricFamily


def _labelled(
    kind: type[Family], name: str, doc: str, labels: list[str], samples: Mapping[Any, float]
) -> Family:
    """A family with one sample per key of ``samples`` (a label value or a tuple of them)."""
    family = kind(name, doc, labels=labels)
    for key, value in sorted(samples.items()):
        values = key if isinstance(key, tuple) else (key,)
        family.add_metric([str(v) for v in values], value)
    return family


PartitionLabels = tuple[str, str, int]  # group, topic, partition


@dataclass(frozen=True, slots=True)
class NodeFigures:
    """What the live-state gauges show, read from a running node at each scrape."""

    groups_by_state: dict[str, int]
    partitions: int  # stored, or led here where the census has not counted them yet
    partitions_led: int
    sessions: int
    live_nodes: int
    groups_coordinated: int
    generation: int
    in_flight: dict[tuple[str, str], int]  # (group, state) -> records
    rebalances: dict[str, int]
    # "lag", "records", "batches", "start_offset" of each share-partition led here
    partitions_detail: dict[PartitionLabels, dict[str, int]]
    oldest_waiting: dict[PartitionLabels, float]
    oldest_unacked_age: dict[PartitionLabels, float]
    log_cache_bytes: int
    connections: dict[tuple[str, str], int]  # (listener, principal) -> open connections
    store_up: bool
    upstream_up: bool
    lease_held: bool


class LiveState(Collector):
    """Gauges read from the running proxy when Prometheus scrapes."""

    def __init__(self, read: Callable[[], NodeFigures]) -> None:
        self.read = read

    def collect(self) -> Iterable[Metric]:
        families: list[Metric] = list(self._families(self.read()))
        return [*families, *aliases(families)]

    def _families(self, state: NodeFigures) -> Iterable[Family]:
        yield _labelled(
            GaugeMetricFamily,
            "share_groups",
            "Share groups by state: every group the store holds, and those only joined",
            ["state"],
            state.groups_by_state,
        )
        yield GaugeMetricFamily(
            "share_partitions", "Share-partitions the store holds", value=state.partitions
        )
        yield GaugeMetricFamily(
            "share_partitions_led",
            "Share-partitions this proxy has loaded and leads",
            value=state.partitions_led,
        )
        yield GaugeMetricFamily("share_sessions", "Open share sessions", value=state.sessions)
        yield GaugeMetricFamily(
            "shareproxy_live_nodes",
            "Proxy nodes whose lease in the store has not passed, this one included",
            value=state.live_nodes,
        )
        yield GaugeMetricFamily(
            "shareproxy_share_groups_coordinated",
            "Share groups whose coordinator is this node (placement over the live nodes)",
            value=state.groups_coordinated,
        )
        yield GaugeMetricFamily(
            "shareproxy_cluster_generation",
            "The live node set's generation: raised by every node joining, leaving or lapsing",
            value=state.generation,
        )
        yield _labelled(
            GaugeMetricFamily,
            "share_in_flight_records",
            "Records between SPSO and SPEO by state, summed per group",
            ["group", "state"],
            state.in_flight,
        )
        yield _labelled(
            CounterMetricFamily,
            "share_group_rebalances",
            "Target assignments computed for a share group (members or topics changed)",
            ["group"],
            state.rebalances,
        )
        detail = state.partitions_detail
        for field, name, doc in (
            (
                "lag",
                "share_group_lag",
                "Records from SPSO to the high watermark not yet acknowledged or archived",
            ),
            (
                "records",
                "share_partition_in_flight_records",
                "Records between SPSO and SPEO of a share-partition",
            ),
            (
                "batches",
                "share_partition_in_flight_batches",
                "In-flight batches (ranges of one state) of a share-partition",
            ),
            (
                "start_offset",
                "share_partition_start_offset",
                "A share-partition's SPSO: below it every record is acknowledged or archived",
            ),
        ):
            yield _labelled(
                GaugeMetricFamily,
                name,
                doc,
                ["group", "topic", "partition"],
                {key: values[field] for key, values in detail.items()},
            )
        yield _labelled(
            GaugeMetricFamily,
            "share_partition_oldest_waiting_timestamp_seconds",
            "Timestamp of the first cached batch at or past SPSO while records wait there: the "
            "oldest record not yet acknowledged is at most this old (absent while none waits "
            "or that stretch is not cached)",
            ["group", "topic", "partition"],
            state.oldest_waiting,
        )
        yield _labelled(
            GaugeMetricFamily,
            "shareproxy_share_partition_oldest_unacked_age_seconds",
            "Seconds the oldest record not yet acknowledged (Available, Acquired, or not yet "
            "read) has waited, by its batch's timestamp; 0 when none waits (absent while the "
            "batch holding it is not cached). max by (group, topic) for a group's topic",
            ["group", "topic", "partition"],
            state.oldest_unacked_age,
        )
        for field, name, doc in (
            (
                "store_up",
                "shareproxy_store_up",
                "1 while the state store answers, 0 from a failed call to it until one succeeds",
            ),
            (
                "upstream_up",
                "shareproxy_upstream_up",
                "1 when the latest request to the upstream cluster was answered, else 0",
            ),
            (
                "lease_held",
                "shareproxy_node_lease_held",
                "1 while this node's lease in the store surely holds (it serves what it owns)",
            ),
        ):
            yield GaugeMetricFamily(name, doc, value=int(getattr(state, field)))
        yield GaugeMetricFamily(
            "shareproxy_log_cache_bytes",
            "Bytes of upstream fetch responses the log caches hold (bounded by --log-cache-bytes)",
            value=state.log_cache_bytes,
        )
        yield _labelled(
            GaugeMetricFamily,
            "shareproxy_open_connections",
            "Kafka client connections open now, by listener and principal",
            ["listener", "principal"],
            state.connections,
        )


_live: LiveState | None = None


def install_live_state(read: Callable[[], NodeFigures]) -> None:
    """Point the live-state gauges at a running proxy (the last one started in a process)."""
    global _live
    if _live is None:
        _live = LiveState(read)
        REGISTRY.register(_live)
    else:
        _live.read = read


def group_totals(group_id: str) -> dict[str, int]:
    """What this process counted for one group since it started: first deliveries,
    redeliveries, acquisition-lock timeouts and records archived (for the admin API's stats;
    read through the counters' public samples)."""
    totals = {"deliveries": 0, "redeliveries": 0, "lock_timeouts": 0, "archived": 0}
    picks = (
        (
            DELIVERIES,
            lambda labels: "redeliveries" if labels["delivery"] != "first" else "deliveries",
        ),
        (LOCK_TIMEOUTS, lambda labels: "lock_timeouts"),
        (ARCHIVED, lambda labels: "archived"),
    )
    for counter, field in picks:
        for family in counter.collect():
            for sample in family.samples:
                if sample.name.endswith("_total") and sample.labels.get("group") == group_id:
                    totals[field(sample.labels)] += int(sample.value)
    return totals
