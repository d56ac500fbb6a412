"""Each topic's ``retention.ms`` as the cluster reports it, for scheduled delivery: a record due
after its topic's retention has run out may be deleted before it is due, which the leader
reports. Read when a leader with a schedule loads, and again in the background once stale."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from shareproxy.telemetry.logs import first_line
from shareproxy.upstream.client import Upstream
from shareproxy.upstream.topic_admin import topic_configs

log = logging.getLogger(__name__)

RETENTION_MS = "retention.ms"
# how long a topic's retention read stands before it is read again (it rarely changes)
REREAD_S = 300.0


class TopicRetention:
    """The retention of the topics this node leads share-partitions of; it alone reads them."""

    def __init__(self, upstream: Upstream, clock: Callable[[], float] = time.monotonic) -> None:
        self.upstream = upstream
        self.clock = clock
        # topic -> (when read, its retention.ms; None when the cluster did not say)
        self._read: dict[str, tuple[float, int | None]] = {}
        self._reading: dict[str, asyncio.Task[int | None]] = {}

    async def read(self, topic: str) -> int | None:
        """The topic's retention.ms, read now (None: the cluster did not say, or could not)."""
        try:
            configs = await topic_configs(self.upstream, topic, [RETENTION_MS])
        except Exception as exc:  # a report's input: never a reason to fail a load
            log.info("retention.ms of topic %s not read: %s", topic, first_line(exc))
            self._read[topic] = (self.clock(), self.of_known(topic))
            return self.of_known(topic)
        value = configs.get(RETENTION_MS)
        retention = int(value) if value is not None and value.lstrip("-").isdigit() else None
        self._read[topic] = (self.clock(), retention)
        return retention

    def of_known(self, topic: str) -> int | None:
        """The retention last read, however old."""
        known = self._read.get(topic)
        return known[1] if known is not None else None

    def of(self, topic: str) -> int | None:
        """The retention last read; read again in the background when it is stale."""
        known = self._read.get(topic)
        stale = known is None or self.clock() - known[0] >= REREAD_S
        if stale and topic not in self._reading:
            try:
                task = asyncio.get_running_loop().create_task(self.read(topic))
            except RuntimeError:  # no loop: nothing reads it now
                return self.of_known(topic)
            self._reading[topic] = task
            task.add_done_callback(lambda _: self._reading.pop(topic, None))
        return known[1] if known is not None else None
