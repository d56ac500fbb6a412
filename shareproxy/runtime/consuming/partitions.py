"""Every share-partition leader of this proxy: loaded from the store on first use (claiming the
state, which bumps its state epoch and so fences any older writer), forgotten when its stored
state is replaced, and swept for acquisition locks past their deadline."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import NoReturn
from uuid import UUID

from shareproxy.core.errors import ErrorCode, ShareError
from shareproxy.core.group_settings import GroupSettings
from shareproxy.core.offset_reset import resolve_start_offset
from shareproxy.core.share_partition import SharePartition
from shareproxy.core.store import (
    PARTITION_STATE_UNAVAILABLE,
    SharePartitionKey,
    ShareStateStore,
    StoreUnavailable,
)
from shareproxy.runtime.consuming.cache_budget import CacheBudget
from shareproxy.runtime.consuming.group_commit import GroupCommitter
from shareproxy.runtime.consuming.leader import SharePartitionLeader
from shareproxy.runtime.consuming.log_ends import LogEnds
from shareproxy.runtime.consuming.topic_retention import TopicRetention
from shareproxy.runtime.jobs import Periodic, every
from shareproxy.telemetry import metrics
from shareproxy.telemetry.logs import STORE_OUTAGE, first_line
from shareproxy.upstream.client import Upstream, UpstreamError
from shareproxy.upstream.lookups import UpstreamOffsets, topic_holding

log = logging.getLogger(__name__)

# how often acquisition lock deadlines are checked
LOCK_EXPIRY_CHECK_MS = 50
# how often a load creates a share-partition's state that a deletion keeps removing
CLAIM_TRIES = 3
# how long a request waits on a share-partition's load; past it the request is answered
# retriable while the load goes on (a cluster that hangs holds a ListOffsets for the upstream's
# request timeout, longer than clients wait)
LOAD_WAIT_S = 3.0


class LoadUnderWay(UpstreamError):
    """A share-partition's load took longer than ``LOAD_WAIT_S``; it goes on (retriable)."""


class SharePartitions:
    """All share-partition leaders of this proxy, loaded on first use."""

    def __init__(
        self,
        store: ShareStateStore,
        committer: GroupCommitter,
        upstream: Upstream,
        settings_for: Callable[[str], GroupSettings],
        clock_ms: Callable[[], int],
        *,
        leads: Callable[[UUID, int], bool],
        refresh_settings: Callable[[], Awaitable[None]],
        members_assigned: Callable[[SharePartitionKey], int],
        cache_budget: CacheBudget,
        replaced_check_ms: int = 5_000,
    ) -> None:
        self.store = store
        # the node-wide bound on what the leaders' log caches hold
        self.cache_budget = cache_budget
        # read the group configs again before a load: a change through another node counts
        self.refresh_settings = refresh_settings
        self.leads = leads  # whether this node leads a partition (placement)
        # members the coordinator gives a share-partition (fair work)
        self.members_assigned = members_assigned
        self.replaced_check_ms = replaced_check_ms
        self.committer = committer
        self.upstream = upstream
        self.retention = TopicRetention(upstream)  # what scheduled delivery checks times against
        self.settings_for = settings_for
        self.clock_ms = clock_ms
        self._leaders: dict[SharePartitionKey, SharePartitionLeader] = {}
        self._loads: dict[SharePartitionKey, asyncio.Task[SharePartitionLeader]] = {}
        self._swept_ms = clock_ms()  # when expire_due last looked
        # idle share-partitions' log ends, so their lag grows while no consumer reads
        self.log_ends = LogEnds(upstream, self.led)
        self._jobs = (
            Periodic(
                "lock-expiry",
                LOCK_EXPIRY_CHECK_MS / 1000,
                self.expire_due,
                "ending expired acquisition locks",
                at_once=False,
                reads_store=False,  # its writes go through the group committer
            ),
            # a store out of reach meanwhile: writes fence
            Periodic(
                "replaced",
                every(lambda: self.replaced_check_ms / 1000),
                self.evict_replaced,
                "checking for replaced state",
                at_once=False,
            ),
            self.log_ends.job,
        )

    def start(self) -> None:
        for job in self._jobs:
            job.start()

    async def stop(self) -> None:
        for job in self._jobs:
            await job.stop()
        loads = list(self._loads.values())
        for task in loads:
            task.cancel()
        await asyncio.gather(*loads, return_exceptions=True)

    # ------------------------------------------------------------------ loading
    async def leader(self, group_id: str, topic_id: UUID, partition: int) -> SharePartitionLeader:
        """The loaded leader of this share-partition; raises a ShareError for a topic id
        (UNKNOWN_TOPIC_ID) or partition (UNKNOWN_TOPIC_OR_PARTITION) upstream does not have,
        UpstreamError if upstream cannot answer, or the load takes over ``LOAD_WAIT_S`` (it goes
        on for the next request); NOT_LEADER_OR_FOLLOWER for a partition another node leads:
        loading it here would claim its state and fence that node."""
        self._require_led(topic_id, partition)
        key = SharePartitionKey(group_id, topic_id, partition)
        current = self._leaders.get(key)
        if current is not None and current.valid:
            if topic_id not in self.upstream.topics_by_id:
                await self._confirm_gone(current)
            return current
        task = self._loads.get(key)
        if task is None or task.done():  # done: its callback has yet to forget it
            task = asyncio.get_running_loop().create_task(self._load_led(key))
            self._loads[key] = task
            task.add_done_callback(functools.partial(self._loaded, key))
        try:
            return await asyncio.wait_for(asyncio.shield(task), LOAD_WAIT_S)
        except TimeoutError:
            raise LoadUnderWay(
                f"share-partition {partition} of topic {topic_id} of group {group_id!r} is still "
                f"loading after {LOAD_WAIT_S:g} s (the Kafka cluster or the state store is slow "
                "to answer): retry"
            ) from None

    async def _load_led(self, key: SharePartitionKey) -> SharePartitionLeader:
        """One load of a share-partition, shared by every request asking for it meanwhile."""
        self._require_led(key.topic_id, key.partition)  # the live nodes may have changed
        current = self._leaders.get(key)
        if current is not None and current.valid:
            return current
        try:
            loaded = await self._load(key)
        except StoreUnavailable as exc:  # not led until its state is loaded
            STORE_OUTAGE.failed(f"loading {key}", first_line(exc))
            raise ShareError(
                PARTITION_STATE_UNAVAILABLE,
                "the share-group state store cannot be reached: retry",
            ) from exc
        if not self.leads(key.topic_id, key.partition):  # moved while it loaded: not ours
            loaded.invalidate()
            self._require_led(key.topic_id, key.partition)
        self._leaders[key] = loaded
        return loaded

    def _loaded(self, key: SharePartitionKey, task: asyncio.Task[SharePartitionLeader]) -> None:
        """A load ended: the next request for the share-partition loads it again if it
        failed. Its error was answered to whoever still waited, or to nobody: read here."""
        if self._loads.get(key) is task:
            del self._loads[key]
        if not task.cancelled():
            task.exception()

    def ready(self, group_id: str, topic_id: UUID, partition: int) -> SharePartitionLeader | None:
        """What ``leader`` answers without awaiting anything, the common case of every fetch: a
        loaded, valid leader of a partition led here whose topic is known; None: ask it."""
        if not self.leads(topic_id, partition) or topic_id not in self.upstream.topics_by_id:
            return None
        current = self._leaders.get(SharePartitionKey(group_id, topic_id, partition))
        return current if current is not None and current.valid else None

    def _require_led(self, topic_id: UUID, partition: int) -> None:
        if not self.leads(topic_id, partition):
            raise ShareError(
                ErrorCode.NOT_LEADER_OR_FOLLOWER,
                f"partition {partition} of topic {topic_id} is led by another proxy node",
            )

    async def _load(self, key: SharePartitionKey) -> SharePartitionLeader:
        with metrics.PARTITION_LOAD_SECONDS.time():
            return await self._load_unmetered(key)

    async def _load_unmetered(self, key: SharePartitionKey) -> SharePartitionLeader:
        info = await topic_holding(self.upstream, key.topic_id, key.partition)
        if self.refresh_settings is not None:
            await self.refresh_settings()
        settings = self.settings_for(key.group_id)
        offsets = UpstreamOffsets(self.upstream, info.name, key.partition)
        claimed = await self.store.claim(key)
        for _ in range(CLAIM_TRIES):
            if claimed is not None:
                break
            start = await resolve_start_offset(settings.auto_offset_reset, offsets, self.clock_ms())
            # None: an admin deleted the group or its offsets meanwhile: start over
            claimed = await self.store.claim_new(key, start, info.name)
        if claimed is None:
            raise ShareError(
                ErrorCode.NOT_LEADER_OR_FOLLOWER,
                f"the state of {key} was deleted each time it was created: retry",
            )
        sp = SharePartition.from_persisted(claimed.state, settings.limits)
        if settings.limits.schedule.active:  # known before the first record is read in
            await self.retention.read(info.name)
        leader = SharePartitionLeader(
            key,
            info.name,
            sp,
            claimed.state_epoch,
            settings,
            self.committer,
            self.clock_ms,
            self._refused,
            still_led=lambda: self.leads(key.topic_id, key.partition),
            members_assigned=lambda: self.members_assigned(key),
            cache_budget=self.cache_budget,
            retention_ms=lambda: self.retention.of(info.name),
        )
        await leader.log_start_moved(await offsets.earliest_offset(), reset_cache=True)
        log.info(
            "share-partition loaded",
            extra={**leader.log_fields(), "spso": sp.spso, "state_epoch": claimed.state_epoch},
        )
        return leader

    async def _confirm_gone(self, leader: SharePartitionLeader) -> None:
        """The topic id left the metadata: asked again (one answer may have missed the topic),
        it is gone only if it is still missing; an upstream that cannot say keeps it."""
        try:
            await self.upstream.refresh_metadata([leader.topic])
        except UpstreamError:
            return
        if leader.key.topic_id not in self.upstream.topics_by_id:
            self._gone(leader)

    def _gone(self, leader: SharePartitionLeader) -> NoReturn:
        """The leader's topic is no longer upstream (deleted; a topic recreated under its name
        has another id): it stops serving, and nothing it held is delivered again."""
        self.evict([leader.key])
        log.info(
            "topic deleted upstream: its share-partition is dropped", extra=leader.log_fields()
        )
        raise ShareError(
            ErrorCode.UNKNOWN_TOPIC_ID,
            f"topic {leader.topic!r} ({leader.key.topic_id}) was deleted",
        )

    async def drop_deleted(self) -> None:
        """Drop the share-partitions whose topic left the metadata (confirmed, as on use), so a
        deleted topic's go away at once, not at their next use."""
        for leader in self.loaded():
            if leader.valid and leader.key.topic_id not in self.upstream.topics_by_id:
                with contextlib.suppress(ShareError):
                    await self._confirm_gone(leader)

    def _refused(self, leader: SharePartitionLeader) -> None:
        """A write of ``leader`` was refused: the next use of its key loads it afresh (unless
        that has happened already: a successor loaded meanwhile stays)."""
        if self._leaders.get(leader.key) is leader:
            del self._leaders[leader.key]

    # ------------------------------------------------------------------ queries
    def loaded(self) -> list[SharePartitionLeader]:
        """Every leader this node holds now (a copy: loads and evictions go on meanwhile)."""
        return list(self._leaders.values())

    def led(self) -> list[SharePartitionLeader]:
        """The share-partitions this node leads now: loaded, not retired, and still placed
        here. The one answer to "what does this node lead" (/readyz, GET /v1/nodes, gauges)."""
        return [
            leader
            for key, leader in self._leaders.items()
            if leader.valid and self.leads(key.topic_id, key.partition)
        ]

    def topics_loaded(self) -> set[str]:
        """The names of the topics whose share-partitions this node holds now."""
        return {leader.topic for leader in self._leaders.values() if leader.valid}

    def loaded_leader(self, key: SharePartitionKey) -> SharePartitionLeader | None:
        """The leader of ``key`` if this node holds it now; loads nothing."""
        return self._leaders.get(key)

    # ------------------------------------------------------------------ forgetting
    def leaders_of(self, group_id: str) -> list[SharePartitionLeader]:
        return [ld for key, ld in self._leaders.items() if key.group_id == group_id and ld.valid]

    def evict(self, keys: Sequence[SharePartitionKey]) -> None:
        """Forget loaded leaders whose stored state was replaced (reset, delete): the next
        use loads afresh, and any holder of the old object sees it is no longer valid."""
        for key in keys:
            leader = self._leaders.pop(key, None)
            if leader is not None:
                leader.invalidate()

    async def evict_replaced(self) -> list[SharePartitionKey]:
        """Forget leaders whose stored state another writer replaced (a batch repair: reset,
        advance, delete). Fencing alone would tell only at the leader's next write, and a
        leader with nothing to write, such as one waiting past a truncated log end, would wait
        for ever."""
        held = {key: leader for key, leader in self._leaders.items() if leader.valid}
        if not held:
            return []
        stored = await self.store.state_epochs(list(held))
        replaced = [
            key
            for key, leader in held.items()
            if stored.get(key) != leader.state_epoch and self._leaders.get(key) is leader
        ]
        for key in replaced:
            log.info(
                "share-partition state replaced elsewhere: reloading it",
                extra={
                    **held[key].log_fields(),
                    "state_epoch": held[key].state_epoch,
                    "stored_state_epoch": stored.get(key, "deleted"),
                },
            )
        self.evict(replaced)
        return replaced

    def let_go(self, everything: bool = False) -> list[SharePartitionKey]:
        """The live nodes changed: forget the leaders of partitions another node leads now
        (or all of them: this node's lease had lapsed). Their records' locks end with them;
        the new leader claims the state (epoch +1) and gives what was acquired here again,
        with the delivery counts stored."""
        gone = [
            key
            for key in self._leaders
            if everything or not self.leads(key.topic_id, key.partition)
        ]
        if gone:
            log.info("%d share-partitions now led by other nodes: let go", len(gone))
        self.evict(gone)
        return gone

    def apply_settings(self, group_id: str, settings: GroupSettings) -> None:
        """A group config changed: the group's live share-partitions use it from now on."""
        for leader in self.leaders_of(group_id):
            leader.apply_settings(settings)

    # ------------------------------------------------------------------ lock endings
    async def release_member(self, member_id: str, group_id: str) -> None:
        """Every acquisition lock the member holds in the group ends (it left, or its share
        session closed)."""
        for leader in list(self._leaders.values()):
            if leader.key.group_id != group_id or not leader.valid:
                continue
            if leader.involves(member_id):  # most share-partitions never saw the member
                await leader.release_member(member_id)

    async def expire_due(self) -> None:
        """End the locks past their deadline, and wake the fetches waiting on share-partitions
        whose redelivery back-off ended since the last sweep."""
        now = self.clock_ms()
        since, self._swept_ms = self._swept_ms, now
        for leader in list(self._leaders.values()):
            if leader.locks_due(now) and leader.valid:
                await leader.expire_locks()
            if leader.backoff_ended(since, now):
                leader.notify()
