"""What a share-partition's schedule (scheduled delivery, core.schedule) tells an operator: the
lateness histogram, and a metric and a rate-limited warning for each record whose delivery
time cannot be kept as named: a header that is not a time, a time past the bound, a time past
the topic's ``retention.ms`` (the cluster may delete the record before it falls due)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from shareproxy.core import group_config as gc
from shareproxy.core.schedule import Scheduled
from shareproxy.core.store import SharePartitionKey
from shareproxy.telemetry import metrics
from shareproxy.telemetry.logs import RateLimit

log = logging.getLogger(__name__)
log.addFilter(RateLimit())  # producers decide how many times are not kept


class ScheduleReport:
    """The reports of one share-partition; its leader hands it what the core counted."""

    def __init__(
        self, key: SharePartitionKey, topic: str, retention_ms: Callable[[], int | None]
    ) -> None:
        self.key = key
        self.topic = topic
        # the topic's retention.ms, when the cluster reported it (None: not known)
        self.retention_ms = retention_ms

    def not_a_time(self, offset: int) -> None:
        """A record's x-deliver-at header is not a time: it is delivered at once."""
        metrics.DELIVERY_TIMES_NOT_READ.labels(self.key.group_id).inc()
        log.warning(
            "the x-deliver-at header of group %s, topic %s, partition %d, offset %d is not "
            "a time (ms since the epoch, ASCII digits): delivered at once",
            self.key.group_id,
            self.topic,
            self.key.partition,
            offset,
        )

    def read_in(self, scheduled: Sequence[Scheduled]) -> None:
        """Records read in with a time: those cut to the bound, and those due after the
        topic's retention has run out, are counted and named."""
        group = self.key.group_id
        cut = sum(s.records for s in scheduled if s.cut)
        if cut:
            metrics.DELIVERY_TIMES_CUT.labels(group).inc(cut)
            log.warning(
                "%d records of group %s, topic %s, partition %d are due later than %s allows: "
                "delivered at the bound",
                cut,
                group,
                self.topic,
                self.key.partition,
                gc.MAX_DELIVERY_DELAY,
            )
        retention = self.retention_ms()
        if retention is None or retention < 0:  # unknown, or kept for ever
            return
        past = [s for s in scheduled if s.due_ms > s.timestamp_ms + retention]
        if past:
            metrics.DELIVERY_TIMES_PAST_RETENTION.labels(group).inc(sum(s.records for s in past))
            log.warning(
                "%d records of group %s, topic %s, partition %d are due after the topic's "
                "retention.ms (%d ms) counted from their timestamp: the cluster may delete them "
                "before they are due (latest due at %d ms since the epoch)",
                sum(s.records for s in past),
                group,
                self.topic,
                self.key.partition,
                retention,
                max(s.due_ms for s in past),
            )

    def delivered_late(self, lateness: Sequence[tuple[int, int]]) -> None:
        """Each record once in the histogram (a run of records shares its lateness)."""
        histogram = metrics.DELIVERY_LATENESS.labels(self.key.group_id)
        for records, late_ms in lateness:
            seconds = max(late_ms, 0) / 1000
            for _ in range(records):
                histogram.observe(seconds)
