"""Kafka's share-group metrics under Prometheus names that say which Kafka metric each is.

An operator with dashboards and alerts for Kafka's share groups finds the same figures here:
``kafka_<mbean group>_<name>``, snake-cased, with Kafka's tags as labels. Kafka's rates
(``…PerSec`` meters, ``…-rate``) are counters whose ``rate()`` gives them; its counts
(``…-count``, ``…-total``) are the same counters. Each is computed at scrape time from the
proxy's own metric it corresponds to (no second count on the hot path), summing away the labels
Kafka's metric does not have. A deleted group's counters stay: they are never removed.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

_SUFFIXES = ("_total", "_bucket", "_count", "_sum", "")


@dataclass(frozen=True, slots=True)
class Alias:
    """One Kafka metric as one of the proxy's metric families, relabelled."""

    name: str  # the Prometheus family name (a counter's samples add ``_total``)
    kafka: str  # Kafka's metric: MBean or group, name and tags
    source: str  # the proxy's family it is read from
    labels: Mapping[str, str] = field(default_factory=dict)  # proxy label -> Kafka's tag
    only: Mapping[str, str] = field(default_factory=dict)  # proxy label -> the value to keep
    values: Mapping[str, str] = field(default_factory=dict)  # proxy value -> Kafka's, or dropped
    constant: Mapping[str, str] = field(default_factory=dict)  # Kafka tags of fixed value


_ACK_TYPES = {"accept": "Accept", "release": "Release", "reject": "Reject", "renew": "Renew"}

ALIASES: tuple[Alias, ...] = (
    Alias(
        "kafka_server_share_group_metrics_record_acknowledgements",
        "kafka.server:type=ShareGroupMetrics,name=RecordAcknowledgementsPerSec,ackType=*",
        "share_acknowledgements",
        labels={"type": "ack_type"},
        values=_ACK_TYPES,  # gaps are not counted, as in Kafka
    ),
    Alias(
        "kafka_server_share_group_metrics_partition_load_time_seconds",
        "kafka.server:type=ShareGroupMetrics,name=PartitionLoadTimeMs",
        "share_partition_load_duration_seconds",
    ),
    Alias(
        "kafka_server_share_group_metrics_dead_letter_queue_records",
        "kafka.server:type=ShareGroupMetrics,name=DeadLetterQueueRecordCount,group=*",
        "shareproxy_dead_letter_records",
        labels={"group": "group"},
    ),
    Alias(
        "kafka_server_share_group_metrics_dead_letter_queue_failed_produce_requests",
        "kafka.server:type=ShareGroupMetrics,name=DeadLetterQueueFailedProduceRequestsPerSec,"
        "group=*",
        "shareproxy_dead_letter_failures",
        labels={"group": "group"},
    ),
    Alias(
        "kafka_server_share_partition_metrics_acquisition_lock_timeouts",
        "kafka.server:type=SharePartitionMetrics,name=AcquisitionLockTimeoutPerSec (per group "
        "here, not per partition)",
        "share_acquisition_lock_timeouts",
        labels={"group": "group"},
    ),
    Alias(
        "kafka_server_share_partition_metrics_in_flight_message_count",
        "kafka.server:type=SharePartitionMetrics,name=InFlightMessageCount,group,topic,partition",
        "share_partition_in_flight_records",
        labels={"group": "group", "topic": "topic", "partition": "partition"},
    ),
    Alias(
        "kafka_server_share_partition_metrics_in_flight_batch_count",
        "kafka.server:type=SharePartitionMetrics,name=InFlightBatchCount,group,topic,partition",
        "share_partition_in_flight_batches",
        labels={"group": "group", "topic": "topic", "partition": "partition"},
    ),
    Alias(
        "kafka_server_share_session_cache_share_sessions_count",
        "kafka.server:type=ShareSessionCache,name=ShareSessionsCount",
        "share_sessions",
    ),
    Alias(
        "kafka_coordinator_group_group_count",
        "group-coordinator-metrics: group-count,protocol=share",
        "share_groups",
        constant={"protocol": "share"},
    ),
    Alias(
        "kafka_coordinator_group_share_group_count",
        "group-coordinator-metrics: share-group-count,state=*",
        "share_groups",
        labels={"state": "state"},
    ),
    Alias(
        "kafka_coordinator_group_share_group_rebalance",
        "group-coordinator-metrics: share-group-rebalance-rate, share-group-rebalance-count",
        "share_group_rebalances",
    ),
    Alias(
        "kafka_coordinator_group_offset_expiration",
        "group-coordinator-metrics: offset-expiration-rate, offset-expiration-count (KIP-496; "
        "share-partitions here)",
        "share_offset_expirations",
    ),
    Alias(
        "kafka_coordinator_group_offset_deletion",
        "group-coordinator-metrics: offset-deletion-rate, offset-deletion-count (KIP-496; "
        "share-partitions here)",
        "share_offset_deletions",
    ),
    Alias(
        "kafka_coordinator_share_write_latency_seconds",
        "share-coordinator-metrics: write-rate, write-total (its count), write-latency-avg "
        "(sum / count)",
        "shareproxy_store_commit_duration_seconds",
    ),
    Alias(
        "kafka_server_broker_topic_metrics_total_share_fetch_requests",
        "kafka.server:type=BrokerTopicMetrics,name=TotalShareFetchRequestsPerSec (all topics)",
        "shareproxy_requests",
        only={"api": "ShareFetch"},
    ),
    Alias(
        "kafka_server_broker_topic_metrics_failed_share_fetch_requests",
        "kafka.server:type=BrokerTopicMetrics,name=FailedShareFetchRequestsPerSec (all topics)",
        "shareproxy_requests",
        only={"api": "ShareFetch", "outcome": "error"},
    ),
    Alias(
        "kafka_server_broker_topic_metrics_total_share_acknowledgement_requests",
        "kafka.server:type=BrokerTopicMetrics,name=TotalShareAcknowledgementRequestsPerSec "
        "(all topics)",
        "shareproxy_requests",
        only={"api": "ShareAcknowledge"},
    ),
    Alias(
        "kafka_server_broker_topic_metrics_failed_share_acknowledgement_requests",
        "kafka.server:type=BrokerTopicMetrics,name=FailedShareAcknowledgementRequestsPerSec "
        "(all topics)",
        "shareproxy_requests",
        only={"api": "ShareAcknowledge", "outcome": "error"},
    ),
)
_BY_SOURCE: dict[str, list[Alias]] = {}
for _alias in ALIASES:
    _BY_SOURCE.setdefault(_alias.source, []).append(_alias)


def _kafkas_labels(alias: Alias, labels: Mapping[str, str]) -> dict[str, str] | None:
    """A sample's labels as Kafka's tags, or None for a sample Kafka's metric does not count."""
    if any(labels.get(k) != v for k, v in alias.only.items()):
        return None
    kept = dict(alias.constant)
    for ours, kafkas in alias.labels.items():
        value = labels.get(ours, "")
        if alias.values:
            if value not in alias.values:
                return None
            value = alias.values[value]
        kept[kafkas] = value
    if "le" in labels:
        kept["le"] = labels["le"]
    return kept


def _relabelled(alias: Alias, family: Metric) -> Metric:
    sums: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for sample in family.samples:
        suffix = next(s for s in _SUFFIXES if sample.name.endswith(s))
        if sample.name != family.name + suffix:
            continue  # _created: when a series began, which no Kafka metric says
        kept = _kafkas_labels(alias, sample.labels)
        if kept is not None:
            key = (suffix, tuple(sorted(kept.items())))
            sums[key] = sums.get(key, 0.0) + sample.value
    out = Metric(alias.name, f"Kafka's {alias.kafka}", family.type)
    for (suffix, labels), value in sums.items():  # buckets stay in order
        out.add_sample(alias.name + suffix, dict(labels), value)
    return out


def aliases(families: Iterable[Metric]) -> Iterator[Metric]:
    """Kafka's metrics among ``families`` (the proxy's own), under Kafka's names."""
    for family in families:
        for alias in _BY_SOURCE.get(family.name, ()):
            yield _relabelled(alias, family)


class KafkaNames(Collector):
    """Kafka's names of the proxy's counters and histograms (the live gauges' come with them)."""

    def __init__(self, sources: Iterable[Collector]) -> None:
        self.sources = tuple(sources)

    def collect(self) -> Iterator[Metric]:
        return aliases(f for source in self.sources for f in source.collect())
