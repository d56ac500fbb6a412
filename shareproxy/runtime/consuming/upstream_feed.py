"""Records fed from the upstream cluster into the share-partition leaders' log caches: what a
request needs now, a read-ahead in the background before a cache runs dry, and one long poll
(the tail) for every partition some request is waiting on."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Sequence

from shareproxy.core.errors import ErrorCode
from shareproxy.core.store import SharePartitionKey
from shareproxy.runtime.consuming.cache_budget import OVER_BOUND_READS, CacheBudget, worth_keeping
from shareproxy.runtime.consuming.leader import SharePartitionLeader
from shareproxy.runtime.jobs import Periodic
from shareproxy.upstream.client import (
    EARLIEST,
    FETCH_MAX_BYTES,
    Upstream,
    UpstreamError,
)

log = logging.getLogger(__name__)

# read ahead in large chunks: consumers sharing a partition are then served from the cache
UPSTREAM_PARTITION_BYTES = 8 * 1024 * 1024
# refill a partition's cache in the background when less than this is read ahead of SPEO
READ_AHEAD_LOW_BYTES = 4 * 1024 * 1024
# how long one upstream long poll for idle partitions may wait
TAIL_POLL_MS = 250
# a request waits on its own upstream read this much past its MaxWait at most: a cluster that
# hangs (accepts requests, never answers) would hold it for the upstream's request timeout
READ_WAIT_PAST_MAX_WAIT_MS = 2000

FetchRoom = tuple[int, int]  # the records and bytes a fetch may still take


def reads_its_topic(upstream: Upstream, leader: SharePartitionLeader) -> bool:
    """Upstream is read by topic name: a leader whose topic was deleted, or recreated under
    the same name (a new topic id), must not read what the name holds now."""
    info = upstream.topics.get(leader.topic)
    return info is not None and info.topic_id == leader.key.topic_id


def wanted_offset(
    leader: SharePartitionLeader, beyond_cache: bool = False, room: FetchRoom | None = None
) -> int | None:
    """Where upstream must be read for this share-partition to make progress, if anywhere
    (``beyond_cache``: past what is cached too, for a fetch waiting on MinBytes; ``room``:
    what a fetch may still take, read on when the cache holds less)."""
    if not leader.valid or not leader.has_acquirable():
        return None
    offset = leader.next_fetch_offset()
    cache = leader.cache
    if cache.covers(offset):
        if beyond_cache or cache.waiting_on_transaction(offset):
            return cache.end_offset  # read on (to a transaction's marker, or MinBytes)
        if cache.keyed and leader.speo >= cache.end_offset:
            # key order: the first Available record may wait on its key while records of
            # other keys are still upstream
            return cache.end_offset
        if room is not None and _cache_short(leader, offset, room):
            return cache.end_offset
        return None
    return max(offset, cache.log_start_offset)


def _cache_short(leader: SharePartitionLeader, offset: int, room: FetchRoom) -> bool:
    """Whether a fetch could take more than the cache holds from ``offset``, so the log past
    it is read too, as Kafka's broker reads its log up to MaxRecords and MaxBytes in one go
    (DelayedShareFetch) rather than only what a cache happens to hold. Not while a read-ahead
    is under way: it brings those records, and a second read would fetch them again."""
    cache = leader.cache
    max_records, max_bytes = room
    return (
        not leader.reading_ahead
        and cache.end_offset - offset < max_records
        and cache.bytes_from(offset) < max_bytes
    )


def _read_ahead_offset(leader: SharePartitionLeader, budget: CacheBudget) -> int | None:
    """Where to read on in the background, before a request finds the cache empty (not while
    the caches hold their bound)."""
    cache = leader.cache
    if (
        not budget.may_read_ahead()
        or not leader.valid
        or leader.reading_ahead
        or not cache.batches
        or cache.end_offset >= cache.high_watermark
        or cache.bytes_from(leader.speo) >= READ_AHEAD_LOW_BYTES
    ):
        return None
    return cache.end_offset


class UpstreamFeed:
    """Fills the leaders' log caches from upstream and wakes the requests waiting on them."""

    def __init__(
        self,
        upstream: Upstream,
        clock_ms: Callable[[], int],
        budget: CacheBudget,
    ) -> None:
        self.upstream = upstream
        self.clock_ms = clock_ms
        self.budget = budget
        self._watched: dict[SharePartitionKey, SharePartitionLeader] = {}
        self._watch_wakeup = asyncio.Event()
        self._polled: list[SharePartitionLeader] = []  # the last tail poll's, to wake
        self._polled_from: dict[SharePartitionKey, int] = {}  # where the poll under way asks
        self._background: set[asyncio.Task[None]] = set()
        self._over_bound = asyncio.Semaphore(OVER_BOUND_READS)
        # a failed poll pauses before the waiting fetches are woken and ask again
        self.tail = Periodic(
            "tail-poll",
            self._next_watch,
            self._tail_poll,
            "upstream tail poll",
            at_once=False,
            reads_store=False,
            after_failure_s=TAIL_POLL_MS / 1000,
        )

    def start(self) -> None:
        self.tail.start()

    async def stop(self) -> None:
        await self.tail.stop()
        for task in list(self._background):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def read(
        self,
        leaders: Sequence[SharePartitionLeader],
        max_wait_ms: int,
        beyond_cache: bool = False,
        room: FetchRoom | None = None,
        give_up_at_ms: int | None = None,
    ) -> None:
        """Fill the caches of the leaders that need data, in one upstream fetch per node: always
        (a request waits on it), but asking less per partition as the caches near their bound.
        ``room``: the records and bytes the fetch may take, read for where the cache is short;
        ``give_up_at_ms``: when (``clock_ms``) a request stops waiting on it (UpstreamError
        then, the fetch dropped); read only when a fetch goes upstream."""
        wanted: dict[tuple[str, int], int] = {}
        owners: dict[tuple[str, int], list[SharePartitionLeader]] = {}
        asks_now = max_wait_ms <= 1 and not beyond_cache  # a request's read, not a long poll
        for leader in leaders:
            offset = wanted_offset(leader, beyond_cache, room)
            if offset is not None and asks_now and self._left_to_the_tail(leader, offset):
                continue
            if offset is not None and reads_its_topic(self.upstream, leader):
                tp = (leader.topic, leader.key.partition)
                if tp not in wanted or offset < wanted[tp]:
                    wanted[tp] = offset
                owners.setdefault(tp, []).append(leader)
        if not wanted:
            return
        isolation = max(leader.settings.isolation_level for leader in leaders)
        # A long poll is not reserved (waiting on idle partitions must not hold read-ahead of
        # busy ones back), but its answer brings no more than the room left, as all its
        # partitions may get records at once. A request's own read takes turns instead: past
        # the bound, a MaxBytes of the room would cut it to one partition's batch.
        max_bytes = FETCH_MAX_BYTES if asks_now else self.budget.response_bytes(FETCH_MAX_BYTES)
        turn = self._over_bound if asks_now and self.budget.is_over() else contextlib.nullcontext()
        within_ms = None if give_up_at_ms is None else max(0, give_up_at_ms - self.clock_ms())
        bound = contextlib.nullcontext() if within_ms is None else asyncio.timeout(within_ms / 1000)
        try:
            async with bound, turn:
                data = await self.upstream.fetch(
                    wanted,
                    max_wait_ms=max_wait_ms,
                    isolation_level=isolation,
                    max_bytes=max_bytes,
                    partition_max_bytes=self.budget.read_size(
                        UPSTREAM_PARTITION_BYTES, len(wanted)
                    ),
                )
        except TimeoutError:
            if not isinstance(bound, asyncio.Timeout) or not bound.expired():
                raise
            raise UpstreamError(
                f"the Kafka cluster did not answer a Fetch in {within_ms} ms"
            ) from None
        at_end: list[SharePartitionLeader] = []
        for tp, d in data.items():
            d.records = worth_keeping(d.records)  # not one partition pinning the whole frame
            if asks_now and not d.records and d.error_code == ErrorCode.NONE:
                at_end += owners.get(tp, [])
            for leader in owners.get(tp, []):
                if d.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:  # the log start moved
                    await self._log_start_lost(leader)
                    continue
                leader.took_in(d, wanted[tp])  # wakes the requests waiting on it
                if d.log_start_offset > leader.log_start_offset:
                    await leader.log_start_moved(d.log_start_offset)
        if at_end:  # read to their end: the tail poll waits on them from now
            self.watch(at_end)

    def _left_to_the_tail(self, leader: SharePartitionLeader, offset: int) -> bool:
        """Whether a request's read leaves this partition out: upstream said it ends here, and
        the tail poll under way asks from here too, so it brings new records as soon as
        upstream has them and wakes the fetches waiting on them. (A consumer that has read a
        partition to its end while others still have records asked upstream for it on every
        fetch: a round trip each, for nothing.)"""
        cache = leader.cache
        return (
            cache.answered
            and cache.high_watermark <= offset
            and self._polled_from.get(leader.key, -1) >= offset
        )

    async def _log_start_lost(self, leader: SharePartitionLeader) -> None:
        """The offset read is below the log start now: ask where the log starts."""
        start = await self.upstream.list_offset(leader.topic, leader.key.partition, EARLIEST)
        if start is not None:
            await leader.log_start_moved(start, reset_cache=True)

    # ------------------------------------------------------------------ read-ahead
    def read_ahead(self, leader: SharePartitionLeader) -> None:
        """Start a background upstream read for ``leader`` if its cache is running low."""
        offset = _read_ahead_offset(leader, self.budget)
        if offset is None or not reads_its_topic(self.upstream, leader):
            return
        # reserved now, not when the task runs: the read-aheads started in one turn must see
        # each other's room, or all of them find the bound free
        size = self.budget.read_size(UPSTREAM_PARTITION_BYTES)
        self.budget.reserved += size
        leader.read_ahead_started()
        ended = False

        def end() -> None:  # when its answer is in, or it was cancelled before it ran
            nonlocal ended
            if not ended:
                ended = True
                self.budget.reserved -= size
                leader.read_ahead_ended()

        task = asyncio.create_task(self._read_ahead(leader, offset, size, end))
        self._background.add(task)

        def done(task: asyncio.Task[None]) -> None:
            self._background.discard(task)
            end()

        task.add_done_callback(done)

    async def _read_ahead(
        self, leader: SharePartitionLeader, offset: int, size: int, end: Callable[[], None]
    ) -> None:
        tp = (leader.topic, leader.key.partition)
        try:
            data = await self.upstream.fetch(
                {tp: offset},
                max_wait_ms=1,
                isolation_level=leader.settings.isolation_level,
                partition_max_bytes=size,
            )
            d = data.get(tp)
            if d is not None and d.error_code == ErrorCode.NONE:
                leader.took_in(d, offset)
        except UpstreamError as exc:
            log.warning("read-ahead of %s-%d failed: %s", *tp, exc)
        finally:
            end()  # before the fetches it woke run, as they may read ahead again

    # ------------------------------------------------------------------ the tail
    def watch(self, leaders: Sequence[SharePartitionLeader]) -> None:
        """Ask the tail poller to long-poll upstream for these partitions' next records; a
        leader is notified (``changed``) when data arrives or the poll ends."""
        added = False
        for leader in leaders:
            if (
                wanted_offset(leader) is not None
                and leader.key not in self._watched
                and reads_its_topic(self.upstream, leader)  # else nothing to wait for
            ):
                self._watched[leader.key] = leader
                added = True
        if added:
            self._watch_wakeup.set()

    async def _next_watch(self) -> None:
        """Wake the fetches the last poll was for (after the pause, if it failed), then wait
        until some request watches a partition."""
        polled, self._polled = self._polled, []
        for leader in polled:
            leader.notify()
        await self._watch_wakeup.wait()
        self._watch_wakeup.clear()

    async def _tail_poll(self) -> None:
        """One long poll at a time for every partition some request is waiting on, on its own
        upstream connection, so waiting never delays the reads of busy partitions."""
        watched = list(self._watched.values())
        self._watched.clear()
        if not watched:
            return
        self._polled = watched
        polled_from = {w.key: offset for w in watched if (offset := wanted_offset(w)) is not None}
        self._polled_from = polled_from
        started = self.clock_ms()
        try:
            await self.read(watched, max_wait_ms=TAIL_POLL_MS)
        finally:
            self._polled_from = {}  # requests read these themselves again
        if log.isEnabledFor(logging.DEBUG):
            log.debug(
                "tail poll from %s took %d ms",
                [(w.topic, w.key.partition, polled_from.get(w.key)) for w in watched],
                self.clock_ms() - started,
            )
