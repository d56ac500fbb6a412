"""The proxy nodes of a cluster as the runtime sees them: each live node holds a lease
in the store that it renews; one whose lease passed is not live. As Kafka's controller refuses a
broker id whose session is still live, a process does not take a node id whose lease holds:
it waits for the lease to pass (the process that held it may be gone, a restart after a crash)
and gives up when the holder renews it. Only when told to replace a live node does it take the
id at once, and the process it replaced stops at its next renewal. An id may also be leased:
the lowest one no live node holds."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import Enum
from typing import Protocol
from uuid import UUID


@dataclass(frozen=True, slots=True)
class ProxyNode:
    node_id: int
    incarnation: str  # one per process: tells a restarted node from the process it replaced
    listeners: Mapping[str, tuple[str, int]]  # security protocol -> advertised (host, port)
    lease_expires_at: datetime
    seen_generation: int = 0  # the newest cluster generation the node acts on
    admin_url: str | None = None  # where its REST admin API answers (None: none advertised)
    placement_rule: int = 1  # the newest rule its build places by (core/placement.py)


@dataclass(frozen=True, slots=True)
class ClusterView:
    """The live nodes, the topic catalogue and the cluster's generation: a number raised in the
    same transaction as every change of the live set (a node registering, leaving, or its
    lapsed lease being reaped) or of the catalogue, so two views with one generation list the
    same nodes and topics."""

    generation: int
    nodes: tuple[ProxyNode, ...]
    topics: tuple[tuple[UUID, int], ...] = ()  # (topic id, partitions), in the order they entered


@dataclass(frozen=True, slots=True)
class Registration:
    node_id: int  # the id asked for, or the one leased
    held_by: ProxyNode | None = None  # a live process holds the id: nothing was registered
    replaced: ProxyNode | None = None  # the live registration taken over, when told to replace


class Renewal(Enum):
    RENEWED = "renewed"
    REJOINED = "rejoined"  # the lease had lapsed and was reaped: registered again
    REPLACED = "replaced"  # another process registered the id: this one must stop


class NodeRegistry(Protocol):
    async def register(
        self,
        node_id: int | None,
        incarnation: str,
        listeners: Mapping[str, tuple[str, int]],
        lease_ms: int,
        replace: bool = False,
        admin_url: str | None = None,
    ) -> Registration:
        """Hold the node id's lease from now on, unless a live process holds it and
        ``replace`` is off; ``node_id`` None: the lowest id no live node holds, taken in one
        transaction so that two processes never lease one id."""
        ...

    async def renew(
        self,
        node_id: int,
        incarnation: str,
        listeners: Mapping[str, tuple[str, int]],
        lease_ms: int,
        seen_generation: int = 0,
        admin_url: str | None = None,
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

    async def catalogue(self, seen: Mapping[UUID, int], retired: Collection[UUID]) -> bool:
        """Bring the topic catalogue up to what a node's upstream metadata shows: topics it
        lacks enter at its end (by id), partition counts only grow, and retired ids (deleted,
        or replaced under their name) become tombstones that are never entered again; a new
        generation if anything changed, which this answers."""
        ...

    async def leave(self, node_id: int, incarnation: str) -> None:
        """Give the lease up at once (a clean stop): the others need not wait for it to pass."""
        ...
