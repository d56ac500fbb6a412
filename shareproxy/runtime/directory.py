"""The cluster's proxy nodes as an operator sees them: each live node's id, advertised
listeners, admin API and lease, and how much it serves. A node knows the others' registrations
(from the store's live set) but only its own share-partitions and groups, so each node answers
its own counts and the admin API asks the others for theirs; nothing here is persisted."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from shareproxy.runtime.cluster import ClusterNodes, NodeAddress
from shareproxy.runtime.consuming.partitions import SharePartitions
from shareproxy.runtime.groups.census import StoredCensus
from shareproxy.runtime.groups.coordinator import Coordinator


@dataclass(frozen=True, slots=True)
class NodeView:
    node_id: int
    listeners: dict[str, str]  # security protocol -> advertised host:port
    admin_url: str | None
    lease_live: bool
    lease_expires_at: datetime | None  # by the store's clock; None: not read from the store
    groups_coordinated: int | None  # None: only that node knows (it could not be asked)
    share_partitions_led: int | None


class NodeDirectory:
    def __init__(
        self,
        nodes: ClusterNodes,
        partitions: SharePartitions,
        coordinator: Coordinator,
        census: StoredCensus,
        now: Callable[[], float] = time.time,
    ) -> None:
        self.nodes = nodes
        self.partitions = partitions
        self.coordinator = coordinator
        self.census = census
        self.now = now

    @property
    def node_id(self) -> int:
        return self.nodes.node_id

    def peers(self) -> list[NodeAddress]:
        """The other live nodes, with where their admin APIs answer."""
        return self.nodes.peers()

    def this_node(self) -> NodeView:
        """This node with what it serves now: the share groups it coordinates (stored, as last
        counted, or with members here) and the share-partitions it has loaded and leads."""
        groups = self.census.group_ids | self.coordinator.groups.keys()
        return self._view(
            self.node_id,
            lease_live=self.nodes.holds_lease(),
            groups=sum(1 for g in groups if self.nodes.coordinates(g)),
            partitions=len(self.partitions.led()),
        )

    def live(self) -> list[NodeView]:
        """Every live node as this one last read them from the store (itself included, with
        its counts; the others' counts are theirs to answer), by node id."""
        now = datetime.fromtimestamp(self.now(), UTC)
        views = {self.node_id: self.this_node()}
        for n in self.nodes.live:
            if n.node_id not in views:
                views[n.node_id] = self._view(n.node_id, lease_live=n.lease_expires_at > now)
        return [views[i] for i in sorted(views)]

    def _view(
        self,
        node_id: int,
        *,
        lease_live: bool,
        groups: int | None = None,
        partitions: int | None = None,
    ) -> NodeView:
        registered = next((n for n in self.nodes.live if n.node_id == node_id), None)
        if node_id == self.node_id:
            listeners, admin_url = self.nodes.listeners, self.nodes.admin_url
        else:
            assert registered is not None
            listeners, admin_url = registered.listeners, registered.admin_url
        return NodeView(
            node_id=node_id,
            listeners={p: f"{h}:{port}" for p, (h, port) in sorted(listeners.items())},
            admin_url=admin_url,
            lease_live=lease_live,
            lease_expires_at=registered.lease_expires_at if registered else None,
            groups_coordinated=groups,
            share_partitions_led=partitions,
        )
