"""The node registry (``NodeRegistry``) in memory, for the middle tier: leases timed by one
clock every node reads (the store's, as on Postgres), each change of the live set a new
generation, a lapsed lease reaped by the first reader that sees it passed. It keeps
``persistence.nodes.NodeRecords``' rules, which tests/integration/test_nodes.py checks on the
real stores. ``cut_off`` gives a node a view of it that fails as a store out of reach."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Collection, Mapping
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from shareproxy.core.nodes import ClusterView, ProxyNode, Registration, Renewal
from shareproxy.core.placement import PLACEMENT_RULE
from shareproxy.core.store import StoreUnavailable


class MemoryNodes:
    def __init__(self, now: Callable[[], datetime]) -> None:
        self.now = now
        self.generation = 0
        self._nodes: dict[int, ProxyNode] = {}
        self.rule = PLACEMENT_RULE  # the placement rule the nodes registered here know
        self._topics: dict[UUID, int] = {}  # in the order they entered
        self._deleted: set[UUID] = set()

    def _live_holder(self, node_id: int) -> ProxyNode | None:
        node = self._nodes.get(node_id)
        return node if node is not None and node.lease_expires_at > self.now() else None

    def _take(
        self,
        node_id: int,
        incarnation: str,
        listeners: Mapping[str, tuple[str, int]],
        lease_ms: int,
        admin_url: str | None,
    ) -> None:
        expires = self.now() + timedelta(milliseconds=lease_ms)
        self._nodes[node_id] = ProxyNode(
            node_id, incarnation, dict(listeners), expires, 0, admin_url, self.rule
        )
        self.generation += 1

    async def register(
        self,
        node_id: int | None,
        incarnation: str,
        listeners: Mapping[str, tuple[str, int]],
        lease_ms: int,
        replace: bool = False,
        admin_url: str | None = None,
    ) -> Registration:
        await asyncio.sleep(0)  # a round trip
        if node_id is None:
            node_id = 1
            while self._live_holder(node_id) is not None:
                node_id += 1
            self._take(node_id, incarnation, listeners, lease_ms, admin_url)
            return Registration(node_id)
        before = self._live_holder(node_id)
        if before is not None and not replace:
            return Registration(node_id, held_by=before)
        self._take(node_id, incarnation, listeners, lease_ms, admin_url)
        return Registration(node_id, replaced=before)

    async def renew(
        self,
        node_id: int,
        incarnation: str,
        listeners: Mapping[str, tuple[str, int]],
        lease_ms: int,
        seen_generation: int = 0,
        admin_url: str | None = None,
    ) -> Renewal:
        await asyncio.sleep(0)  # a round trip
        node = self._nodes.get(node_id)
        if node is not None and node.incarnation == incarnation:
            self._nodes[node_id] = replace(
                node,
                lease_expires_at=self.now() + timedelta(milliseconds=lease_ms),
                seen_generation=max(node.seen_generation, seen_generation),
            )
            return Renewal.RENEWED
        if node is not None:  # held by another process (a lapsed lease not reaped is too)
            return Renewal.REPLACED
        self._take(node_id, incarnation, listeners, lease_ms, admin_url)
        return Renewal.REJOINED

    async def seen(self, node_id: int, incarnation: str, generation: int) -> None:
        await asyncio.sleep(0)  # a round trip
        node = self._nodes.get(node_id)
        if (
            node is not None
            and node.incarnation == incarnation
            and node.seen_generation < generation
        ):
            self._nodes[node_id] = replace(node, seen_generation=generation)

    async def live(self) -> ClusterView:
        await asyncio.sleep(0)  # a round trip
        now = self.now()
        lapsed = [i for i, n in self._nodes.items() if n.lease_expires_at <= now]
        for node_id in lapsed:
            del self._nodes[node_id]
        if lapsed:
            self.generation += 1
        nodes = tuple(self._nodes[i] for i in sorted(self._nodes))
        return ClusterView(self.generation, nodes, tuple(self._topics.items()))

    async def catalogue(self, seen: Mapping[UUID, int], retired: Collection[UUID]) -> bool:
        await asyncio.sleep(0)  # a round trip
        changed = any(self._topics.pop(t, None) is not None for t in retired)
        self._deleted.update(retired)
        for topic_id, partitions in sorted(seen.items(), key=lambda item: item[0].bytes):
            if topic_id not in self._deleted and self._topics.get(topic_id, -1) < partitions:
                self._topics[topic_id] = partitions
                changed = True
        if changed:
            self.generation += 1
        return changed

    async def leave(self, node_id: int, incarnation: str) -> None:
        await asyncio.sleep(0)  # a round trip
        node = self._nodes.get(node_id)
        if node is not None and node.incarnation == incarnation:
            del self._nodes[node_id]
            self.generation += 1

    def cut_off(self) -> CutOff:
        """A node's own view of the registry, which can be cut off from it."""
        return CutOff(self)


class CutOff:
    """The registry as one node reaches it: every call fails while ``cut`` is set."""

    def __init__(self, registry: MemoryNodes) -> None:
        self.registry = registry
        self.cut = False

    def __getattr__(self, name: str) -> Any:
        call = getattr(self.registry, name)

        async def through(*args: Any, **kwargs: Any) -> Any:
            await asyncio.sleep(0)
            if self.cut:
                raise StoreUnavailable("the store cannot be reached (a scripted outage)")
            return await call(*args, **kwargs)

        return through
