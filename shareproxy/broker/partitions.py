"""Share-partition leaders at run time: the pure engine plus its lock, its log cache and the
path to durability. An acknowledgement, release or lock timeout is committed (group commit)
before anything reports it; a refused write drops the in-memory state, which is reloaded from
the store on next use."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from uuid import UUID

from shareproxy import metrics
from shareproxy.broker.group_commit import GroupCommitter
from shareproxy.broker.group_settings import GroupSettings
from shareproxy.broker.log_cache import LogCache
from shareproxy.broker.upstream import EARLIEST, Upstream, UpstreamError
from shareproxy.core.acknowledgement import AckBatch
from shareproxy.core.errors import ErrorCode, ShareError
from shareproxy.core.inflight import AcquiredRange
from shareproxy.core.offset_reset import resolve_start_offset
from shareproxy.core.persisted import StateDelta
from shareproxy.core.share_partition import SharePartition
from shareproxy.core.states import AcknowledgeType, AcquireMode
from shareproxy.core.store import PartitionWrite, SharePartitionKey, ShareStateStore

log = logging.getLogger(__name__)

UNKNOWN_TOPIC_ID = 100
# read ahead in large chunks: consumers sharing a partition are then served from the cache
UPSTREAM_PARTITION_BYTES = 8 * 1024 * 1024
# refill a partition's cache in the background when less than this is read ahead of SPEO
READ_AHEAD_LOW_BYTES = 4 * 1024 * 1024
# how long one upstream long poll for idle partitions may wait
TAIL_POLL_MS = 250


class UpstreamOffsets:
    """ListOffsets of one upstream partition, as the core's OffsetLookup."""

    def __init__(self, upstream: Upstream, topic: str, partition: int) -> None:
        self.upstream, self.topic, self.partition = upstream, topic, partition

    async def earliest_offset(self) -> int:
        return await self.upstream.list_offset(self.topic, self.partition, EARLIEST) or 0

    async def latest_offset(self) -> int:
        start = await self.earliest_offset()
        return await self.upstream.log_end_offset(self.topic, self.partition, start)

    async def offset_for_timestamp(self, timestamp_ms: int) -> int | None:
        found = await self.upstream.list_offset(self.topic, self.partition, timestamp_ms)
        if found is None:
            return None
        return found


@dataclass(slots=True)
class Acquisition:
    acquired: list[AcquiredRange]
    records: bytes


class SharePartitionLeader:
    def __init__(
        self,
        key: SharePartitionKey,
        topic: str,
        sp: SharePartition,
        state_epoch: int,
        settings: GroupSettings,
    ) -> None:
        self.key = key
        self.topic = topic
        self.sp = sp
        self.state_epoch = state_epoch
        self.settings = settings
        self.lock = asyncio.Lock()
        self.cache = LogCache(settings.isolation_level)
        self.valid = True  # False once a write was refused: reload before further use
        self.reading_ahead = False
        self._reported = (sp.lock_timeouts, sp.archived_at_limit)
        self._changed: asyncio.Future[None] | None = None

    def report_counters(self) -> None:
        """Move the metrics by what the pure share-partition counted since the last report."""
        timeouts, archived = self.sp.lock_timeouts, self.sp.archived_at_limit
        group = self.key.group_id
        if timeouts != self._reported[0]:
            metrics.LOCK_TIMEOUTS.labels(group).inc(timeouts - self._reported[0])
        if archived != self._reported[1]:
            metrics.ARCHIVED.labels(group, "delivery_limit").inc(archived - self._reported[1])
        self._reported = (timeouts, archived)

    # ------------------------------------------------------------------ waking long polls
    def changed(self) -> asyncio.Future[None]:
        """Resolves when records may have become acquirable (release, timeout, SPSO move)."""
        if self._changed is None or self._changed.done():
            self._changed = asyncio.get_running_loop().create_future()
        return self._changed

    def notify(self) -> None:
        if self._changed is not None and not self._changed.done():
            self._changed.set_result(None)

    # ------------------------------------------------------------------ reading
    def wanted_offset(self) -> int | None:
        """Where upstream must be read for this partition to make progress, if anywhere."""
        if not self.valid or not self.sp.has_acquirable():
            return None
        offset = self.sp.next_fetch_offset()
        if self.cache.covers(offset):
            if self.cache.waiting_on_transaction(offset):
                return self.cache.end_offset  # read on until the transaction's marker
            return None
        return max(offset, self.cache.log_start_offset)

    def read_ahead_offset(self) -> int | None:
        """Where to read on in the background, before a request finds the cache empty."""
        cache = self.cache
        if (
            not self.valid
            or self.reading_ahead
            or not cache.batches
            or cache.end_offset >= cache.high_watermark
            or cache.bytes_from(self.sp.speo) >= READ_AHEAD_LOW_BYTES
        ):
            return None
        return cache.end_offset

    def acquire(
        self, member_id: str, now_ms: int, max_records: int, mode: AcquireMode, max_bytes: int
    ) -> Acquisition:
        """Acquire from what is cached (call with ``lock`` held)."""
        sp = self.sp
        batches = self.cache.from_offset(sp.next_fetch_offset(), max_bytes)
        if not batches:
            return Acquisition([], b"")
        acquired = sp.acquire(member_id, [b.header for b in batches], now_ms, max_records, mode)
        if not acquired:
            return Acquisition([], b"")
        _count_deliveries(self.key.group_id, acquired)
        # whole batches holding any acquired offset, each once, in log order
        parts = [
            b.data
            for b in batches
            if any(
                a.first_offset <= b.info.last_offset and b.info.base_offset <= a.last_offset
                for a in acquired
            )
        ]
        return Acquisition(acquired, b"".join(parts))


class SharePartitions:
    """All share-partition leaders of this proxy, loaded on first use."""

    def __init__(
        self,
        store: ShareStateStore,
        committer: GroupCommitter,
        upstream: Upstream,
        settings_for: Callable[[str], GroupSettings],
        clock_ms: Callable[[], int],
        replaced_check_ms: int = 5_000,
    ) -> None:
        self.store = store
        self.replaced_check_ms = replaced_check_ms
        self.committer = committer
        self.upstream = upstream
        self.settings_for = settings_for
        self.clock_ms = clock_ms
        self.leaders: dict[SharePartitionKey, SharePartitionLeader] = {}
        self._loading: dict[SharePartitionKey, asyncio.Lock] = {}
        self._expiry: asyncio.Task[None] | None = None
        self._tail: asyncio.Task[None] | None = None
        self._replaced: asyncio.Task[None] | None = None
        self._watched: dict[SharePartitionKey, SharePartitionLeader] = {}
        self._watch_wakeup = asyncio.Event()
        self._background: set[asyncio.Task[None]] = set()

    def start(self) -> None:
        self._expiry = asyncio.create_task(self._expire_forever(), name="lock-expiry")
        self._tail = asyncio.create_task(self._tail_forever(), name="tail-poll")
        self._replaced = asyncio.create_task(self._check_replaced_forever(), name="replaced")

    async def stop(self) -> None:
        for task in (self._expiry, self._tail, self._replaced, *self._background):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    # ------------------------------------------------------------------ loading
    async def leader(self, group_id: str, topic_id: UUID, partition: int) -> SharePartitionLeader:
        key = SharePartitionKey(group_id, topic_id, partition)
        current = self.leaders.get(key)
        if current is not None and current.valid:
            return current
        lock = self._loading.setdefault(key, asyncio.Lock())
        async with lock:
            current = self.leaders.get(key)
            if current is not None and current.valid:
                return current
            loaded = await self._load(key)
            self.leaders[key] = loaded
            return loaded

    async def _load(self, key: SharePartitionKey) -> SharePartitionLeader:
        with metrics.PARTITION_LOAD_SECONDS.time():
            return await self._load_unmetered(key)

    async def _load_unmetered(self, key: SharePartitionKey) -> SharePartitionLeader:
        info = self.upstream.topics_by_id.get(key.topic_id)
        if info is None:
            await self.upstream.refresh_metadata()
            info = self.upstream.topics_by_id.get(key.topic_id)
        if info is None or key.partition not in info.leaders:
            raise ShareError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "unknown topic partition")
        settings = self.settings_for(key.group_id)
        offsets = UpstreamOffsets(self.upstream, info.name, key.partition)
        claimed = await self.store.claim(key)
        if claimed is None:
            start = await resolve_start_offset(settings.auto_offset_reset, offsets, self.clock_ms())
            await self.store.initialize(key, start, info.name)
            claimed = await self.store.claim(key)
            assert claimed is not None
        sp = SharePartition.from_persisted(claimed.state, settings.limits)
        leader = SharePartitionLeader(key, info.name, sp, claimed.state_epoch, settings)
        log_start = await offsets.earliest_offset()
        leader.cache.log_start_offset = log_start
        delta = sp.update_log_start_offset(log_start)
        await self._write(leader, delta)
        log.info("loaded %s at SPSO %d (state epoch %d)", key, sp.spso, claimed.state_epoch)
        return leader

    def leaders_of(self, group_id: str) -> list[SharePartitionLeader]:
        return [ld for key, ld in self.leaders.items() if key.group_id == group_id and ld.valid]

    def evict(self, keys: Sequence[SharePartitionKey]) -> None:
        """Forget loaded leaders whose stored state was replaced (reset, delete): the next
        use loads afresh, and any holder of the old object sees it is no longer valid."""
        for key in keys:
            leader = self.leaders.pop(key, None)
            if leader is not None:
                leader.valid = False
                leader.notify()

    async def evict_replaced(self) -> list[SharePartitionKey]:
        """Forget leaders whose stored state another writer replaced (a batch repair: reset,
        advance, delete). Fencing alone would tell only at the leader's next write, and a
        leader with nothing to write, such as one waiting past a truncated log end, would wait
        for ever."""
        held = {key: leader for key, leader in self.leaders.items() if leader.valid}
        if not held:
            return []
        stored = await self.store.state_epochs(list(held))
        replaced = [
            key
            for key, leader in held.items()
            if stored.get(key) != leader.state_epoch and self.leaders.get(key) is leader
        ]
        for key in replaced:
            log.info(
                "state of %s replaced elsewhere (state epoch %d -> %s): reloading it",
                key,
                held[key].state_epoch,
                stored.get(key, "deleted"),
            )
        self.evict(replaced)
        return replaced

    def apply_settings(self, group_id: str, settings: GroupSettings) -> None:
        """A group config changed: the next acquisition, lock and delivery use it."""
        for leader in self.leaders_of(group_id):
            if settings.isolation_level != leader.settings.isolation_level:
                leader.cache = LogCache(settings.isolation_level)  # refilled on next read
            leader.settings = settings
            leader.sp.limits = settings.limits
            leader.notify()  # a higher lock limit may let waiting fetches acquire

    # ------------------------------------------------------------------ upstream reads
    async def read_upstream(
        self, leaders: Sequence[SharePartitionLeader], max_wait_ms: int
    ) -> None:
        """Fill the caches of the leaders that need data, in one upstream fetch per node."""
        wanted = {}
        owners = {}
        for leader in leaders:
            offset = leader.wanted_offset()
            if offset is not None:
                tp = (leader.topic, leader.key.partition)
                if tp not in wanted or offset < wanted[tp]:
                    wanted[tp] = offset
                owners.setdefault(tp, []).append(leader)
        if not wanted:
            return
        isolation = max(leader.settings.isolation_level for leader in leaders)
        data = await self.upstream.fetch(
            wanted,
            max_wait_ms=max_wait_ms,
            isolation_level=isolation,
            partition_max_bytes=UPSTREAM_PARTITION_BYTES,
        )
        for tp, d in data.items():
            for leader in owners.get(tp, []):
                if d.error_code == 1:  # OFFSET_OUT_OF_RANGE: the log start moved
                    await self.update_log_start(leader)
                    continue
                if leader.cache.add(d):
                    leader.notify()  # requests waiting on this partition can acquire now
                if d.log_start_offset > leader.sp.log_start_offset:
                    async with leader.lock:
                        await self._write(
                            leader, leader.sp.update_log_start_offset(d.log_start_offset)
                        )

    async def acquire_for(
        self,
        leaders: Sequence[SharePartitionLeader],
        member_id: str,
        *,
        max_wait_ms: int,
        max_records: int,
        max_bytes: int,
        mode: AcquireMode,
    ) -> dict[tuple[UUID, int], Acquisition]:
        """Acquire for ``member_id`` from these share-partitions, waiting up to ``max_wait_ms``
        while there is nothing to give (the long poll of ShareFetch and of HTTP fetch)."""
        deadline = self.clock_ms() + max_wait_ms
        got: dict[tuple[UUID, int], Acquisition] = {}
        if not leaders:
            await asyncio.sleep(max_wait_ms / 1000)
            return got
        while True:
            # interest first, then look: a change between the two cannot be missed
            changed = [leader.changed() for leader in leaders]
            # an unreachable upstream leaves the caches as they are: answered empty, retried
            with contextlib.suppress(UpstreamError):
                await self.read_upstream(leaders, max_wait_ms=1)
            budget, room = max_records, max_bytes
            for leader in leaders:
                if budget <= 0 or room <= 0:
                    break
                async with leader.lock:
                    if not leader.valid:
                        continue
                    a = leader.acquire(member_id, self.clock_ms(), budget, mode, room)
                if a.acquired:
                    self.read_ahead(leader)
                    got[(leader.key.topic_id, leader.key.partition)] = a
                    budget -= sum(r.last_offset - r.first_offset + 1 for r in a.acquired)
                    room -= len(a.records)
            remaining = deadline - self.clock_ms()
            if got or remaining <= 0:
                return got
            # Wait for a release, timeout or acknowledgement on these partitions, or for new
            # upstream data (the shared tail poller fetches it); never spin.
            self.watch(leaders)
            await asyncio.wait(
                changed, timeout=remaining / 1000, return_when=asyncio.FIRST_COMPLETED
            )

    def read_ahead(self, leader: SharePartitionLeader) -> None:
        """Start a background upstream read for ``leader`` if its cache is running low."""
        offset = leader.read_ahead_offset()
        if offset is None:
            return
        leader.reading_ahead = True
        task = asyncio.create_task(self._read_ahead(leader, offset))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _read_ahead(self, leader: SharePartitionLeader, offset: int) -> None:
        tp = (leader.topic, leader.key.partition)
        try:
            data = await self.upstream.fetch(
                {tp: offset},
                max_wait_ms=1,
                isolation_level=leader.settings.isolation_level,
                partition_max_bytes=UPSTREAM_PARTITION_BYTES,
            )
            d = data.get(tp)
            if d is not None and d.error_code == 0 and leader.cache.add(d):
                leader.notify()
        except UpstreamError as exc:
            log.warning("read-ahead of %s-%d failed: %s", *tp, exc)
        finally:
            leader.reading_ahead = False

    def watch(self, leaders: Sequence[SharePartitionLeader]) -> None:
        """Ask the tail poller to long-poll upstream for these partitions' next records; a
        leader is notified (``changed``) when data arrives or the poll ends."""
        added = False
        for leader in leaders:
            if leader.wanted_offset() is not None and leader.key not in self._watched:
                self._watched[leader.key] = leader
                added = True
        if added:
            self._watch_wakeup.set()

    async def _tail_forever(self) -> None:
        """One long poll at a time for every partition some request is waiting on, on its own
        upstream connection, so waiting never delays the reads of busy partitions."""
        while True:
            await self._watch_wakeup.wait()
            self._watch_wakeup.clear()
            watched = list(self._watched.values())
            self._watched.clear()
            if not watched:
                continue
            started = self.clock_ms()
            try:
                await self.read_upstream(watched, max_wait_ms=TAIL_POLL_MS)
                log.debug(
                    "tail poll of %s took %d ms",
                    [(w.topic, w.key.partition, w.wanted_offset()) for w in watched],
                    self.clock_ms() - started,
                )
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("upstream tail poll failed: %s", exc)
                await asyncio.sleep(TAIL_POLL_MS / 1000)
            for leader in watched:
                leader.notify()

    async def update_log_start(self, leader: SharePartitionLeader) -> None:
        start = await self.upstream.list_offset(leader.topic, leader.key.partition, EARLIEST)
        if start is not None:
            async with leader.lock:
                leader.cache.log_start_offset = start
                await self._write(leader, leader.sp.update_log_start_offset(start))

    # ------------------------------------------------------------------ state changes
    async def acknowledge(
        self, leader: SharePartitionLeader, member_id: str, batches: Sequence[AckBatch]
    ) -> ErrorCode:
        async with leader.lock:
            if not leader.valid:
                return ErrorCode.FENCED_STATE_EPOCH
            if not leader.settings.renew_acknowledge and any(
                AcknowledgeType.RENEW in b.acknowledge_types for b in batches
            ):
                return ErrorCode.INVALID_REQUEST  # share.renew.acknowledge.enable is false
            try:
                delta = leader.sp.acknowledge(member_id, batches, self.clock_ms())
            except ShareError as e:
                return e.code
            code = await self._write(leader, delta)
        if code == ErrorCode.NONE:
            _count_acknowledgements(leader.key.group_id, batches)
        return code

    async def release_member(self, member_id: str, group_id: str) -> None:
        for leader in list(self.leaders.values()):
            if leader.key.group_id != group_id or not leader.valid:
                continue
            async with leader.lock:
                await self._write(leader, leader.sp.release_member(member_id))

    async def expire_due(self) -> None:
        now = self.clock_ms()
        for leader in list(self.leaders.values()):
            deadline = leader.sp.next_lock_deadline()
            if deadline is not None and deadline <= now and leader.valid:
                async with leader.lock:
                    await self._write(leader, leader.sp.expire_locks(self.clock_ms()))

    async def _write(self, leader: SharePartitionLeader, delta: StateDelta) -> ErrorCode:
        if delta.is_empty:
            return ErrorCode.NONE
        leader.report_counters()
        archived: tuple[tuple[int, int, int], ...] = ()
        if leader.sp.archived_log:  # rare: a rejection or the delivery limit
            archived = tuple(leader.sp.archived_log)
            leader.sp.archived_log.clear()
        code = await self.committer.commit(
            PartitionWrite(leader.key, leader.state_epoch, delta, archived)
        )
        if code != ErrorCode.NONE:
            log.warning("write for %s refused (%s): reloading it", leader.key, code.name)
            leader.valid = False
            self.leaders.pop(leader.key, None)
        else:
            leader.cache.trim(leader.sp.spso)
        leader.notify()
        return code

    async def _check_replaced_forever(self) -> None:
        while True:
            await asyncio.sleep(self.replaced_check_ms / 1000)
            try:
                await self.evict_replaced()
            except Exception as exc:  # the store unreachable: writes fence meanwhile
                log.warning("checking for replaced state failed: %s", exc)

    async def _expire_forever(self) -> None:
        while True:
            await asyncio.sleep(0.05)
            try:
                await self.expire_due()
            except Exception:
                log.exception("lock expiry failed")


_ACK_NAMES = {t: t.name.lower() for t in AcknowledgeType}


def _count_deliveries(group_id: str, acquired: Sequence[AcquiredRange]) -> None:
    first = redelivered = 0
    for a in acquired:
        n = a.last_offset - a.first_offset + 1
        if a.delivery_count == 1:
            first += n
        else:
            redelivered += n
    if first:
        metrics.DELIVERIES.labels(group_id, "first").inc(first)
    if redelivered:
        metrics.DELIVERIES.labels(group_id, "redelivery").inc(redelivered)


def _count_acknowledgements(group_id: str, batches: Sequence[AckBatch]) -> None:
    """Records acknowledged, per type (one type for a whole batch, or one per offset): summed
    first, so the metric is touched once per type, not once per offset."""
    counts: dict[int, int] = {}
    for b in batches:
        types = b.acknowledge_types
        if len(types) == 1:
            counts[types[0]] = counts.get(types[0], 0) + b.last_offset - b.first_offset + 1
        else:
            for t in types:
                counts[t] = counts.get(t, 0) + 1
    for t, n in counts.items():
        metrics.ACKNOWLEDGEMENTS.labels(group_id, _ACK_NAMES[AcknowledgeType(t)]).inc(n)
        if t == AcknowledgeType.REJECT:
            metrics.ARCHIVED.labels(group_id, "rejected").inc(n)
