"""This process as a node of a shareproxy cluster: it registers its node id (or leases
one) and advertised listeners in the store, renews its lease every third of its length, and
keeps the set of live nodes that placement (``core/placement.py``) decides from. An id whose
lease holds is not taken: the node waits for the lease to pass and refuses to start once its
holder renews it, unless told to replace it; a renewal refused because another process took
the id means this one was replaced: it must stop serving, and ``on_replaced`` is told why.
Every node derives the same placement (who leads each partition, who coordinates each group)
from the live set, and tells its watchers when it changes."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from uuid import UUID

from shareproxy.core.failures import BadInput
from shareproxy.core.nodes import ClusterView, NodeRegistry, ProxyNode, Renewal
from shareproxy.core.placement import BALANCED, PLACEMENT_RULE, Placement
from shareproxy.core.store import StoreUnavailable
from shareproxy.runtime.catalogue import Cataloguing
from shareproxy.runtime.jobs import Periodic
from shareproxy.telemetry.logs import STORE_OUTAGE, first_line

log = logging.getLogger(__name__)

# the share of the lease this node counts on, from the start of its last renewal: the others
# judge the lease by the store's clock, which may run a little faster than this one
LEASE_SAFETY = 0.9
# how often a node reads the store while it waits on another: for the one losing what it
# gained to let it go, or for the lease of the id it asked for to pass
POLL_S = 0.2


_NEVER = datetime.min.replace(tzinfo=UTC)  # a lease not read from the store: this node's own


@dataclass(frozen=True, slots=True)
class NodeAddress:
    """A node as an admin call passed on to it needs it: who it is and where it answers."""

    node_id: int
    described: str  # as messages name it
    admin_url: str | None  # None: it advertises no admin API


class NodeIdTaken(BadInput):
    """The node id is held by a live process, which renewed its lease while this one waited."""


class ClusterNodes:
    def __init__(
        self,
        registry: NodeRegistry,
        node_id: int | None,
        lease_ms: int,
        on_replaced: Callable[[str], None],
        clock: Callable[[], float] = time.monotonic,
        replace: bool = False,
    ) -> None:
        """``node_id`` None: lease the lowest free id when it joins; ``replace``: take the id
        over even from a live process."""
        self.registry = registry
        self.clock = clock
        self._held_until = 0.0  # by this process's clock: when its lease may have passed
        self.asked = node_id
        self.node_id = 0 if node_id is None else node_id  # the id leased, once joined
        self.replace = replace
        self.lease_ms = lease_ms
        self.on_replaced = on_replaced
        self.incarnation = uuid.uuid4().hex
        self.live: tuple[ProxyNode, ...] = ()
        self.listeners: Mapping[str, tuple[str, int]] = {}
        self.admin_url: str | None = None  # where this node's REST admin API answers the others
        self.replaced = False
        # until it joins, a node places everything on itself (it serves nothing yet)
        self.placement = Placement([node_id])  # type: ignore[list-item]  # None: no id leased yet
        # the newest placement every live node acts on: what this node gains in a newer one
        # it serves only once the node that had it has let it go (None: nothing settled yet)
        self.settled: Placement | None = None
        self._settling: asyncio.Task[None] | None = None
        self._others: Placement | None = None  # the placement without this node
        self._watchers: list[Callable[[Placement], None]] = []
        self.cataloguing = Cataloguing(registry, self._reread)
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
        """As ``_serves``, written out: asked for every partition of every fetch."""
        placement = self.placement
        if (
            placement.partition_leader(topic_id, partition) != self.node_id
            or not self.holds_lease()
        ):
            return False
        settled = self.settled
        return settled is placement or (
            settled is not None and settled.partition_leader(topic_id, partition) == self.node_id
        )

    def coordinates(self, group_id: str) -> bool:
        return self._serves(lambda p: p.group_coordinator(group_id))

    def coordinator_elsewhere(self, group_id: str) -> str | None:
        """The node clients are sent to for a group, as messages name it; None when that is
        this node itself (it may be unable to act on the group right now, but no other is)."""
        owner = self.serving().group_coordinator(group_id)
        return None if owner == self.node_id else self.describe(owner)

    def coordinator_admin(self, group_id: str) -> NodeAddress | None:
        """Where the node that coordinates a group answers REST calls: None when that is this
        node (it acts on the group itself, or answers why it cannot right now)."""
        return self._admin_of(self.serving().group_coordinator(group_id))

    def leader_admin(self, topic_id: UUID, partition: int) -> NodeAddress | None:
        """Where the node that leads a partition's share-partitions answers REST calls: None
        when that is this node."""
        return self._admin_of(self.serving().partition_leader(topic_id, partition))

    def _admin_of(self, owner: int) -> NodeAddress | None:
        if owner == self.node_id:
            return None
        node = self._node(owner)
        return NodeAddress(owner, self.describe(owner), node.admin_url if node else None)

    def peers(self) -> list[NodeAddress]:
        """The other live nodes, with where their admin APIs answer."""
        return [
            NodeAddress(n.node_id, self.describe(n.node_id), n.admin_url)
            for n in self.live
            if n.node_id != self.node_id
        ]

    def _node(self, node_id: int) -> ProxyNode | None:
        """This node as it registered, or a live one; None for a node not live."""
        if node_id == self.node_id:
            return ProxyNode(node_id, self.incarnation, self.listeners, _NEVER, 0, self.admin_url)
        return next((n for n in self.live if n.node_id == node_id), None)

    def _serves(self, owner: Callable[[Placement], int]) -> bool:
        """Owned now, under a lease that surely holds, and either settled or owned before
        too: two nodes never serve one partition or group at once, even while the one that
        is losing it has not yet read the change (a renewal later)."""
        if owner(self.placement) != self.node_id or not self.holds_lease():
            return False
        settled = self.settled
        return settled is self.placement or (settled is not None and owner(settled) == self.node_id)

    def describe(self, node_id: int) -> str:
        """A node as messages name it: its id, advertised listeners and admin API."""
        node = self._node(node_id)
        if node is None:
            return f"proxy node {node_id}"
        shown = [f"{p}://{h}:{port}" for p, (h, port) in sorted(node.listeners.items())]
        if node.admin_url:
            shown.append(f"admin API {node.admin_url}")
        return f"proxy node {node_id}" + (f" ({', '.join(shown)})" if shown else "")

    async def join(
        self, listeners: Mapping[str, tuple[str, int]], admin_url: str | None = None
    ) -> None:
        """Register with the listeners clients are told and the admin API address the other
        nodes pass REST calls on to (None: this node advertises none)."""
        self.listeners = dict(listeners)
        self.admin_url = admin_url
        waiting_on: ProxyNode | None = None
        while True:
            started = self.clock()
            registration = await self.registry.register(
                self.asked, self.incarnation, listeners, self.lease_ms, self.replace, admin_url
            )
            holder = registration.held_by
            if holder is None:
                break
            if waiting_on is None:
                waiting_on = holder
                log.info(
                    "node id %d is held by a lease that has not passed (%s): waiting for it to "
                    "pass, or for its process to renew it",
                    holder.node_id,
                    _addresses(holder),
                )
            elif holder.incarnation != waiting_on.incarnation or (
                holder.lease_expires_at > waiting_on.lease_expires_at
            ):
                raise NodeIdTaken(
                    f"--node-id {holder.node_id}: held by a live node, advertising "
                    f"{_addresses(holder)}; give each node its own --node-id (or --node-id "
                    "auto), or --replace-node to take it over"
                )
            await asyncio.sleep(POLL_S)
        self.node_id = registration.node_id
        self.placement = Placement([self.node_id])
        if registration.replaced is not None:
            log.warning(
                "node id %d was held by a live process (advertising %s): it is replaced and "
                "stops at its next lease renewal (--replace-node)",
                self.node_id,
                _addresses(registration.replaced),
                extra={"node": self.node_id, "replaced": registration.replaced.incarnation},
            )
        await self._see(await self.registry.live())
        self._held_from(started)  # from the start of a renewal whose view is now in force
        await self.catalogue()
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
            self.node_id,
            self.incarnation,
            self.listeners,
            self.lease_ms,
            self.placement.generation,
            self.admin_url,
        )
        if renewal is Renewal.REPLACED:
            self.replaced = True
            self._held_until = 0.0  # it serves nothing more while it stops
            self.live = ()
            self.on_replaced(
                f"node id {self.node_id} was registered by another process (--replace-node, "
                "or this one's lease had passed): this one stops"
            )
            return
        if renewal is Renewal.REJOINED:
            log.warning(
                "node %d had lost its lease (cut off from the store, or paused, for longer than "
                "--node-lease-ms): it joined again and reloads what it serves from the store",
                self.node_id,
            )
            self.settled = None  # what it had may be another node's now
            for watcher in self._lost:
                watcher()
        await self._see(await self.registry.live())
        self._held_from(started)
        await self.catalogue()

    async def catalogue(self, wait_s: float | None = None) -> None:
        """Bring the store's topic catalogue up to what this node's upstream metadata shows:
        after every renewal, and after every metadata read (waiting ``wait_s`` at most), so a
        client is first told a new topic's leaders as the catalogue places them; a store slow
        or out of reach only leaves them to rendezvous hashing meanwhile."""
        if not self.live:
            return
        if wait_s is None:
            await self.cataloguing.bring_up()
        elif self.holds_lease() and self.cataloguing.lacking():
            await self.cataloguing.within(wait_s)

    async def _reread(self) -> None:
        await self._see(await self.registry.live())

    async def _see(self, view: ClusterView) -> None:
        if view.generation < self.placement.generation:
            return  # an older view read concurrently with a newer one
        ids = [n.node_id for n in view.nodes]
        if ids != self.live_ids:
            log.info("live nodes changed", extra={"live_nodes": ids, "generation": view.generation})
        self.live = view.nodes
        # this node counts itself even when the store's view lacks it (its lease lapsed
        # while it was cut off): the others may already lead what it led, and the state
        # epoch fences whichever of them is behind
        # the oldest rule a live node knows: nodes of two builds place alike while a fleet
        # is upgraded one node at a time
        rule = min([PLACEMENT_RULE, *(n.placement_rule for n in view.nodes)])
        catalogue = view.topics if rule >= BALANCED else ()
        self.cataloguing.known = dict(view.topics)
        placement = Placement([*ids, self.node_id], view.generation, catalogue)
        others = [i for i in ids if i != self.node_id]
        self._others = Placement(others, view.generation, catalogue) if others else None
        if placement != self.placement:
            self.placement = placement
            for watcher in self._watchers:
                watcher(placement)
            try:  # the others wait for this before they take what it let go
                await self.registry.seen(self.node_id, self.incarnation, view.generation)
            except StoreUnavailable as exc:  # recorded with the next renewal
                STORE_OUTAGE.failed("recording the generation seen", first_line(exc))
            except Exception as exc:
                log.warning("recording the generation seen failed: %s", exc)
        if all(
            n.seen_generation >= view.generation for n in view.nodes if n.node_id != self.node_id
        ):
            self.settled = self.placement
        elif self._settling is None or self._settling.done():
            self._settling = asyncio.create_task(self._settle(), name="node-settle")

    async def _settle(self) -> None:
        """Read the live nodes often until all act on the newest generation, so what this
        node gains is served soon after the node that had it lets go (at its next renewal)."""
        deadline = self.clock() + self.lease_ms / 1000
        while self.settled is not self.placement and not self.replaced:
            if self.clock() > deadline:
                return  # the regular renewals go on reading
            await asyncio.sleep(POLL_S)
            try:
                await self._see(await self.registry.live())
            except StoreUnavailable as exc:
                STORE_OUTAGE.failed("reading the live nodes", first_line(exc))
            except Exception as exc:
                log.warning("reading the live nodes failed: %s", exc)

    async def leave(self) -> None:
        """Give the lease up (a clean stop): the others take over at once. A store out of
        reach only delays that until the lease passes, so a stop never fails on it."""
        await self.rounds.stop()
        await self.cataloguing.stop()
        if self._settling is not None:
            self._settling.cancel()
            await asyncio.gather(self._settling, return_exceptions=True)
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
