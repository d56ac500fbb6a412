"""The proxy nodes of a cluster as the runtime sees them (issue 19): each live node holds a lease
in the store that it renews; one whose lease passed is not live. A process that starts with a
node id already registered replaces the old registration, as a restarted Kafka broker replaces
its previous incarnation, and the process it replaced stops at its next renewal: a restart after
a crash waits for nothing, and two processes given one id cannot both serve."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import Enum
from typing import Protocol


@dataclass(frozen=True, slots=True)
class ProxyNode:
    node_id: int
    incarnation: str  # one per process: tells a restarted node from the process it replaced
    listeners: Mapping[str, tuple[str, int]]  # security protocol -> advertised (host, port)
    lease_expires_at: datetime
    seen_generation: int = 0  # the newest cluster generation the node acts on


@dataclass(frozen=True, slots=True)
class ClusterView:
    """The live nodes and the cluster's generation: a number raised in the same transaction as
    every change of the live set (a node registering, leaving, or its lapsed lease being
    reaped), so two views with one generation list the same nodes."""

    generation: int
    nodes: tuple[ProxyNode, ...]


class Renewal(Enum):
    RENEWED = "renewed"
    REJOINED = "rejoined"  # the lease had lapsed and was reaped: registered again
    REPLACED = "replaced"  # another process registered the id: this one must stop


class NodeRegistry(Protocol):
    async def register(
        self,
        node_id: int,
        incarnation: str,
        listeners: Mapping[str, tuple[str, int]],
        lease_ms: int,
    ) -> ProxyNode | None:
        """Hold the node id's lease from now on; the registration replaced if it was live."""
        ...

    async def renew(
        self,
        node_id: int,
        incarnation: str,
        listeners: Mapping[str, tuple[str, int]],
        lease_ms: int,
        seen_generation: int = 0,
    ) -> Renewal:
        """Extend the lease; register again if it lapsed and was reaped meanwhile (a node cut
        off from the store for longer than its lease comes back as a new member)."""
        ...

    async def seen(self, node_id: int, incarnation: str, generation: int) -> None:
        """Record that the node acts on this generation now (it let go of what it lost)."""
        ...

    async def live(self) -> ClusterView:
        """Reap the leases that passed, then the live nodes (by node id) and the generation."""
        ...

    async def leave(self, node_id: int, incarnation: str) -> None:
        """Give the lease up at once (a clean stop): the others need not wait for it to pass."""
        ...
