"""Node leases (``broker.nodes.ClusterNodes``) on the virtual clock: two nodes share the
partitions and groups; one cut off from the store stops serving before its lease can pass, the
other takes over once it has, and the first comes back as a new member that reloads what it
serves. Sampled every 10 ms through each change: no partition or group is ever served by two
nodes at once, and none is left unserved for longer than a lease."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime

from shareproxy.runtime.cluster import ClusterNodes
from tests.support import virtual_clock
from tests.support.memory_nodes import CutOff, MemoryNodes
from tests.support.virtual_clock import virtual_clock as on_virtual_clock

LEASE_MS = 3_000
HERE = {"PLAINTEXT": ("127.0.0.1", 9092)}
TOPIC = uuid.UUID("6a1f1c9e-2b57-4d8e-9a55-3c0b7f2d4e10")
PARTITIONS = range(32)
GROUPS = [f"g{i}" for i in range(16)]


def node(registry: CutOff, node_id: int, lost: list[int]) -> ClusterNodes:
    def replaced(reason: str) -> None:
        raise AssertionError(reason)

    nodes = ClusterNodes(registry, node_id, LEASE_MS, replaced, clock=virtual_clock.loop().time)
    nodes.on_lease_lost(lambda: lost.append(node_id))
    return nodes


def served(nodes: list[ClusterNodes]) -> tuple[dict[int, list[int]], dict[str, list[int]]]:
    """Which nodes lead each partition and coordinate each group, now."""
    partitions = {p: [n.node_id for n in nodes if n.leads(TOPIC, p)] for p in PARTITIONS}
    groups = {g: [n.node_id for n in nodes if n.coordinates(g)] for g in GROUPS}
    return partitions, groups


async def watch(nodes: list[ClusterNodes], seconds: float) -> list[float]:
    """Sample every 10 ms for ``seconds``: never two servers of one thing; the moments (loop
    time) at which something had none."""
    unserved = []
    for _ in range(int(seconds * 100)):
        partitions, groups = served(nodes)
        for owner in [*partitions.values(), *groups.values()]:
            assert len(owner) <= 1, (partitions, groups)
        if any(not owner for owner in [*partitions.values(), *groups.values()]):
            unserved.append(virtual_clock.loop().time())
        await asyncio.sleep(0.01)
    return unserved


@on_virtual_clock
async def test_a_node_cut_off_from_the_store_hands_over_without_two_ever_serving_one_thing():
    loop = virtual_clock.loop()
    registry = MemoryNodes(lambda: datetime.fromtimestamp(loop.clock_ms() / 1000, UTC))
    lost: list[int] = []
    a_view, b_view = registry.cut_off(), registry.cut_off()
    a, b = node(a_view, 1, lost), node(b_view, 2, lost)
    try:
        await a.join(HERE)
        await b.join(HERE)
        await watch([a, b], 3)
        partitions, groups = served([a, b])
        assert {tuple(o) for o in [*partitions.values(), *groups.values()]} == {(1,), (2,)}

        a_view.cut = True  # a cannot renew: b reaps its lease once it has passed
        cut_at = loop.time()
        unserved = await watch([a, b], 6)
        partitions, groups = served([a, b])
        assert all(o == [2] for o in [*partitions.values(), *groups.values()])
        # a let go before its lease could pass; b took over within a renewal of its passing
        assert unserved and max(unserved) - cut_at <= LEASE_MS / 1000 + 1.0 + 0.2
        assert lost == []

        a_view.cut = False  # a's lease was reaped: it joins again as a new member
        await watch([a, b], 4)
        assert lost == [1]  # it let go of all it had loaded, which b may have changed
        partitions, groups = served([a, b])
        assert {tuple(o) for o in [*partitions.values(), *groups.values()]} == {(1,), (2,)}
    finally:
        a_view.cut = False
        await a.leave()
        await b.leave()
    assert (await registry.live()).nodes == ()
