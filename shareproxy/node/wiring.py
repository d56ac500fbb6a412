"""The runtime of one proxy node, wired in one place: every component gets its collaborators
when it is constructed, so the proxy and the in-process tests run the same wiring.

Built in two phases, as uvicorn's ``Server`` runs: ``build_runtime`` constructs (no I/O, no
task), ``Runtime.start`` starts the background jobs in order, and ``Runtime.stop`` stops them in
reverse. Loading the group configs, joining the live nodes and serving belong to the caller.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from shareproxy.core.group_settings import GroupSettings
from shareproxy.core.push_spec import PushStore
from shareproxy.core.redrive import ArchiveLog
from shareproxy.core.share_session import ShareSessionCache
from shareproxy.core.store import SharePartitionKey, ShareStateStore
from shareproxy.runtime.archive.dead_letters import DeadLetterWriter
from shareproxy.runtime.archive.record_copies import CopyProducer
from shareproxy.runtime.archive.redrive import ArchivedRecords
from shareproxy.runtime.catalogue import CatalogueSource
from shareproxy.runtime.cluster import ClusterNodes
from shareproxy.runtime.consuming.cache_budget import CacheBudget
from shareproxy.runtime.consuming.consumers import ShareConsumers
from shareproxy.runtime.consuming.consumption import Consumption
from shareproxy.runtime.consuming.group_commit import GroupCommitter
from shareproxy.runtime.consuming.partitions import SharePartitions
from shareproxy.runtime.consuming.upstream_feed import UpstreamFeed
from shareproxy.runtime.directory import NodeDirectory
from shareproxy.runtime.groups.census import StoredCensus
from shareproxy.runtime.groups.coordinator import Coordinator
from shareproxy.runtime.groups.group_admin import GroupAdmin
from shareproxy.runtime.groups.group_configs import READ_EVERY_S as CONFIGS_READ_EVERY_S
from shareproxy.runtime.groups.group_configs import GroupConfigs
from shareproxy.runtime.groups.group_pushes import READ_EVERY_S as PUSHES_READ_EVERY_S
from shareproxy.runtime.groups.group_pushes import GroupPushes
from shareproxy.runtime.groups.retention import GroupRetention
from shareproxy.runtime.jobs import Periodic
from shareproxy.settings.model import Settings
from shareproxy.upstream.client import Upstream


def clock_ms() -> int:
    return time.time_ns() // 1_000_000


def group_defaults(settings: Settings) -> GroupSettings:
    """Every group's settings before its own configs: the proxy-wide ones."""
    return GroupSettings(
        max_size=settings.group_share_max_size, assignor=settings.group_share_assignors
    ).with_configs(settings.group_configs())


class RuntimeStore(ShareStateStore, ArchiveLog, PushStore, Protocol):
    """What the runtime needs of its store: the share state, the archive log, the pushes."""


@dataclass(eq=False)
class Runtime:
    """The components of one node's runtime, constructed and wired by ``build_runtime``."""

    store: RuntimeStore
    upstream: Upstream
    configs: GroupConfigs
    committer: GroupCommitter
    sessions: ShareSessionCache
    nodes: ClusterNodes
    partitions: SharePartitions
    dead_letters: DeadLetterWriter
    copies: CopyProducer  # the dead letters' and the redrives' producer
    archived: ArchivedRecords
    feed: UpstreamFeed
    consumption: Consumption
    coordinator: Coordinator
    consumers: ShareConsumers
    retention: GroupRetention
    group_admin: GroupAdmin
    census: StoredCensus
    directory: NodeDirectory
    config_reader: Periodic
    pushes: GroupPushes
    push_reader: Periodic
    _running: contextlib.AsyncExitStack = field(default_factory=contextlib.AsyncExitStack)

    def settings_for(self, group_id: str) -> GroupSettings:
        return self.configs.settings_for(group_id)

    async def start(self) -> None:
        """Start the background jobs, each after those it relies on; ``stop`` undoes whatever
        part of it ran."""
        self._running.push_async_callback(self.copies.stop)  # after every job stopped
        for job in (
            self.committer,
            self.partitions,
            self.dead_letters,  # stopped before the partitions
            self.feed,  # stopped before the partitions
            self.coordinator,
            self.retention,
            self.census,
            self.config_reader,
            self.push_reader,
        ):
            job.start()
            self._running.push_async_callback(job.stop)

    async def stop(self) -> None:
        """Stop the background jobs in reverse order (also after a start that failed midway)."""
        await self._running.aclose()

    def placement_changed(self) -> None:
        """The live nodes changed: let go of what other nodes own now."""
        self.partitions.let_go()
        self.coordinator.let_go()

    def lease_lost(self) -> None:
        """Other nodes may have claimed anything this one held while its lease had lapsed."""
        self.partitions.let_go(everything=True)
        self.coordinator.let_go(everything=True)


def build_runtime(
    settings: Settings,
    store: RuntimeStore,
    upstream: Upstream,
    nodes: ClusterNodes,
    *,
    defaults: GroupSettings | None = None,
    clock: Callable[[], int] = clock_ms,
) -> Runtime:
    """Construct the runtime over a store, an upstream and this node among the live ones
    (none of them used yet): ``nodes`` says what this node leads and coordinates."""
    s = settings
    configs = GroupConfigs(
        store, group_defaults(s) if defaults is None else defaults, s.group_bounds()
    )
    settings_for = configs.settings_for
    committer = GroupCommitter(store)
    # a full session cache asks the coordinator who is a member, once both exist
    sessions = ShareSessionCache(
        s.group_share_max_share_sessions,
        s.max_share_sessions_per_client,
        standing=lambda group_id, member_id: coordinator.standing(group_id, member_id),
        gave_way=lambda session, newcomer: coordinator.session_gave_way(session, newcomer),
    )
    cache_budget = CacheBudget(s.log_cache_bytes)

    # the registry and the coordinator know each other: a share-partition's fair share counts
    # the members the coordinator assigned it, asked only once both exist
    def members_assigned(key: SharePartitionKey) -> int:
        return coordinator.members_assigned(key.group_id, key.topic_id, key.partition)

    partitions = SharePartitions(
        store,
        committer,
        upstream,
        settings_for,
        clock,
        leads=nodes.leads,
        refresh_settings=configs.refresh,
        members_assigned=members_assigned,
        cache_budget=cache_budget,
    )
    configs.on_change(partitions.apply_settings)
    copies = CopyProducer(upstream)
    dead_letters = DeadLetterWriter(
        partitions,
        upstream,
        settings_for,
        clock,
        copies,
        topic_prefix=s.errors_deadletterqueue_topic_name_prefix,
        auto_create=s.errors_deadletterqueue_auto_create_topics_enable,
    )
    feed = UpstreamFeed(upstream, clock, cache_budget)
    coordinator = Coordinator(
        store,
        upstream,
        partitions,
        sessions,
        settings_for,
        clock,
        forget_group=configs.forget,
        max_groups=s.group_share_max_groups,
        coordinates=nodes.coordinates,
    )
    consumption = Consumption(partitions, feed, store, settings_for, clock)
    pushes = GroupPushes(store, store.configs_version)
    group_admin = GroupAdmin(
        store,
        coordinator,
        partitions,
        upstream,
        configs,
        dead_letters,
        coordinator_of=nodes.coordinator_elsewhere,
        coordinator_at=nodes.coordinator_admin,
        peers=nodes.peers,
        leader_at=nodes.leader_admin,
        pushes=pushes,
    )
    census = StoredCensus(store)
    runtime = Runtime(
        store=store,
        upstream=upstream,
        configs=configs,
        committer=committer,
        sessions=sessions,
        nodes=nodes,
        partitions=partitions,
        dead_letters=dead_letters,
        copies=copies,
        archived=ArchivedRecords(store, upstream, copies, settings_for, group_admin.require, clock),
        feed=feed,
        consumption=consumption,
        coordinator=coordinator,
        consumers=ShareConsumers(
            consumption,
            sessions,
            nodes,
            clock,
            partitions=partitions,
            store=store,
            upstream=upstream,
        ),
        retention=GroupRetention(
            store,
            coordinator,
            partitions,
            upstream,
            s.share_group_retention_ms,
            clock,
            s.share_group_retention_check_interval_ms,
            pushed=pushes.has_push,
        ),
        group_admin=group_admin,
        census=census,
        directory=NodeDirectory(nodes, partitions, coordinator, census),
        # a group config changed through another node applies here within a second
        config_reader=Periodic(
            "group-configs", CONFIGS_READ_EVERY_S, configs.refresh, "reading group configs"
        ),
        pushes=pushes,
        # a push set through another node starts here within a second
        push_reader=Periodic(
            "group-pushes", PUSHES_READ_EVERY_S, pushes.refresh, "reading group pushes"
        ),
    )
    nodes.on_change(lambda placement: runtime.placement_changed())
    nodes.on_lease_lost(runtime.lease_lost)
    nodes.cataloguing.source = lambda: _catalogue_of(upstream)
    upstream.after_metadata = lambda: nodes.catalogue(wait_s=CATALOGUE_WAIT_S)
    return runtime


# the longest a metadata read waits for the topics it found to be catalogued
CATALOGUE_WAIT_S = 1.0


def _catalogue_of(upstream: Upstream) -> CatalogueSource:
    """The upstream topics as this node's metadata shows them, for placement's catalogue."""
    return {
        t: len(info.leaders) for t, info in upstream.topics_by_id.items()
    }, upstream.retired.keys()
