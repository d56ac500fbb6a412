"""Where each led share-partition's log ends, kept current while no consumer reads it.

A share-partition's lag is measured to the high watermark its log cache last heard, and only
reads tell the cache: with every consumer gone (crashed, or scaled to zero by an autoscaler),
records produced meanwhile would never show as lag, and the alerts and autoscalers reading it
would see an idle group. So, every ``LOG_END_CHECK_MS``, the share-partitions whose high
watermark no read moved since the last round are asked where their log ends, in one Fetch of at
most one byte per partition, batched by broker."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from shareproxy.core.errors import ErrorCode
from shareproxy.core.store import SharePartitionKey
from shareproxy.runtime.consuming.leader import SharePartitionLeader
from shareproxy.runtime.jobs import Periodic
from shareproxy.upstream.client import Upstream, UpstreamError

log = logging.getLogger(__name__)

# how often an idle share-partition's log end is asked: within a typical scrape interval
LOG_END_CHECK_MS = 10_000


class LogEnds:
    """The job asking idle share-partitions' log ends; ``led`` lists the leaders to watch."""

    def __init__(
        self, upstream: Upstream, led: Callable[[], Sequence[SharePartitionLeader]]
    ) -> None:
        self.upstream = upstream
        self.led = led
        self._heard: dict[SharePartitionKey, int] = {}  # the high watermark each had last round
        self.job = Periodic(
            "log-ends",
            LOG_END_CHECK_MS / 1000,
            self.check,
            "asking idle share-partitions where their logs end",
            at_once=False,
            reads_store=False,
        )

    async def check(self) -> None:
        """One round: ask for the partitions whose high watermark stood still since the last."""
        heard, self._heard = self._heard, {}
        idle: dict[tuple[str, int], list[SharePartitionLeader]] = {}
        for leader in self.led():
            end = leader.cache.high_watermark
            self._heard[leader.key] = end
            if heard.get(leader.key) == end:
                idle.setdefault((leader.topic, leader.key.partition), []).append(leader)
        if not idle:
            return
        # from an offset every leader of the partition has heard to be in the log
        wanted = {tp: max(ld.cache.high_watermark for ld in lds) for tp, lds in idle.items()}
        try:
            answers = await self.upstream.fetch(wanted, partition_max_bytes=1)
        except UpstreamError as exc:  # the upstream's own outage is reported where it is met
            log.debug("log ends not read: %s", exc)
            return
        for tp, data in answers.items():
            if data.error_code == ErrorCode.NONE:
                for leader in idle.get(tp, ()):
                    leader.heard_log_end(data.high_watermark)
