"""This process as a node of a shareproxy cluster (issue 19): it registers its node id and
advertised listeners in the store, renews its lease every third of its length, and keeps the
set of live nodes that placement (``core/placement.py``) decides from. A renewal refused because
another process registered the same id means this one was replaced: it must stop serving, and
``on_replaced`` is told why. Every node derives the same placement (who leads each partition,
who coordinates each group) from the live set, and tells its watchers when it changes."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Mapping
from uuid import UUID

from shareproxy.broker.periodic import Periodic
from shareproxy.core.nodes import ClusterView, NodeRegistry, ProxyNode, Renewal
from shareproxy.core.placement import Placement

log = logging.getLogger(__name__)

# the share of the lease this node counts on, from the start of its last renewal: the others
# judge the lease by the store's clock, which may run a little faster than this one
LEASE_SAFETY = 0.9


class ClusterNodes:
    def __init__(
        self,
        registry: NodeRegistry,
        node_id: int,
        lease_ms: int,
        on_replaced: Callable[[str], None],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.registry = registry
        self.clock = clock
        self._held_until = 0.0  # by this process's clock: when its lease may have passed
        self.node_id = node_id
        self.lease_ms = lease_ms
        self.on_replaced = on_replaced
        self.incarnation = uuid.uuid4().hex
        self.live: tuple[ProxyNode, ...] = ()
        self.listeners: Mapping[str, tuple[str, int]] = {}
        self.replaced = False
        # until it joins, a node places everything on itself (it serves nothing yet)
        self.placement = Placement([node_id])
        self._others: Placement | None = None  # the placement without this node
        self._watchers: list[Callable[[Placement], None]] = []
        self._lost: list[Callable[[], None]] = []
        self.rounds = Periodic("node-lease", lease_ms / 3000, self.renew, "renewing the node lease")

    @property
    def live_ids(self) -> list[int]:
        return [n.node_id for n in self.live]

    def on_change(self, watcher: Callable[[Placement], None]) -> None:
        """Be told of every new placement: what this node no longer owns, it lets go."""
        self._watchers.append(watcher)

    def on_lease_lost(self, watcher: Callable[[], None]) -> None:
        """Be told when this node's lease had lapsed and it joined again: anything it had
        loaded may have been claimed by another node meanwhile, so none of it can be used."""
        self._lost.append(watcher)

    def holds_lease(self) -> bool:
        """Whether this node's lease surely still holds: measured from the start of its last
        successful renewal, with a margin for clocks that run at different rates. A node that
        cannot renew (cut off from the store, or paused) stops serving what it owns once this
        is false, before any other node can take it over."""
        return self.clock() < self._held_until

    def _held_from(self, started: float) -> None:
        self._held_until = started + self.lease_ms / 1000 * LEASE_SAFETY

    def endpoint(self, node_id: int, protocol: str) -> tuple[str, int] | None:
        """Where clients of a listener (by security protocol) reach a node; None for a node
        not live or without that listener."""
        if node_id == self.node_id:
            return self.listeners.get(protocol)
        for node in self.live:
            if node.node_id == node_id:
                return node.listeners.get(protocol)
        return None

    def serving(self) -> Placement:
        """The placement to tell clients: without this node while its lease may have lapsed
        (cut off from the store, it cannot know, and the others will soon lead what it led),
        so clients go where they will be served; a node alone keeps its own."""
        if self._others is None or self.holds_lease():
            return self.placement
        return self._others

    def leads(self, topic_id: UUID, partition: int) -> bool:
        return (
            self.placement.partition_leader(topic_id, partition) == self.node_id
            and self.holds_lease()
        )

    def coordinates(self, group_id: str) -> bool:
        return self.placement.group_coordinator(group_id) == self.node_id and self.holds_lease()

    def describe(self, node_id: int) -> str:
        """A node as messages name it: its id and advertised listeners."""
        endpoints = (
            self.listeners
            if node_id == self.node_id
            else next((n.listeners for n in self.live if n.node_id == node_id), {})
        )
        shown = ", ".join(f"{p}://{h}:{port}" for p, (h, port) in sorted(endpoints.items()))
        return f"proxy node {node_id}" + (f" ({shown})" if shown else "")

    async def join(self, listeners: Mapping[str, tuple[str, int]]) -> None:
        self.listeners = dict(listeners)
        started = self.clock()
        before = await self.registry.register(
            self.node_id, self.incarnation, listeners, self.lease_ms
        )
        if before is not None:
            log.warning(
                "node id %d was held by a live process (advertising %s): it is replaced and "
                "stops at its next lease renewal; give every node its own --node-id",
                self.node_id,
                _addresses(before),
                extra={"node": self.node_id, "replaced": before.incarnation},
            )
        self._held_from(started)
        self._see(await self.registry.live())
        log.info(
            "node %d joined the cluster",
            self.node_id,
            extra={"node": self.node_id, "live_nodes": self.live_ids},
        )
        self.rounds.start()

    async def renew(self) -> None:
        if self.replaced:
            return
        started = self.clock()
        renewal = await self.registry.renew(
            self.node_id, self.incarnation, self.listeners, self.lease_ms
        )
        if renewal is Renewal.REPLACED:
            self.replaced = True
            self.live = ()
            self.on_replaced(
                f"node id {self.node_id} was registered by another process: this one stops "
                "(give every node its own --node-id)"
            )
            return
        self._held_from(started)
        if renewal is Renewal.REJOINED:
            log.warning(
                "node %d had lost its lease (cut off from the store, or paused, for longer than "
                "--node-lease-ms): it joined again and reloads what it serves from the store",
                self.node_id,
            )
            for watcher in self._lost:
                watcher()
        self._see(await self.registry.live())

    def _see(self, view: ClusterView) -> None:
        ids = [n.node_id for n in view.nodes]
        if ids != self.live_ids:
            log.info("live nodes changed", extra={"live_nodes": ids, "generation": view.generation})
        self.live = view.nodes
        # this node counts itself even when the store's view lacks it (its lease lapsed
        # while it was cut off): the others may already lead what it led, and the state
        # epoch fences whichever of them is behind
        placement = Placement([*ids, self.node_id], view.generation)
        others = [i for i in ids if i != self.node_id]
        self._others = Placement(others, view.generation) if others else None
        if placement != self.placement:
            self.placement = placement
            for watcher in self._watchers:
                watcher(placement)

    async def leave(self) -> None:
        """Give the lease up (a clean stop): the others take over at once. A store out of
        reach only delays that until the lease passes, so a stop never fails on it."""
        await self.rounds.stop()
        if self.replaced:
            return
        try:
            await self.registry.leave(self.node_id, self.incarnation)
        except Exception as exc:
            log.warning(
                "could not give the node lease up (%s): the others take over when it passes, "
                "within %d ms",
                exc,
                self.lease_ms,
            )


def _addresses(node: ProxyNode) -> str:
    return ", ".join(f"{p}://{h}:{port}" for p, (h, port) in sorted(node.listeners.items()))
