"""This process as a node of a shareproxy cluster (issue 19): it registers its node id and
advertised listeners in the store, renews its lease every third of its length, and keeps the
set of live nodes that placement (``core/placement.py``) decides from. A renewal refused because
another process registered the same id means this one was replaced: it must stop serving, and
``on_replaced`` is told why."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping

from shareproxy.broker.periodic import Periodic
from shareproxy.core.nodes import NodeRegistry, ProxyNode

log = logging.getLogger(__name__)


class ClusterNodes:
    def __init__(
        self,
        registry: NodeRegistry,
        node_id: int,
        lease_ms: int,
        on_replaced: Callable[[str], None],
    ) -> None:
        self.registry = registry
        self.node_id = node_id
        self.lease_ms = lease_ms
        self.on_replaced = on_replaced
        self.incarnation = uuid.uuid4().hex
        self.live: tuple[ProxyNode, ...] = ()
        self.replaced = False
        self.rounds = Periodic("node-lease", lease_ms / 3000, self.renew, "renewing the node lease")

    @property
    def live_ids(self) -> list[int]:
        return [n.node_id for n in self.live]

    async def join(self, listeners: Mapping[str, tuple[str, int]]) -> None:
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
        self.live = tuple(await self.registry.live())
        log.info(
            "node %d joined the cluster",
            self.node_id,
            extra={"node": self.node_id, "live_nodes": self.live_ids},
        )
        self.rounds.start()

    async def renew(self) -> None:
        if self.replaced:
            return
        if not await self.registry.renew(self.node_id, self.incarnation, self.lease_ms):
            self.replaced = True
            self.live = ()
            self.on_replaced(
                f"node id {self.node_id} was registered by another process: this one stops "
                "(give every node its own --node-id)"
            )
            return
        live = tuple(await self.registry.live())
        if [n.node_id for n in live] != self.live_ids:
            log.info("live nodes changed", extra={"live_nodes": [n.node_id for n in live]})
        self.live = live

    async def leave(self) -> None:
        await self.rounds.stop()
        if not self.replaced:
            await self.registry.leave(self.node_id, self.incarnation)


def _addresses(node: ProxyNode) -> str:
    return ", ".join(f"{p}://{h}:{port}" for p, (h, port) in sorted(node.listeners.items()))
