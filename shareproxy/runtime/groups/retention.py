"""Expiry by the running proxy (``share_group_retention_ms``; off by default, since Kafka keeps
share groups until they are deleted): every round, each stored group is judged by the pure rules
of ``core/expiry.py`` and what expired is deleted, logged and counted. The reconcile job applies
the same rules offline and so stays the auditor of what the proxy did.

A deletion happens while the coordinator holds heartbeats, after checking again that the group
has no members or still does not subscribe to the topic; a group is deleted in the store only if
it is still empty since the moment judged, so a member that joined through another proxy keeps
it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from shareproxy.core.expiry import Expiry, expiring, facts_of
from shareproxy.core.store import GroupMembership, ShareStateStore
from shareproxy.runtime.consuming.partitions import SharePartitions
from shareproxy.runtime.groups.coordinator import Coordinator
from shareproxy.runtime.jobs import Periodic
from shareproxy.telemetry import metrics
from shareproxy.upstream.client import Upstream

log = logging.getLogger(__name__)


class GroupRetention:
    def __init__(
        self,
        store: ShareStateStore,
        coordinator: Coordinator,
        partitions: SharePartitions,
        upstream: Upstream,
        retention_ms: int | None,
        clock_ms: Callable[[], int],
        every_ms: int,
        pushed: Callable[[str], bool] = lambda group_id: False,
    ) -> None:
        """``pushed``: whether a group has a push, a consumer that never joins: such a group
        and its topics' state never expire."""
        self.store = store
        self.coordinator = coordinator
        self.partitions = partitions
        self.upstream = upstream
        self.retention_ms = retention_ms
        self.clock_ms = clock_ms
        self.pushed = pushed
        self.rounds = Periodic(
            "group-retention", every_ms / 1000, self.sweep, "expiring share-group state"
        )

    def start(self) -> None:
        if self.retention_ms is not None:
            self.rounds.start()

    async def stop(self) -> None:
        await self.rounds.stop()

    async def sweep(self) -> None:
        if self.retention_ms is None:
            return
        names = {info.topic_id: name for name, info in self.upstream.topics.items()}
        for m in await self.store.memberships():
            if not self.coordinator.coordinates(m.group_id) or self.pushed(m.group_id):
                continue  # its coordinator knows its members and expires it; a push consumes
            stored = {
                k: names.get(k.topic_id) for k in await self.store.list_partitions(m.group_id)
            }
            has_members = self._has_members(m.group_id)
            expiry = expiring(facts_of(m), stored, has_members, self.clock_ms(), self.retention_ms)
            if expiry.group:
                await self._expire_group(m, expiry)
            elif expiry.partitions:
                await self._expire_topics(m.group_id, expiry)

    def _has_members(self, group_id: str) -> bool:
        group = self.coordinator.groups.get(group_id)
        return group is not None and bool(group.members)

    async def _expire_group(self, m: GroupMembership, expiry: Expiry) -> None:
        async with self.coordinator.held():
            if self._has_members(m.group_id):
                return
            if not await self.store.delete_group(m.group_id, m.empty_since):
                return  # a member joined through another proxy meanwhile
            self.partitions.evict(expiry.partitions)
            self.coordinator.bury(m.group_id)
        metrics.GROUP_EXPIRATIONS.inc()
        metrics.OFFSET_EXPIRATIONS.inc(len(expiry.partitions))
        log.info(
            "group expired: empty longer than the retention",
            extra={
                "group": m.group_id,
                "empty_since": m.empty_since.isoformat() if m.empty_since else None,
                "partitions": len(expiry.partitions),
            },
        )

    async def _expire_topics(self, group_id: str, expiry: Expiry) -> None:
        """Each share-partition is deleted only at the state epoch read when it was judged: a
        proxy that loaded it since (a member subscribed again there) has claimed a newer one."""
        epochs = await self.store.state_epochs(expiry.partitions)
        deleted = []
        async with self.coordinator.held():
            group = self.coordinator.groups.get(group_id)
            subscribed = group.subscribed_topic_names() if group is not None else set()
            if subscribed & set(expiry.topics):
                return  # a member subscribed again since the store recorded it
            for key, epoch in epochs.items():
                if await self.store.delete_at_epoch(key, epoch):
                    deleted.append(key)
            self.partitions.evict(deleted)
        if not deleted:
            return
        metrics.OFFSET_EXPIRATIONS.inc(len(deleted))
        log.info(
            "offsets expired: no member has subscribed to the topics for longer than the retention",
            extra={"group": group_id, "topics": list(expiry.topics), "partitions": len(deleted)},
        )
