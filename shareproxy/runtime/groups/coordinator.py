"""The share-group coordinator at run time: ShareGroup state machines fed with heartbeats,
upstream topic metadata and the clock. Membership is the coordinator's alone: a member that
times out leaves the group, and its share sessions and locks stay (the share-partitions' own
business, as on a Kafka broker)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from datetime import UTC, datetime
from uuid import UUID

from shareproxy.core.group_settings import GroupSettings
from shareproxy.core.names import topic_name_problem
from shareproxy.core.share_group import (
    JOIN_EPOCH,
    HeartbeatError,
    HeartbeatResult,
    ShareGroup,
    heartbeat_problem,
)
from shareproxy.core.share_session import SessionKey, ShareSession, ShareSessionCache, Standing
from shareproxy.core.store import ShareStateStore, StoreUnavailable
from shareproxy.runtime.consuming.partitions import SharePartitions
from shareproxy.runtime.groups.group_creation import GroupCreation, not_coordinator, not_held
from shareproxy.runtime.jobs import Periodic, every
from shareproxy.telemetry.logs import STORE_OUTAGE, first_line
from shareproxy.upstream.client import Upstream, UpstreamError

log = logging.getLogger(__name__)

# how often members are checked for a timeout and share sessions for idleness, and how soon
# after the first group exists the topics it subscribes to are looked up
MAINTAIN_EVERY_S = 0.5
# how often the topics in use are read from the cluster: a Kafka broker learns of a deleted
# topic from the metadata log at once, so the proxy's stand-in must not take long either
TOPICS_REFRESH_MS = 1_000


class Coordinator:
    def __init__(
        self,
        store: ShareStateStore,
        upstream: Upstream,
        partitions: SharePartitions,
        sessions: ShareSessionCache,
        settings_for: Callable[[str], GroupSettings],
        clock_ms: Callable[[], int],
        *,
        forget_group: Callable[[str], None],
        coordinates: Callable[[str], bool],
        max_groups: int | None = None,
        metadata_refresh_ms: int = 5_000,
        topics_refresh_ms: int = TOPICS_REFRESH_MS,
    ) -> None:
        self.coordinates = coordinates  # whether this node coordinates a group
        self.store = store
        self.upstream = upstream
        self.partitions = partitions
        self.sessions = sessions
        self.settings_for = settings_for
        self.clock_ms = clock_ms
        self.metadata_refresh_ms = metadata_refresh_ms
        self.topics_refresh_ms = topics_refresh_ms
        self.forget_group = forget_group
        self.max_groups = max_groups  # group.share.max.groups; None: no cap, as Kafka 4.1+
        self.groups: dict[str, ShareGroup] = {}
        self._past_rebalances: dict[str, int] = {}  # of groups dropped here, so counters stay
        self._mutex = asyncio.Lock()
        self._background: set[asyncio.Task[None]] = set()
        self._recorded: dict[str, tuple[str, ...]] = {}  # membership last written to the store
        self._creation = GroupCreation(store, upstream, max_groups)
        self._recording: dict[str, asyncio.Lock] = {}

        # what the store says of the groups: every metadata_refresh_ms once a group exists
        refresh = every(
            lambda: self.metadata_refresh_ms / 1000 if self.groups else MAINTAIN_EVERY_S
        )
        self._jobs = (
            Periodic(
                "member-expiry",
                MAINTAIN_EVERY_S,
                self.expire_members,
                "expiring members",
                at_once=False,
                reads_store=False,
            ),
            Periodic(
                "session-eviction",
                MAINTAIN_EVERY_S,
                self.evict_idle_sessions,
                "evicting idle share sessions",
                at_once=False,
                reads_store=False,
            ),
            Periodic(
                "deleted-groups",
                refresh,
                self.drop_deleted_groups,
                "checking for deleted groups",
                at_once=False,
                reads_store=False,  # only while a group is empty
            ),
            Periodic(
                "topic-metadata",
                every(lambda: self.topics_refresh_ms / 1000),
                self.refresh_topics,
                "upstream metadata refresh",
                at_once=False,
                reads_store=False,
            ),
        )

    def start(self) -> None:
        for job in self._jobs:
            job.start()

    async def stop(self) -> None:
        for job in self._jobs:
            await job.stop()
        tasks = list(self._background)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def heartbeat(
        self,
        group_id: str,
        member_id: str,
        member_epoch: int,
        *,
        subscribed: Sequence[str] | None,
        rack_id: str | None,
        client_id: str,
        client_host: str,
    ) -> HeartbeatResult:
        if not self.coordinates(group_id):
            return not_coordinator(group_id, member_epoch)
        invalid = heartbeat_problem(member_id, member_epoch, rack_id, subscribed)
        if invalid is not None:
            return HeartbeatResult(HeartbeatError.INVALID_REQUEST, member_epoch, None, invalid)
        if group_id not in self.groups:  # looked up before the mutex: other groups' heartbeats
            if member_epoch != JOIN_EPOCH:  # never wait on it
                return await not_held(self.store, group_id, member_epoch)
            refused = await self._creation.refused(group_id)
            if refused is not None:
                return refused
        if subscribed:
            # a joining member's topics are looked up afresh: one may just have been deleted or
            # recreated (a new topic id), which the periodic refresh would notice only later;
            # Kafka's coordinator reads its current metadata. Looked up before the mutex, so
            # members joining together share lookups and never wait for each other's
            missing = [
                t
                for t in _topic_names(subscribed)
                if member_epoch == 0 or t not in self.upstream.topics
            ]
            if missing:
                try:
                    await self.upstream.refresh_metadata(missing)
                except UpstreamError as exc:
                    log.warning("metadata for %s failed: %s", missing, exc)
        async with self._mutex:
            if not self.coordinates(group_id):  # the live nodes changed while this waited
                return not_coordinator(group_id, member_epoch)
            group = self.groups.get(group_id)
            if group is None and member_epoch != JOIN_EPOCH:  # forgotten while this waited
                return await not_held(self.store, group_id, member_epoch)
            if group is None or (member_epoch == 0 and not group.members):
                # a join to an empty group makes sure the row exists: a batch repair may have
                # deleted the group since it emptied (forgotten here only at the next check),
                # and only this creates it; a group with members is not empty in the store
                await self.store.ensure_group(group_id)
            if group is None:
                settings = self.settings_for(group_id)
                group = ShareGroup(group_id, settings.max_size, settings.assignor)
                self.groups[group_id] = group
            if subscribed:
                names = set(subscribed) | group.subscribed_topic_names()
                group.update_topics(self._topics(names))
            rebalances = group.rebalances
            result = group.heartbeat(
                member_id,
                member_epoch,
                self.clock_ms(),
                subscribed_topics=subscribed,
                rack_id=rack_id,
                client_id=client_id,
                client_host=client_host,
                heartbeat_interval_ms=self.settings_for(group_id).heartbeat_interval_ms,
            )
        event = {"group": group_id, "member": member_id}
        if member_epoch == 0 and result.error is None:
            log.info("member joined", extra={**event, "client_id": client_id, "host": client_host})
        if group.rebalances != rebalances:
            log.info(
                "group rebalanced",
                extra={
                    "group": group_id,
                    "epoch": group.group_epoch,
                    "members": len(group.members),
                },
            )
        if member_epoch == -1 and result.error is None:
            log.info("member left", extra=event)
            self._leaving(group_id, member_id)
        await self._record_membership(group)
        return result

    @contextlib.asynccontextmanager
    async def held(self) -> AsyncIterator[None]:
        """No heartbeat is handled meanwhile, so membership cannot change under a caller that
        deletes what only an empty or unsubscribed group may lose."""
        async with self._mutex:
            yield

    def bury(self, group_id: str) -> None:
        """The group was deleted: it is Dead to anyone still holding it, then forgotten."""
        group = self.groups.get(group_id)
        if group is not None:
            group.dead = True
        self.forget(group_id)

    async def _record_membership(self, group: ShareGroup) -> None:
        """Keep the store's view of the group's subscriptions and emptiness current (the batch
        jobs' expiry rules read it); written only when it changed. One write per group at a
        time, of the membership as it is when the write starts, so concurrent heartbeats
        cannot leave an older view stored last."""
        in_order = self._recording.setdefault(group.group_id, asyncio.Lock())
        async with in_order:
            if group.dead or self.groups.get(group.group_id) is not group:
                return  # deleted while this waited: recording would bring its row back
            topics = tuple(sorted(group.subscribed_topic_names()))
            if self._recorded.get(group.group_id) == topics:
                return
            now = datetime.fromtimestamp(self.clock_ms() / 1000, UTC)
            try:
                await self.store.record_membership(group.group_id, topics, now)
            except StoreUnavailable as exc:
                STORE_OUTAGE.failed(
                    f"recording the membership of {group.group_id}", first_line(exc)
                )
                return  # tried again on the next heartbeat
            except Exception:
                log.exception("recording the membership of %s failed", group.group_id)
                return  # tried again on the next heartbeat
            self._recorded[group.group_id] = topics

    def let_go(self, everything: bool = False) -> list[str]:
        """The live nodes changed: forget the groups another node coordinates now (or all of
        them: this node's lease had lapsed, and they may have moved meanwhile). Their
        members get NOT_COORDINATOR, find the new coordinator, and rejoin there (it does not
        know them: UNKNOWN_MEMBER_ID, then a heartbeat with epoch 0), as KIP-932 prescribes
        when a coordinator moves. Nothing stored is touched."""
        gone = [g for g in self.groups if everything or not self.coordinates(g)]
        for group_id in gone:
            self._drop(group_id)
        if gone:
            log.info("%d share groups now coordinated by other nodes: let go", len(gone))
        return gone

    def members_assigned(self, group_id: str, topic_id: UUID, partition: int) -> int:
        """How many members have, or are to have, this partition (0 where the group is
        coordinated elsewhere): fair work counts them before they first fetch."""
        group = self.groups.get(group_id)
        if group is None:
            return 0
        return group.members_on(topic_id, partition)

    def standing(self, group_id: str, member_id: str) -> Standing:
        """Whether a live member owns a share session of this member id, as far as this node
        can tell: a full session cache makes strangers give way to members."""
        if not self.coordinates(group_id):
            return Standing.UNVERIFIED
        group = self.groups.get(group_id)
        if group is None or member_id not in group.members:
            return Standing.STRANGER
        return Standing.MEMBER

    def session_gave_way(self, session: ShareSession, newcomer: SessionKey) -> None:
        group_id, member_id, _ = session.key
        why = (
            "no member of its group"
            if self.standing(group_id, member_id) == Standing.STRANGER
            else "its group coordinated by another node"
        )
        log.info(
            "share session of %s in %s (%s) closed: the session cache is full, and %s in %s "
            "is a member of its group",
            member_id,
            group_id,
            why,
            newcomer[1],
            newcomer[0],
        )

    def _leaving(self, group_id: str, member_id: str) -> None:
        """A member left. As on Kafka, the locks it holds under a share session end with the
        session, not with the leave: its client closes the session after the leave heartbeat
        (ShareAcknowledge -1, carrying its last acknowledgements, which a release first would
        turn into redeliveries), or its connection closes, and a session left open keeps them
        until they time out. Without a session here, whatever it still holds ends now."""
        if self.sessions.of_member(group_id, member_id):
            return
        task = asyncio.create_task(self._member_gone(group_id, member_id))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def _session_idle_ms(self, group_id: str) -> int:
        """A share session unused this long is evicted: never before its member would have
        timed out, nor before the locks it may hold could have expired."""
        settings = self.settings_for(group_id)
        return max(settings.session_timeout_ms, settings.record_lock_duration_ms)

    def _topics(self, names: set[str]) -> dict[str, tuple[UUID, int]]:
        out = {}
        for name in names:
            info = self.upstream.topics.get(name)
            if info is not None:
                out[name] = (info.topic_id, info.partition_count)
        return out

    async def _member_gone(self, group_id: str, member_id: str) -> None:
        for session in self.sessions.of_member(group_id, member_id):
            self.sessions.close(session.key)
        await self.partitions.release_member(member_id, group_id)

    async def drop_deleted_groups(self) -> list[str]:
        """Forget empty groups that the store no longer has: a batch repair deleted them (an
        expired group), and they should not stay listed until a restart. A member joining
        again creates the group afresh."""
        empty = [group_id for group_id, group in self.groups.items() if not group.members]
        if not empty:
            return []
        stored = {record.group_id for record in await self.store.list_groups()}
        dropped = []
        async with self._mutex:  # a member may have joined meanwhile: then it stays
            for group_id in empty:
                group = self.groups.get(group_id)
                if group is not None and not group.members and group_id not in stored:
                    self.forget(group_id)
                    dropped.append(group_id)
        for group_id in dropped:
            log.info("group deleted elsewhere: forgotten", extra={"group": group_id})
        return dropped

    def forget(self, group_id: str) -> None:
        """The group was deleted: drop it, what was recorded of it, and its configs."""
        self._drop(group_id)
        self.forget_group(group_id)

    def _drop(self, group_id: str) -> None:
        group = self.groups.pop(group_id, None)
        if group is not None and group.rebalances:
            past = self._past_rebalances
            past[group_id] = past.get(group_id, 0) + group.rebalances
        self._recorded.pop(group_id, None)
        self._recording.pop(group_id, None)

    def rebalances(self) -> dict[str, int]:
        """Target assignments computed here per group, ever: a counter never goes down, so a
        group deleted or moved away keeps what it had, and one made again adds to it."""
        counts = dict(self._past_rebalances)
        for group_id, group in self.groups.items():
            counts[group_id] = counts.get(group_id, 0) + group.rebalances
        return counts

    # ------------------------------------------------------------------ background jobs
    async def expire_members(self) -> None:
        """Members past their session timeout leave the group (the others are given their
        partitions), and the group's membership is recorded again.

        Their share sessions and acquisition locks stay, as Kafka's: the coordinator's
        session timeout (GroupMetadataManager.scheduleShareGroupSessionTimeout, then
        shareGroupFenceMember) only writes the member out of the group, and a broker releases
        a member's records when its share session ends (SharePartitionManager.releaseSession,
        on epoch -1 or, from ShareSessionCache, on disconnect). A member that merely missed
        heartbeats goes on acknowledging what it holds; one that is gone loses its locks when
        they time out (its idle session is evicted later still)."""
        now = self.clock_ms()
        gone: list[tuple[str, str]] = []
        async with self._mutex:
            for group in self.groups.values():
                if not self.coordinates(group.group_id):
                    continue  # its members heartbeat to another node now
                timeout = self.settings_for(group.group_id).session_timeout_ms
                for member_id in group.expire_members(now, timeout):
                    gone.append((group.group_id, member_id))
        for group_id, member_id in gone:
            log.info("member %s of %s timed out", member_id, group_id)
        for group_id in {g for g, _ in gone}:
            if group_id in self.groups:
                await self._record_membership(self.groups[group_id])

    async def evict_idle_sessions(self) -> None:
        for session in self.sessions.evict_idle(self.clock_ms(), self._session_idle_ms):
            group_id, member_id, _ = session.key
            log.info("share session of %s in %s evicted: idle", member_id, group_id)

    async def refresh_topics(self) -> None:
        """Read the topics in use from the cluster again (created, deleted, partitions added):
        those the groups subscribe to and those of the share-partitions loaded here (a
        partition leader need not coordinate the group). The groups get what changed, and the
        share-partitions of a deleted topic are dropped at once."""
        names = set(
            _topic_names({t for g in self.groups.values() for t in g.subscribed_topic_names()})
        )
        names |= self.partitions.topics_loaded()
        if not names:
            return
        await self.upstream.refresh_metadata(sorted(names))
        async with self._mutex:
            for group in self.groups.values():
                group.update_topics(self._topics(group.subscribed_topic_names()))
        await self.partitions.drop_deleted()


def _topic_names(subscribed: Iterable[str]) -> list[str]:
    """The subscribed names a topic can have: only those are asked of the cluster (any other,
    such as a ``^name$`` pattern, matches no topic, as in Kafka's coordinator)."""
    return [t for t in subscribed if topic_name_problem(t) is None]
