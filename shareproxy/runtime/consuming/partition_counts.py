"""What a share-partition's leader counts in the metrics: records delivered (first or again),
acknowledged per type, archived, and lock timeouts. On every fetch and acknowledgement, so a
metric is touched once per kind, not once per record."""

from __future__ import annotations

import functools
from collections.abc import Sequence

from prometheus_client import Counter

from shareproxy.core.acknowledgement import AckBatch
from shareproxy.core.inflight import AcquiredRange
from shareproxy.core.states import AcknowledgeType
from shareproxy.telemetry import metrics

_ACK_NAMES = {t: t.name.lower() for t in AcknowledgeType}


class PartitionCounts:
    """One share-partition's counts; the pure share-partition's own counters are reported as
    they move."""

    def __init__(self, group_id: str, lock_timeouts: int, archived_at_limit: int) -> None:
        self.group_id = group_id
        self._reported = (lock_timeouts, archived_at_limit)

    def counted(self, lock_timeouts: int, archived_at_limit: int) -> None:
        """Move the metrics by what the pure share-partition counted since the last report."""
        before_timeouts, before_archived = self._reported
        if lock_timeouts != before_timeouts:
            metrics.LOCK_TIMEOUTS.labels(self.group_id).inc(lock_timeouts - before_timeouts)
        if archived_at_limit != before_archived:
            metrics.ARCHIVED.labels(self.group_id, "delivery_limit").inc(
                archived_at_limit - before_archived
            )
        self._reported = (lock_timeouts, archived_at_limit)

    def delivered(self, acquired: Sequence[AcquiredRange]) -> None:
        first = redelivered = 0
        for a in acquired:
            n = a.last_offset - a.first_offset + 1
            if a.delivery_count == 1:
                first += n
            else:
                redelivered += n
        if first:
            _group_counter(metrics.DELIVERIES, self.group_id, "first").inc(first)
        if redelivered:
            _group_counter(metrics.DELIVERIES, self.group_id, "redelivery").inc(redelivered)

    def acknowledged(self, batches: Sequence[AckBatch]) -> None:
        """Records acknowledged, per type (one type for a whole batch, or one per offset):
        summed first, so the metric is touched once per type, not once per offset."""
        counts: dict[int, int] = {}
        for b in batches:
            types = b.acknowledge_types
            if len(types) == 1:
                counts[types[0]] = counts.get(types[0], 0) + b.last_offset - b.first_offset + 1
            else:
                for t in types:
                    counts[t] = counts.get(t, 0) + 1
        group = self.group_id
        for t, n in counts.items():
            _group_counter(metrics.ACKNOWLEDGEMENTS, group, _ACK_NAMES[AcknowledgeType(t)]).inc(n)
            if t == AcknowledgeType.REJECT:
                metrics.ARCHIVED.labels(group, "rejected").inc(n)


@functools.cache
def _group_counter(metric: Counter, group_id: str, label: str) -> Counter:
    """A group's child of a counter moved on every fetch, looked up once: ``labels`` builds
    and checks its key each call. As many as the metric's own children, which are never
    removed either."""
    return metric.labels(group_id, label)
