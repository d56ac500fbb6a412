"""Node leases on a real store (issue 19): a node is live while its lease holds; a process
registering a live node's id replaces it, and the replaced one learns so at its next renewal."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from shareproxy.broker.nodes import ClusterNodes
from shareproxy.persistence.engine import create_engine
from shareproxy.persistence.nodes import NodeRecords

HERE = {"PLAINTEXT": ("127.0.0.1", 9092)}


@pytest.fixture
async def registry(state_url: str) -> AsyncIterator[NodeRecords]:
    engine = create_engine(state_url)
    try:
        yield NodeRecords(engine)
    finally:
        await engine.dispose()


async def test_a_node_is_live_while_its_lease_holds(registry: NodeRecords):
    assert await registry.register(1, "a" * 32, HERE, 1_000) is None
    assert await registry.register(2, "b" * 32, {"SSL": ("h2", 9093)}, 60_000) is None
    [one, two] = await registry.live()
    assert (one.node_id, one.listeners, two.listeners) == (1, HERE, {"SSL": ("h2", 9093)})
    await asyncio.sleep(1.2)
    assert [n.node_id for n in await registry.live()] == [2]  # 1 did not renew
    assert await registry.renew(1, "a" * 32, 1_000)  # late, but nobody took the id: live again
    assert [n.node_id for n in await registry.live()] == [1, 2]


async def test_registering_a_live_id_replaces_it_and_the_old_process_is_told(
    registry: NodeRecords,
):
    told: list[str] = []
    old = ClusterNodes(registry, 1, 60_000, told.append)
    await old.join(HERE)
    try:
        new = ClusterNodes(registry, 1, 60_000, told.append)
        replaced = await registry.register(1, new.incarnation, HERE, 60_000)
        assert replaced is not None and replaced.incarnation == old.incarnation
        await old.renew()
        assert old.replaced and old.live == ()
        assert told and "node id 1" in told[0] and "--node-id" in told[0]
        assert [n.incarnation for n in await registry.live()] == [new.incarnation]
    finally:
        await old.leave()  # a replaced node leaves nothing: the new registration stays
    assert len(await registry.live()) == 1


async def test_a_clean_leave_ends_the_lease_at_once(registry: NodeRecords):
    node = ClusterNodes(registry, 7, 60_000, lambda why: None)
    await node.join(HERE)
    assert node.live_ids == [7]
    await node.leave()
    assert await registry.live() == []
