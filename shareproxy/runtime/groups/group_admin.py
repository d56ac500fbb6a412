"""Share-group administration, one implementation behind the REST API, the Kafka admin RPCs
and the CLI: list, describe, offsets and lag, reset, delete offsets, delete, configs.

Every refusal is a ShareError with the Kafka error code the RPCs return; the REST layer maps the
same codes to HTTP statuses. A refused call changes nothing.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from datetime import datetime
from uuid import UUID

from shareproxy.core.errors import ErrorCode, ShareError
from shareproxy.core.group_config import Bound
from shareproxy.core.group_settings import GroupSettings
from shareproxy.core.names import group_id_problem, require_group_id
from shareproxy.core.reset_plan import ResetTo, parse_scope, reset_target
from shareproxy.core.share_group import GroupState
from shareproxy.core.store import SharePartitionKey, ShareStateStore
from shareproxy.runtime.archive.dead_letters import DeadLetterWriter
from shareproxy.runtime.cluster import NodeAddress
from shareproxy.runtime.consuming.partitions import SharePartitions
from shareproxy.runtime.groups import offset_deletion, offset_resets, partition_views
from shareproxy.runtime.groups.coordinator import Coordinator
from shareproxy.runtime.groups.group_configs import GroupConfigs
from shareproxy.runtime.groups.group_pushes import GroupPushes
from shareproxy.runtime.groups.group_summaries import (
    GroupSummary,
    Listed,
    as_coordinated,
    summarize,
)
from shareproxy.runtime.groups.group_views import (
    AssignedTopic,
    GroupView,
    MemberView,
    PartitionOffsets,
    PendingDeadLetters,
    ResetPlan,
)
from shareproxy.runtime.groups.inflight_records import InFlightRecords
from shareproxy.runtime.groups.share_group_ids import ShareGroupIds
from shareproxy.telemetry import metrics
from shareproxy.upstream.client import TopicInfo, Upstream, UpstreamError
from shareproxy.upstream.lookups import topic_named

log = logging.getLogger(__name__)


def _not_found(group_id: str) -> ShareError:
    return ShareError(ErrorCode.GROUP_ID_NOT_FOUND, f"share group {group_id!r} does not exist")


class GroupAdmin:
    def __init__(
        self,
        store: ShareStateStore,
        coordinator: Coordinator,
        partitions: SharePartitions,
        upstream: Upstream,
        configs: GroupConfigs,
        dead_letters: DeadLetterWriter,
        *,
        coordinator_of: Callable[[str], str | None],
        coordinator_at: Callable[[str], NodeAddress | None],
        peers: Callable[[], list[NodeAddress]],
        leader_at: Callable[[UUID, int], NodeAddress | None],
        pushes: GroupPushes,
    ) -> None:
        # where a group is coordinated, for messages; None: here, though not at this moment
        self.coordinator_of = coordinator_of
        # the node a REST call about a group is passed on to; None: this one answers it
        self.coordinator_at = coordinator_at
        self.peers = peers  # the other live nodes, whose group lists the REST list joins
        self.dead_letter_writer = dead_letters
        self.store = store
        self.coordinator = coordinator
        self.partitions = partitions
        self.upstream = upstream
        self.configs = configs
        self.pushes = pushes  # each group's push: set, shown and removed through any node
        # single in-flight records: seen and changed where the share-partition is led
        self.records = InFlightRecords(store, partitions, upstream, self.require, leader_at)
        self._ids = ShareGroupIds(coordinator.groups, self._stored, coordinator.clock_ms)

    # ------------------------------------------------------------------ reading
    def coordinated_elsewhere(self, group_id: str) -> NodeAddress | None:
        """The live node that coordinates the group, when that is not this one: the admin
        API passes a call about the group on to it. None: this node answers it (acting on
        the group, or saying why it cannot right now)."""
        require_group_id(group_id)
        return self.coordinator_at(group_id)

    async def exists(self, group_id: str) -> bool:
        """Raises INVALID_GROUP_ID for an id no group can have (it never reaches the store)."""
        require_group_id(group_id)
        if group_id in self.coordinator.groups:
            return True
        return await self.store.get_group(group_id) is not None

    async def is_share_group(self, group_id: str) -> bool:
        """Whether a group id named to a consumer-group API is a share group, answered from
        memory for a few seconds (``share_group_ids``); an id no group can have is not."""
        return group_id_problem(group_id) is None and await self._ids.contains(group_id)

    async def _stored(self, group_id: str) -> bool:
        return await self.store.get_group(group_id) is not None

    async def require(self, group_id: str) -> None:
        if not await self.exists(group_id):
            raise _not_found(group_id)

    def member_known(self, group_id: str, member_id: str) -> bool | None:
        """Whether the group has the member, where it is coordinated; None elsewhere (only
        the coordinator knows its members)."""
        if not self.coordinator.coordinates(group_id):
            return None
        group = self.coordinator.groups.get(group_id)
        return group is not None and member_id in group.members

    async def dead_letters(self, group_id: str) -> list[PendingDeadLetters]:
        """The share-partitions this node leads whose records wait for the group's dead-letter
        topic, and why they are not written yet."""
        await self.require(group_id)
        return partition_views.pending_dead_letters(
            self.partitions, self.dead_letter_writer, group_id
        )

    async def list_groups(
        self, states: Iterable[str] = (), seen: Mapping[int, Mapping[str, str]] | None = None
    ) -> list[tuple[str, str]]:
        """(group id, state) of every share group, live or stored, optionally by state
        (case-insensitive, as ListGroups' StatesFilter). ``seen``: the groups and states other
        nodes listed, by node id: a group's state is the one its coordinator holds (as stored
        when that node's list is missing: it could not be asked)."""
        found = {r.group_id: GroupState.EMPTY.value for r in await self.store.list_groups()}
        for group_id, group in self.coordinator.groups.items():
            found[group_id] = group.state.value
        for node_id, listed in (seen or {}).items():
            for group_id, state in listed.items():
                home = self.coordinator_at(group_id)
                if home is not None and home.node_id == node_id:
                    found[group_id] = state
        wanted = {s.lower() for s in states}
        return sorted((g, s) for g, s in found.items() if not wanted or s.lower() in wanted)

    async def summaries(
        self,
        states: Iterable[str] = (),
        seen: Mapping[int, Mapping[str, Listed]] | None = None,
        *,
        now_ms: int,
        backlog: bool = True,
    ) -> list[GroupSummary]:
        """``list_groups`` with each group's members and subscribed topics as its coordinator
        holds them (``seen``: as other nodes listed theirs), and with ``backlog`` its topics
        with state, lag and oldest unacknowledged age (``group_summaries``)."""
        seen = seen or {}
        states_seen = {n: {g: x.state for g, x in listed.items()} for n, listed in seen.items()}
        listed = await self.list_groups(states, states_seen)
        groups = as_coordinated(listed, seen, self.coordinator_at, self.coordinator.groups)
        return await summarize(
            groups, self.store, self.partitions, self.upstream, now_ms, backlog=backlog
        )

    async def describe(self, group_id: str) -> GroupView:
        """The group as its coordinator holds it (members, epochs, assignment), or as stored
        when it has no members; the one view REST and ShareGroupDescribe both answer with."""
        self._require_coordinated(group_id)
        group = self.coordinator.groups.get(group_id)
        if group is None:
            if not await self.exists(group_id):
                raise _not_found(group_id)
            assignor = self.coordinator.settings_for(group_id).assignor
            return GroupView(group_id, GroupState.EMPTY.value, 0, 0, assignor=assignor)
        names = self._topic_names()
        members = [
            MemberView(
                member_id=m.member_id,
                member_epoch=m.member_epoch,
                client_id=m.client_id,
                client_host=m.client_host,
                rack_id=m.rack_id,
                subscribed_topics=sorted(m.subscribed_topics),
                assignment=[
                    AssignedTopic(t, names.get(t, ""), sorted(ps))
                    for t, ps in sorted(m.assignment.items())
                ],
                last_heartbeat_ms=m.last_heartbeat_ms,
            )
            for m in sorted(group.members.values(), key=lambda m: m.member_id)
        ]
        return GroupView(
            group_id,
            group.state.value,
            group.group_epoch,
            group.assignment_epoch,
            members,
            group.assignor,
        )

    async def offsets(
        self, group_id: str, topics: Iterable[str] | None = None
    ) -> list[PartitionOffsets]:
        """SPSO, SPEO, in-flight records by state and lag for each share-partition with state
        (or, for named topics, each partition of them)."""
        await self.require(group_id)
        return await partition_views.offsets(
            self.partitions, self.store, self.upstream, group_id, topics
        )

    # ------------------------------------------------------------------ changing
    def _members(self, group_id: str) -> int:
        group = self.coordinator.groups.get(group_id)
        return len(group.members) if group is not None else 0

    def _require_coordinated(self, group_id: str) -> None:
        """Members are known, and may be held off, only where the group is coordinated: a
        change or a view of them anywhere else could miss a member that just joined."""
        if self.coordinator.coordinates(group_id):
            return
        elsewhere = self.coordinator_of(group_id)
        if elsewhere is None:  # no other node has it: sending the caller away would not help
            raise ShareError(
                ErrorCode.COORDINATOR_NOT_AVAILABLE,
                f"share group {group_id!r} is coordinated by this node, which cannot act on it "
                "until it renews its lease on the state store (or a handover settles): retry",
            )
        raise ShareError(
            ErrorCode.NOT_COORDINATOR,
            f"share group {group_id!r} is coordinated by {elsewhere}: "
            "ask that node (Kafka admin clients find it themselves)",
        )

    def _require_empty(self, group_id: str) -> None:
        self._require_coordinated(group_id)
        n = self._members(group_id)
        if n:
            raise ShareError(
                ErrorCode.NON_EMPTY_GROUP,
                f"share group {group_id!r} has {n} member(s); stop its consumers first",
            )

    @contextlib.asynccontextmanager
    async def _held(self, group_id: str, *, empty: bool = True) -> AsyncIterator[None]:
        """Every change to a group's offsets or the group itself runs here: no member joins or
        subscribes while it writes (the coordinator holds heartbeats), and, ``empty``, the
        group has no member when it starts (one may have joined since it was last looked at),
        as Kafka serializes every operation of a group on its coordinator's shard."""
        async with self.coordinator.held():
            if empty:
                self._require_empty(group_id)
            yield

    async def reset_offsets(
        self,
        group_id: str,
        to: ResetTo,
        *,
        topics: Iterable[str] | None = None,
        at: datetime | None = None,
        offset: int | None = None,
        duration: str | None = None,
        shift: int | None = None,
        offsets: Mapping[tuple[str, int], int] | None = None,
        dry_run: bool = True,
        now: datetime,
        authorize: Callable[[list[str]], None] = lambda topics: None,
    ) -> list[ResetPlan]:
        """Move SPSO of each share-partition in scope and drop its in-flight state, as
        kafka-share-groups.sh --reset-offsets (targets: ``core/reset_plan.py``; scope: the
        ``topics``, each ``name`` or ``name:0,2``, the partitions of ``offsets``, or every
        topic the group has state for).

        ``authorize`` gets the names of the topics to reset before anything is asked upstream
        or changed, and raises to refuse. State kept for a topic upstream no longer has is not
        reset (the topic has no offsets to move to), so it is not among them: its id is no
        topic name an ACL could grant or deny.
        """
        await self.require(group_id)
        self._require_empty(group_id)
        now_ms = int(now.timestamp() * 1000)
        target = reset_target(
            to,
            now_ms=now_ms,
            at_ms=None if at is None else int(at.timestamp() * 1000),
            duration=duration,
            offset=offset,
            shift=shift,
            offsets=None if offsets is None else dict(offsets),
        )
        topics = None if topics is None else list(topics)
        if topics is not None:  # named: refused before the cluster is asked about them
            authorize(sorted({parse_scope(t)[0] for t in topics}))
        elif target.to == "offsets":
            authorize(sorted({t for t, _ in target.offsets}))
        in_scope = await offset_resets.scope(self.upstream, self.store, group_id, topics, target)
        if topics is None and target.to != "offsets":
            authorize(sorted({name for _, name in in_scope}))
        plan = await offset_resets.plan(self.upstream, self.store, target, in_scope, now_ms)
        if not dry_run:
            keys = [key for key, _ in in_scope]
            async with self._held(group_id):
                for key, step in zip(keys, plan, strict=True):
                    await self.store.reset(key, step.new_spso, step.topic)
                self.partitions.evict(keys)
            log.info(
                "offsets reset",
                extra={"group": group_id, "to": to, "partitions": len(keys)},
            )
        return plan

    # ------------------------------------------------------------------ configs
    def settings_for(self, group_id: str) -> GroupSettings:
        """The group's configs in force: its own values over the proxy's defaults."""
        return self.configs.settings_for(group_id)

    def config_bound(self, name: str) -> Bound | None:
        """The range this node accepts for a group config (None: unbounded)."""
        return self.configs.bounds.bound(name)

    def config_overrides(self, group_id: str) -> dict[str, str]:
        """The group configs set on this group (the rest are the proxy-wide defaults)."""
        return self.configs.overrides(group_id)

    async def alter_configs(
        self, group_id: str, changes: Mapping[str, str | None], validate_only: bool = False
    ) -> dict[str, str]:
        """Set (a value) or delete (None) group configs; GroupConfigError changes nothing."""
        return await self.configs.alter(group_id, changes, validate_only=validate_only)

    async def alter_offsets(
        self, group_id: str, offsets: Mapping[tuple[str, int], int]
    ) -> dict[tuple[str, int], ErrorCode]:
        """AlterShareGroupOffsets: explicit start offsets per topic-partition, of a group that
        exists and is empty, as Kafka's coordinator alters them (GROUP_ID_NOT_FOUND,
        NON_EMPTY_GROUP otherwise); like Kafka's, it raises no epoch of the group."""
        await self.require(group_id)
        topics = {topic: await self._known_topic(topic) for topic in {t for t, _ in offsets}}
        result: dict[tuple[str, int], ErrorCode] = {}
        keys = []
        async with self._held(group_id):
            for (topic, partition), start in offsets.items():
                info = topics[topic]
                if info is None or partition not in info.leaders or start < 0:
                    result[(topic, partition)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    continue
                key = SharePartitionKey(group_id, info.topic_id, partition)
                await self.store.reset(key, start, topic)
                keys.append(key)
                result[(topic, partition)] = ErrorCode.NONE
            self.partitions.evict(keys)
        if keys:
            log.info("offsets altered", extra={"group": group_id, "partitions": len(keys)})
        return result

    async def delete_offsets(
        self, group_id: str, topics: Iterable[str], *, live: bool = False
    ) -> dict[str, tuple[ErrorCode, str | None]]:
        """Kafka's rule: only in an empty group (NON_EMPTY_GROUP, nothing deleted, as its
        coordinator refuses), each topic then deleted, or UNKNOWN_TOPIC_OR_PARTITION where it
        does not exist or the group has no state for it. ``live``,
        the REST API's rule: members may be consuming, and the call is refused whole if the group
        subscribes to one of the topics (GROUP_SUBSCRIBED_TO_TOPIC, as KIP-496 for consumer
        groups) or one does not exist."""
        await self.require(group_id)
        topics = list(dict.fromkeys(topics))
        known = {name: await self._known_topic(name) for name in topics}
        async with self._held(group_id, empty=not live):
            group = self.coordinator.groups.get(group_id)
            subscribed = group.subscribed_topic_names() if group is not None else set()
            return await offset_deletion.delete_offsets(
                self.store, self.partitions, group_id, subscribed, known, all_or_nothing=live
            )

    async def delete_group(self, group_id: str) -> None:
        """Only an empty group, and no member may join while it goes (the coordinator holds
        heartbeats); anyone still holding it sees it Dead."""
        await self.require(group_id)
        async with self._held(group_id):
            keys = await self.store.list_partitions(group_id)
            await self.store.delete_group(group_id)
            self.partitions.evict(keys)
            self.coordinator.bury(group_id)  # and, through the coordinator, its configs
            self._ids.forget(group_id)
        metrics.OFFSET_DELETIONS.inc(len(keys))
        log.info("group deleted", extra={"group": group_id, "partitions": len(keys)})

    # ------------------------------------------------------------------ helpers
    async def _known_topic(self, name: str) -> TopicInfo | None:
        """The upstream topic, asked for when this node has not looked it up yet (as Kafka's
        coordinator reads its metadata image); None when it does not exist or cannot be
        looked up now."""
        try:
            return await topic_named(self.upstream, name)
        except (ShareError, UpstreamError):
            return None

    def _topic_names(self) -> dict[UUID, str]:
        return partition_views.topic_names(self.upstream)
