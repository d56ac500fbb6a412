"""The dead-letter writer (KIP-1191 on any cluster): copies the Archiving records of every
share-partition this node leads to its group's dead-letter topic, then archives them.

At least once: a record is Archiving in the store before anyone is told it was rejected, and is
Archived only after the dead-letter topic acknowledged its copy (acks=all). A crash in between
writes it again from the stored state. Before each write the topic is held to Kafka's rules
(``core.dead_letter``: its name, its opt-in config, created if missing only when allowed). A
topic that breaks them, or a failed produce, keeps the records Archiving (SPSO waits for them),
is logged, counted and shown by the admin API, and is retried with a growing back-off.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass

from shareproxy.core.dead_letter import (
    ALWAYS_REPORTED,
    CREATED_CONFIGS,
    DEFAULT_TOPIC_PREFIX,
    GROUP_ENABLE,
    DeadLetterRun,
    enabled_problem,
    headers,
    missing_problem,
    target_partition,
    topic_problem,
)
from shareproxy.core.errors import ErrorCode
from shareproxy.core.group_settings import GroupSettings
from shareproxy.core.store import SharePartitionKey
from shareproxy.runtime.archive.record_copies import (
    Copy,
    CopyError,
    CopyProducer,
    Original,
    read_originals,
)
from shareproxy.runtime.consuming.leader import SharePartitionLeader
from shareproxy.runtime.consuming.partitions import SharePartitions
from shareproxy.runtime.jobs import Periodic
from shareproxy.telemetry import metrics
from shareproxy.upstream.client import TopicInfo, Upstream
from shareproxy.upstream.topic_admin import create_topic, topic_configs

log = logging.getLogger(__name__)

DEAD_LETTER_CHECK_MS = 200  # how often share-partitions are looked at for Archiving records
RETRY_FIRST_MS, RETRY_MAX_MS = 1_000, 30_000  # after a failure, per share-partition


class DeadLetterError(Exception):
    """The dead-letter topic could not take the records (it breaks a rule, or the produce
    failed)."""


@dataclass(slots=True)
class Problem:
    """Why a share-partition's dead letters are not written yet, and when to try again."""

    message: str
    since_ms: int
    retry_ms: int
    delay_ms: int


class DeadLetterWriter:
    def __init__(
        self,
        partitions: SharePartitions,
        upstream: Upstream,
        settings_for: Callable[[str], GroupSettings],
        clock_ms: Callable[[], int],
        producer: CopyProducer,
        *,
        topic_prefix: str = DEFAULT_TOPIC_PREFIX,
        auto_create: bool = False,
    ) -> None:
        self.partitions = partitions
        self.topic_prefix = topic_prefix  # Kafka's errors.deadletterqueue.topic.name.prefix
        self.auto_create = auto_create  # …auto.create.topics.enable
        self.upstream = upstream
        self.settings_for = settings_for
        self.clock_ms = clock_ms
        self.problems: dict[SharePartitionKey, Problem] = {}
        self.producer = producer  # shared with redrives; the runtime stops it
        # each share-partition's failures are handled (and backed off) in write_due
        self.rounds = Periodic(
            "dead-letters",
            DEAD_LETTER_CHECK_MS / 1000,
            self.write_due,
            "writing dead letters",
            at_once=False,
            reads_store=False,
        )

    def start(self) -> None:
        self.rounds.start()

    async def stop(self) -> None:
        await self.rounds.stop()

    # ------------------------------------------------------------------ the rounds
    async def write_due(self) -> None:
        """Write out every share-partition with Archiving records that is not backing off."""
        now = self.clock_ms()
        for leader in self.partitions.loaded():
            key = leader.key
            if not leader.dead_letter_pending or not leader.valid:
                continue
            problem = self.problems.get(key)
            if problem is not None and problem.retry_ms > now:
                continue
            try:
                await self.write_out(leader)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the upstream cluster or its topic: retried
                self._failed(key, exc, problem)
            else:
                if self.problems.pop(key, None) is not None:
                    log.info("dead letters of %s are written again", key)

    def _failed(self, key: SharePartitionKey, exc: Exception, before: Problem | None) -> None:
        now = self.clock_ms()
        message = str(exc) or type(exc).__name__
        delay = RETRY_FIRST_MS if before is None else min(before.delay_ms * 2, RETRY_MAX_MS)
        since = before.since_ms if before is not None else now
        self.problems[key] = Problem(message, since, now + delay, delay)
        metrics.DEAD_LETTER_FAILURES.labels(key.group_id).inc()
        if before is None or before.message != message:
            log.warning("dead letters of %s not written (retried): %s", key, message)

    # ------------------------------------------------------------------ one share-partition
    async def write_out(self, leader: SharePartitionLeader) -> None:
        group = leader.key.group_id
        settings = self.settings_for(group)
        runs = leader.dead_letters()
        if not runs:
            return
        topic = settings.dead_letter_topic
        if not topic:  # the group's dead-letter topic was removed: nothing to write them to
            for run in runs:
                await leader.dead_lettered(run.first, run.last)
            log.warning("%s: no dead-letter topic any more; archived what waited for one", group)
            return
        info = await self._checked_topic(topic)
        partition = target_partition(leader.key.partition, info.partition_count)
        for run in runs:
            originals = (
                await read_originals(
                    self.upstream,
                    leader.topic,
                    leader.key.partition,
                    run.first,
                    run.last,
                    settings.isolation_level,
                )
                if settings.dead_letter_copy
                else {}
            )
            await self._produce(topic, partition, leader, run, originals)
            if not await leader.dead_lettered(run.first, run.last):
                return  # no longer this node's to archive: its new leader writes them again
            metrics.DEAD_LETTERS.labels(group).inc(run.last - run.first + 1)

    async def _checked_topic(self, topic: str) -> TopicInfo:
        """The dead-letter topic, once it passes Kafka's rules (created if it is missing and
        that is allowed); DeadLetterError naming the rule it breaks."""
        problem = topic_problem(topic, self.topic_prefix)
        if problem is None:
            info = (await self.upstream.refresh_metadata([topic])).get(topic)
            if info is not None:
                reported = await topic_configs(
                    self.upstream, topic, (GROUP_ENABLE, ALWAYS_REPORTED)
                )
                problem = enabled_problem(reported)
            else:
                problem = missing_problem(self.auto_create)
                if problem is None:
                    info = await self._create(topic)
        if problem is not None:
            raise DeadLetterError(f"dead-letter topic {topic!r}: {problem}")
        assert info is not None
        return info

    async def _create(self, topic: str) -> TopicInfo:
        """Create the topic as Kafka does; a cluster that does not know the opt-in config
        (INVALID_CONFIG: Kafka before 4.4) gets the topic without it."""
        configs = dict(CREATED_CONFIGS)
        if await create_topic(self.upstream, topic, configs) == ErrorCode.INVALID_CONFIG:
            del configs[GROUP_ENABLE]
            if await create_topic(self.upstream, topic, configs) == ErrorCode.INVALID_CONFIG:
                raise DeadLetterError(
                    f"dead-letter topic {topic!r}: the cluster refused its configs"
                )
        log.info("created the dead-letter topic %s", topic, extra={"configs": configs})
        info = (await self.upstream.refresh_metadata([topic])).get(topic)
        if info is None:
            raise DeadLetterError(f"dead-letter topic {topic!r} was created: not in metadata yet")
        return info

    async def _produce(
        self,
        topic: str,
        partition: int,
        leader: SharePartitionLeader,
        run: DeadLetterRun,
        originals: dict[int, Original],
    ) -> None:
        none = Original(None, None)
        copies = []
        for offset in range(run.first, run.last + 1):
            original = originals.get(offset, none)
            hs = headers(leader.topic, leader.key.partition, offset, leader.key.group_id, run)
            copies.append(Copy(original.key, original.value, list(hs)))
        try:
            await self.producer.produce(topic, partition, copies)
        except CopyError as exc:
            raise DeadLetterError(str(exc)) from exc
