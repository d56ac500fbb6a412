"""One share-partition at run time: the pure ``SharePartition`` with the log cache it acquires
from, the mutex that keeps its changes in order, and the way of each change to the store.

An acknowledgement, release, lock timeout or log-start move is committed (group commit) before
anything reports it. A refused write (a newer state epoch, the store failing) retires the
leader: whoever holds it sees ``valid`` turn False, and the registry loads the share-partition
afresh from the store on next use.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from shareproxy.core.acknowledgement import AckBatch
from shareproxy.core.dead_letter import DeadLetterRun
from shareproxy.core.errors import ErrorCode, ShareError
from shareproxy.core.group_settings import GroupSettings
from shareproxy.core.inflight import AcquiredRange, InFlightRange
from shareproxy.core.key_order import WHOLE_SPACE, owned_range
from shareproxy.core.persisted import StateDelta
from shareproxy.core.record_actions import RecordsPage
from shareproxy.core.record_views import Records
from shareproxy.core.share_partition import SharePartition
from shareproxy.core.states import AcknowledgeType, AcquireMode, RecordState
from shareproxy.core.store import PartitionWrite, SharePartitionKey
from shareproxy.runtime.consuming.cache_budget import CacheBudget
from shareproxy.runtime.consuming.group_commit import GroupCommitter
from shareproxy.runtime.consuming.log_cache import CachedLog, LogCache, records_holding
from shareproxy.runtime.consuming.partition_counts import PartitionCounts
from shareproxy.runtime.consuming.schedule_report import ScheduleReport
from shareproxy.upstream.fetched import PartitionData

log = logging.getLogger(__name__)

# a member that asked for records here this recently shares the work (fair work):
# several of Kafka's and librdkafka's default fetch waits (500 ms)
ASKING_WINDOW_MS = 2_000

T = TypeVar("T")


@dataclass(slots=True)
class Acquisition:
    """What one share-partition handed out: the acquired offset ranges, and the upstream record
    batches holding them, whole and as they came (the client filters by the ranges): a view
    of the bytes read from upstream, not a copy, where they lie side by side."""

    acquired: list[AcquiredRange]
    records: Records


class SharePartitionLeader:
    """The leader of one share-partition: every change goes through ``mutex`` and is written
    before the next one starts, so deltas reach the store in the order they were made."""

    def __init__(
        self,
        key: SharePartitionKey,
        topic: str,
        sp: SharePartition,
        state_epoch: int,
        settings: GroupSettings,
        committer: GroupCommitter,
        clock_ms: Callable[[], int],
        on_refused: Callable[[SharePartitionLeader], None],
        *,
        still_led: Callable[[], bool],
        members_assigned: Callable[[], int],
        cache_budget: CacheBudget,
        retention_ms: Callable[[], int | None] = lambda: None,
    ) -> None:
        self.key = key
        self.topic = topic
        self.schedule_report = ScheduleReport(key, topic, retention_ms)
        self._sp = sp
        self.state_epoch = state_epoch
        self.settings = settings
        self.committer = committer
        self.clock_ms = clock_ms
        self.on_refused = on_refused
        self._mutex = asyncio.Lock()  # one change and its write at a time; not an acquisition lock
        self.cache_budget = cache_budget
        self._cache = self._new_cache(settings)
        self._valid = True  # False once a write was refused or the state replaced: reload
        # whether this node still leads the partition (placement and its lease):
        # asked under the mutex, since waiting for it may outlast either
        self.still_led = still_led
        # members the group's coordinator assigned this partition, fetching here or not yet
        self.members_assigned = members_assigned
        self._reading_ahead = False  # an upstream read-ahead for this cache is under way
        self.counts = PartitionCounts(key.group_id, sp.lock_timeouts, sp.archived_at_limit)
        # member id -> when it last asked for records here (within ASKING_WINDOW_MS)
        self._fetchers: dict[str, int] = {}
        self._changed: asyncio.Future[None] | None = None

    def log_fields(self) -> dict[str, object]:
        """The share-partition as a log line names it: group, topic name, partition."""
        return {"group": self.key.group_id, "topic": self.topic, "partition": self.key.partition}

    # ------------------------------------------------------------------ what others may read
    @property
    def valid(self) -> bool:
        """False once a write was refused or the state replaced: the registry reloads it."""
        return self._valid

    @property
    def cache(self) -> CachedLog:
        """The log cache, to read: only the leader changes it (``took_in``)."""
        return self._cache

    @property
    def reading_ahead(self) -> bool:
        """Whether an upstream read-ahead for this cache is under way."""
        return self._reading_ahead

    def read_ahead_started(self) -> None:
        self._reading_ahead = True

    def read_ahead_ended(self) -> None:
        self._reading_ahead = False

    def heard_log_end(self, high_watermark: int) -> None:
        """The log's end as a probe of an idle share-partition found it (``LogEnds``)."""
        self._cache.heard_end(high_watermark)

    def took_in(self, data: PartitionData, fetch_offset: int | None = None) -> bool:
        """Batches read from upstream join the cache; requests waiting on this share-partition
        are woken when any was new. Whether any was."""
        # records already judged keep their time: a batch read again is not parsed for it
        self._cache.times_from = self._sp.times_wanted_from()
        if self._cache.add(data, fetch_offset):
            self.notify()
            return True
        return False

    async def snapshot(
        self,
    ) -> tuple[int, int, list[tuple[int, int, RecordState]], list[tuple[int, int, int]]]:
        """SPSO, SPEO, the in-flight ranges as (first, last, state) and those of them waiting
        for their delivery time as (first, last, time), read between changes."""
        async with self._mutex:
            return (
                self._sp.spso,
                self._sp.speo,
                [(r.first, r.last, r.state) for r in self._sp.ranges],
                self._sp.waiting_runs(self.clock_ms()),
            )

    def waiting_runs(self, now_ms: int) -> list[tuple[int, int, int]]:
        """The in-flight ranges whose delivery time is after ``now_ms``: (first, last, time)."""
        return self._sp.waiting_runs(now_ms)

    # ------------------------------------------------------------------ queries
    @property
    def spso(self) -> int:
        return self._sp.spso

    @property
    def speo(self) -> int:
        return self._sp.speo

    @property
    def log_start_offset(self) -> int:
        return self._sp.log_start_offset

    @property
    def ranges(self) -> Sequence[InFlightRange]:
        """The in-flight ranges, to read (``snapshot`` for a consistent one)."""
        return self._sp.ranges

    @property
    def dead_letter_pending(self) -> bool:
        """Whether some records may be Archiving, waiting for the dead-letter topic."""
        return self._sp.dead_letter_pending

    def dead_letters(self) -> list[DeadLetterRun]:
        return self._sp.dead_letters()

    def has_acquirable(self) -> bool:
        return self._sp.has_acquirable(self.clock_ms())

    def next_fetch_offset(self) -> int:
        """The first record an acquisition could take now (records waiting for their delivery
        time are passed over), else SPEO."""
        return self._sp.next_fetch_offset(self.clock_ms())

    def bytes_ready_from_next_fetch(self) -> int:
        """Cached log bytes an acquisition could deliver now (0 with nothing acquirable):
        what a fetch's MinBytes counts, as Kafka counts from the next fetch offset."""
        if not self.has_acquirable():
            return 0
        return self._cache.bytes_from(self.next_fetch_offset())

    def locks_due(self, now_ms: int) -> bool:
        """Whether an acquisition lock is past its deadline."""
        deadline = self._sp.next_lock_deadline()
        return deadline is not None and deadline <= now_ms

    def backoff_ended(self, since_ms: int, now_ms: int) -> bool:
        """Whether a redelivery back-off ended, or a record's delivery time came, in
        (since_ms, now_ms]."""
        sp = self._sp
        return (sp.limits.redelivery_backoff.enabled or sp.deferred_count > 0) and sp.backoff_ended(
            since_ms, now_ms
        )

    # ------------------------------------------------------------------ waking long polls

    def changed(self) -> asyncio.Future[None]:
        """Resolves when records may have become acquirable (release, timeout, SPSO move)."""
        if self._changed is None or self._changed.done():
            self._changed = asyncio.get_running_loop().create_future()
        return self._changed

    def notify(self) -> None:
        if self._changed is not None and not self._changed.done():
            self._changed.set_result(None)

    def invalidate(self) -> None:
        """The stored state was replaced (reset, delete, a batch repair): stop using this one."""
        self._valid = False
        self.notify()

    def _new_cache(self, settings: GroupSettings) -> LogCache:
        return LogCache(
            settings.isolation_level,
            settings.key_ordering,
            budget=self.cache_budget,
            timed=settings.deliver_at_header,
            on_not_a_time=self.schedule_report.not_a_time,
        )

    def apply_settings(self, settings: GroupSettings) -> None:
        """A group config changed: the next acquisition, lock and delivery use it."""
        if (settings.isolation_level, settings.key_ordering, settings.deliver_at_header) != (
            self.settings.isolation_level,
            self.settings.key_ordering,
            self.settings.deliver_at_header,
        ):
            self._cache.clear()
            self._cache = self._new_cache(settings)  # refilled
        self.settings = settings
        self._sp.change_limits(settings.limits)
        self.notify()  # a higher lock limit may let waiting fetches acquire

    # ------------------------------------------------------------------ changes
    async def acquire(
        self, member_id: str, max_records: int, mode: AcquireMode, max_bytes: int
    ) -> Acquisition:
        """Acquire for ``member_id`` from what is cached; nothing if this leader is retired."""
        async with self._mutex:
            if not self._valid or not self.still_led():
                return Acquisition([], b"")
            now_ms = self.clock_ms()
            fair, keyed = self.settings.fair_acquisition, self.settings.key_ordering
            sharers = self._sharers(member_id, now_ms) if fair or keyed else {member_id}
            return self._acquire_cached(
                member_id,
                now_ms,
                max_records,
                mode,
                max_bytes,
                max(len(sharers), self.members_assigned()) if fair else 1,
                owned_range(member_id, sharers) if keyed else WHOLE_SPACE,
            )

    def _sharers(self, member_id: str, now_ms: int) -> set[str]:
        """The members sharing the work here: those that asked for records lately (idle ones
        ask every MaxWait) and those holding records (busy ones do not ask). Fair work counts
        the members assigned the partition too, so the first to fetch after a start does not
        take a whole backlog before the others have asked."""
        fetchers = self._fetchers
        fetchers[member_id] = now_ms
        if len(fetchers) > 1:
            horizon = now_ms - ASKING_WINDOW_MS
            for gone in [m for m, at in fetchers.items() if at < horizon]:
                del fetchers[gone]
        return fetchers.keys() | self._sp.holders()

    def _acquire_cached(
        self,
        member_id: str,
        now_ms: int,
        max_records: int,
        mode: AcquireMode,
        max_bytes: int,
        sharers: int = 1,
        owned: tuple[int, int] = WHOLE_SPACE,
    ) -> Acquisition:
        sp = self._sp
        batches = self._cache.from_offset(sp.next_fetch_offset(now_ms), max_bytes)
        if not batches:
            return Acquisition([], b"")
        headers = [b.header for b in batches]
        acquired = sp.acquire(member_id, headers, now_ms, max_records, mode, sharers, owned)
        if sp.deferred_count:  # what waits is read again at its time, not kept meanwhile
            self._cache.trim(sp.cache_floor())
        if sp.scheduled:
            self.schedule_report.read_in(sp.scheduled)
            sp.scheduled.clear()
        if not acquired:
            return Acquisition([], b"")
        self.counts.delivered(acquired)
        if sp.lateness:
            self.schedule_report.delivered_late(sp.lateness)
            sp.lateness.clear()
        return Acquisition(acquired, records_holding(batches, acquired))

    async def acknowledge(self, member_id: str, batches: Sequence[AckBatch]) -> ErrorCode:
        """Apply a member's acknowledgements; NONE once they are durable, else why not."""
        async with self._mutex:
            if not self._valid:
                return ErrorCode.FENCED_STATE_EPOCH
            if not self.settings.renew_acknowledge and any(
                AcknowledgeType.RENEW in b.acknowledge_types for b in batches
            ):
                return ErrorCode.INVALID_RECORD_STATE  # as Kafka, where renewing is off
            try:
                delta = self._sp.acknowledge(member_id, batches, self.clock_ms())
            except ShareError as e:
                return e.code
            code = await self._write(delta)
        if code == ErrorCode.NONE:
            self.counts.acknowledged(batches)
        return code

    def holds(self, member_id: str) -> bool:
        """Whether the member holds acquisition locks here."""
        return self._sp.holds(member_id)

    def involves(self, member_id: str) -> bool:
        """Whether ``release_member`` could change or write anything here: the member fetched
        lately or holds locks, a change is under way (it may be acquiring for the member), or
        something waits to be written."""
        sp = self._sp
        return (
            self._mutex.locked()
            or member_id in self._fetchers
            or sp.holds(member_id)
            or sp.unwritten()
        )

    async def release_member(self, member_id: str) -> None:
        """The member's share session closed or it left: its acquisition locks end now."""
        async with self._mutex:
            self._fetchers.pop(member_id, None)
            if self._valid:
                await self._write(self._sp.release_member(member_id, self.clock_ms()))

    async def operator_change(
        self, change: Callable[[SharePartition, int], tuple[StateDelta, T]]
    ) -> T:
        """An operator's change of the records (core/record_actions.py), given the engine and
        the time: applied under the mutex and durable before this returns; a ShareError for a
        change refused (nothing changed) or not written (retriable)."""
        async with self._mutex:
            if not self._valid or not self.still_led():
                raise ShareError(ErrorCode.NOT_LEADER_OR_FOLLOWER, "not led here now: retry")
            delta, result = change(self._sp, self.clock_ms())
            code = await self._write(delta)
        if code != ErrorCode.NONE:
            raise ShareError(code, "the change could not be written to the state store: retry")
        return result

    async def page(self, from_offset: int | None, limit: int) -> RecordsPage:
        """A consistent page of the in-flight records (core/record_actions.py)."""
        async with self._mutex:
            return self._sp.page(from_offset, limit)

    async def dead_lettered(self, first: int, last: int) -> bool:
        """The dead-letter topic has offsets first..last: archive them. False if this leader
        may no longer change the state (its successor writes them to the topic again)."""
        async with self._mutex:
            if not self._valid or not self.still_led():
                return False
            return await self._write(self._sp.dead_lettered(first, last)) == ErrorCode.NONE

    async def expire_locks(self) -> None:
        """Acquisition locks past their deadline end as if released."""
        async with self._mutex:
            if self._valid:
                await self._write(self._sp.expire_locks(self.clock_ms()))

    async def log_start_moved(self, log_start_offset: int, *, reset_cache: bool = False) -> None:
        """Retention moved the upstream log start: Available records below it are archived
        and SPSO moves on. ``reset_cache``: the cache learns it here (a fetch that brought
        batches has told it already)."""
        async with self._mutex:
            if not self._valid:
                return
            if reset_cache:
                self._cache.log_start_offset = log_start_offset
            await self._write(self._sp.update_log_start_offset(log_start_offset))

    # ------------------------------------------------------------------ durability
    async def _write(self, delta: StateDelta) -> ErrorCode:
        """Commit ``delta`` (call with ``mutex`` held); a refusal retires this leader."""
        if delta.is_empty:
            return ErrorCode.NONE
        self.counts.counted(self._sp.lock_timeouts, self._sp.archived_at_limit)
        archived = self._sp.take_archived_log()  # rare: a rejection or the delivery limit
        code = await self.committer.commit(
            PartitionWrite(self.key, self.state_epoch, delta, archived)
        )
        if code != ErrorCode.NONE:
            log.warning(
                "share-partition write refused: reloading it",
                extra={**self.log_fields(), "error": code.name},
            )
            self._valid = False
            self.on_refused(self)
        else:
            self._cache.trim(self._sp.cache_floor())
        self.notify()
        return code
