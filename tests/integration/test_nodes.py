"""Node leases on a real store: a node is live while its lease holds; a process does
not take a live node's id unless told to replace it (the replaced one learns so at its next
renewal); an id may be leased, the lowest free one."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from uuid import UUID, uuid4

import pytest

from shareproxy.core.nodes import Registration, Renewal
from shareproxy.core.placement import Placement
from shareproxy.persistence.engine import create_engine
from shareproxy.persistence.nodes import NodeRecords
from shareproxy.runtime.cluster import ClusterNodes, NodeIdTaken

HERE = {"PLAINTEXT": ("127.0.0.1", 9092)}


@pytest.fixture
async def registry(state_url: str) -> AsyncIterator[NodeRecords]:
    engine = create_engine(state_url)
    try:
        yield NodeRecords(engine)
    finally:
        await engine.dispose()


async def ids(registry: NodeRecords) -> list[int]:
    return [n.node_id for n in (await registry.live()).nodes]


async def test_a_node_is_live_while_its_lease_holds_and_every_change_is_a_new_generation(
    registry: NodeRecords,
):
    assert await registry.register(1, "a" * 32, HERE, 1_000) == Registration(1)
    assert await registry.register(2, "b" * 32, {"SSL": ("h2", 9093)}, 60_000) == Registration(2)
    view = await registry.live()
    [one, two] = view.nodes
    assert (one.node_id, one.listeners, two.listeners) == (1, HERE, {"SSL": ("h2", 9093)})
    assert await registry.renew(2, "b" * 32, {}, 60_000) is Renewal.RENEWED
    assert (await registry.live()).generation == view.generation  # nothing changed
    await asyncio.sleep(1.2)
    lapsed = await registry.live()
    assert [n.node_id for n in lapsed.nodes] == [2]  # 1 did not renew: reaped, once
    assert lapsed.generation == view.generation + 1 == (await registry.live()).generation
    # back after its lease was reaped: it joins again, a new generation
    assert await registry.renew(1, "a" * 32, HERE, 1_000) is Renewal.REJOINED
    back = await registry.live()
    assert [n.node_id for n in back.nodes] == [1, 2] and back.generation == lapsed.generation + 1
    await registry.leave(2, "b" * 32)
    assert (await registry.live()).generation == back.generation + 1


async def test_a_live_id_is_refused_unless_replaced_and_the_replaced_process_is_told(
    registry: NodeRecords,
):
    told: list[str] = []
    old = ClusterNodes(registry, 1, 60_000, told.append)
    await old.join(HERE)
    try:
        new = ClusterNodes(registry, 1, 60_000, told.append)
        refused = await registry.register(1, new.incarnation, HERE, 60_000)
        assert refused.held_by is not None and refused.held_by.incarnation == old.incarnation
        await old.renew()
        assert not old.replaced  # refused: nothing changed
        taken = await registry.register(1, new.incarnation, HERE, 60_000, replace=True)
        assert taken.replaced is not None and taken.replaced.incarnation == old.incarnation
        await old.renew()
        assert old.replaced and old.live == ()
        assert told and "node id 1" in told[0] and "--replace-node" in told[0]
        assert [n.incarnation for n in (await registry.live()).nodes] == [new.incarnation]
    finally:
        await old.leave()  # a replaced node leaves nothing: the new registration stays
    assert await ids(registry) == [1]


async def test_a_joining_node_refuses_a_renewed_id_and_takes_one_whose_process_is_gone(
    registry: NodeRecords, caplog: pytest.LogCaptureFixture
):
    holder = ClusterNodes(registry, 1, 1_000, lambda why: None)
    await holder.join(HERE)  # renews every third of a second
    try:
        started = asyncio.get_running_loop().time()
        with pytest.raises(NodeIdTaken, match=r"--node-id 1: held by a live node, advertising "):
            await ClusterNodes(registry, 1, 1_000, lambda why: None).join(HERE)
        assert asyncio.get_running_loop().time() - started < 1.0  # within a renewal or so
        assert [n.incarnation for n in (await registry.live()).nodes] == [holder.incarnation]
        await holder.rounds.stop()  # its process is gone: no renewal, no leave
        caplog.clear()
        restarted = ClusterNodes(registry, 1, 1_000, lambda why: None)
        await restarted.join(HERE)  # once the lease passed, without being told to replace
        assert not [r for r in caplog.records if r.levelname == "WARNING"], caplog.text
        assert [n.incarnation for n in (await registry.live()).nodes] == [restarted.incarnation]
        await restarted.leave()
    finally:
        await holder.leave()


async def test_leased_ids_are_the_lowest_free_and_never_shared(registry: NodeRecords):
    assert await registry.register(2, "f" * 32, HERE, 60_000) == Registration(2)
    if registry.engine.dialect.name == "postgresql":  # SQLite: one writer at a time anyway
        leased = await asyncio.gather(
            *(registry.register(None, str(i) * 32, HERE, 60_000) for i in range(4))
        )
    else:
        leased = [await registry.register(None, str(i) * 32, HERE, 60_000) for i in range(4)]
    assert sorted(r.node_id for r in leased) == [1, 3, 4, 5]
    assert await ids(registry) == [1, 2, 3, 4, 5]
    node = ClusterNodes(registry, None, 60_000, lambda why: None)
    await node.join(HERE)
    try:
        assert node.node_id == 6 and node.live_ids == [1, 2, 3, 4, 5, 6]
    finally:
        await node.leave()


async def test_a_clean_leave_ends_the_lease_at_once(registry: NodeRecords):
    node = ClusterNodes(registry, 7, 60_000, lambda why: None)
    await node.join(HERE)
    assert node.live_ids == [7]
    await node.leave()
    assert await ids(registry) == []


async def test_nodes_agree_on_the_placement_and_a_node_takes_over_only_what_was_let_go(
    registry: NodeRecords,
):
    seen: list[Placement] = []
    one = ClusterNodes(registry, 1, 60_000, lambda why: None)
    one.on_change(seen.append)
    two = ClusterNodes(registry, 2, 60_000, lambda why: None)
    topic = UUID(int=42)
    await one.join(HERE)
    await one.rounds.stop()  # renewals by hand: the order of events is the test
    try:
        assert all(one.leads(topic, p) for p in range(40))  # alone, it leads everything
        await two.join({"PLAINTEXT": ("127.0.0.1", 9093)})
        await two.rounds.stop()
        # node 2 is placed about half, but node 1 has not read the change yet: node 2 serves
        # none of it, and node 1 still serves all of it (never both)
        assert two.placement.nodes == (1, 2) and one.placement.nodes == (1,)
        assert not any(two.leads(topic, p) for p in range(40))
        assert all(one.leads(topic, p) for p in range(40))
        await one.renew()  # node 1 reads the change, lets go of node 2's share, and says so
        assert one.placement == two.placement and seen[-1] is one.placement
        assert {one.placement.partition_leader(topic, p) for p in range(40)} == {1, 2}
        await two.renew()  # node 2 reads that node 1 has let go
        for p in range(40):
            assert one.leads(topic, p) != two.leads(topic, p)
        assert one.endpoint(2, "PLAINTEXT") == ("127.0.0.1", 9093)
        assert one.endpoint(2, "SSL") is None and one.endpoint(3, "PLAINTEXT") is None
        await two.leave()
        await one.renew()
        assert one.placement.nodes == (1,) and seen[-1].generation > seen[-2].generation
        assert all(one.leads(topic, p) for p in range(40)) and one.coordinates("any")
    finally:
        await one.leave()


async def test_a_node_serves_only_while_its_lease_surely_holds_and_reloads_after_a_lapse(
    registry: NodeRecords,
):
    now = [100.0]
    lost: list[bool] = []
    node = ClusterNodes(registry, 1, 1_000, lambda why: None, clock=lambda: now[0])
    node.on_lease_lost(lambda: lost.append(True))
    topic = UUID(int=7)
    assert not node.leads(topic, 0)  # nothing before it joins
    await node.join(HERE)
    await node.rounds.stop()  # renewed by hand below, as if the process were paused
    try:
        assert node.holds_lease() and node.leads(topic, 0) and node.coordinates("g")
        now[0] += 0.95  # past the share of the lease it counts on: it stops serving
        assert not node.holds_lease() and not node.leads(topic, 0) and not node.coordinates("g")
        assert node.coordinator_elsewhere("g") is None  # alone: nobody else to send clients to
        await node.renew()
        assert node.holds_lease() and node.leads(topic, 0) and lost == []
        await asyncio.sleep(1.1)  # the store's clock: the lease passes and another node reaps it
        other = ClusterNodes(registry, 2, 60_000, lambda why: None)
        await other.join({"PLAINTEXT": ("127.0.0.1", 9093)})
        assert other.live_ids == [2]
        await node.renew()  # back: it joins again, and what it had loaded is let go
        assert lost == [True] and node.holds_lease()
        await other.leave()
    finally:
        await node.leave()


async def test_a_node_stalled_inside_a_transaction_does_not_hold_its_row_locks(postgres):
    """A node paused mid-transaction (SIGSTOP, a long stall) would block the nodes taking its
    partitions over on its row locks for as long as it sleeps: Postgres ends the session once
    its transaction sits idle for IDLE_IN_TRANSACTION_MS, and the locks go with it."""
    from sqlalchemy import text

    from shareproxy.persistence.engine import IDLE_IN_TRANSACTION_MS, STORE_FAILURES

    engine = create_engine(postgres.create_database(f"stalled_{uuid4().hex[:8]}"))
    try:
        stalled = await engine.connect()
        await stalled.begin()
        await stalled.execute(text("SELECT pg_advisory_xact_lock(42)"))  # held, then silence
        loop = asyncio.get_running_loop()
        started = loop.time()
        async with engine.connect() as other:
            await other.execute(text("SELECT pg_advisory_xact_lock(42)"))
            waited = loop.time() - started
            await other.rollback()
        assert IDLE_IN_TRANSACTION_MS / 1000 - 0.5 < waited < IDLE_IN_TRANSACTION_MS / 1000 + 5
        with pytest.raises(STORE_FAILURES):  # its session was ended
            await stalled.execute(text("SELECT 1"))
        await stalled.invalidate()
    finally:
        await engine.dispose()


async def test_each_node_tells_the_others_where_its_admin_api_answers(registry: NodeRecords):
    one = ClusterNodes(registry, 1, 1_000, lambda why: None)
    two = ClusterNodes(registry, 2, 60_000, lambda why: None)
    await one.join(HERE, "http://node-1:8080")
    await one.rounds.stop()  # renewals by hand
    await two.join({"PLAINTEXT": ("127.0.0.1", 9093)}, "http://node-2:8081")
    await two.rounds.stop()
    try:
        await one.renew()
        assert {n.node_id: n.admin_url for n in one.live} == {
            1: "http://node-1:8080",
            2: "http://node-2:8081",
        }
        groups = [f"g{i}" for i in range(40)]
        theirs = [g for g in groups if one.placement.group_coordinator(g) == 2]
        mine = [g for g in groups if one.placement.group_coordinator(g) == 1]
        assert theirs and mine
        assert all(one.coordinator_admin(g) is None for g in mine)
        away = one.coordinator_admin(theirs[0])
        assert away is not None and (away.node_id, away.admin_url) == (2, "http://node-2:8081")
        assert away.described == (
            "proxy node 2 (PLAINTEXT://127.0.0.1:9093, admin API http://node-2:8081)"
        )
        # a node whose lease was reaped registers its admin address again when it comes back
        await asyncio.sleep(1.2)
        await two.renew()
        assert [n.node_id for n in two.live] == [2]
        await one.renew()
        assert {n.node_id: n.admin_url for n in two.live} == {2: "http://node-2:8081"}
        await two.renew()
        assert {n.node_id: n.admin_url for n in two.live}[1] == "http://node-1:8080"
    finally:
        await two.leave()
        await one.leave()


def _ids(*ints: int) -> list[UUID]:
    return [UUID(int=i) for i in ints]


async def test_the_topic_catalogue_keeps_entry_order_grows_and_keeps_deleted_ids_out(
    registry: NodeRecords,
):
    a, b, c, d = _ids(1, 2, 3, 4)
    start = await registry.live()
    assert start.topics == ()
    assert await registry.catalogue({b: 3, a: 2}, [])  # one change: entered by id
    first = await registry.live()
    assert first.topics == ((a, 2), (b, 3)) and first.generation == start.generation + 1
    assert await registry.catalogue({c: 1, a: 2}, [])
    assert (await registry.live()).topics == ((a, 2), (b, 3), (c, 1))  # entered at the end
    unchanged = (await registry.live()).generation
    assert not await registry.catalogue({a: 1, c: 1}, [])  # counts only grow
    assert (await registry.live()).generation == unchanged
    assert await registry.catalogue({a: 4}, [])  # a partition added: its place is kept
    assert (await registry.live()).topics == ((a, 4), (b, 3), (c, 1))
    assert await registry.catalogue({}, [b])  # deleted upstream
    assert (await registry.live()).topics == ((a, 4), (c, 1))
    # a node whose metadata is older shows it, and one deleted before it ever entered
    assert not await registry.catalogue({b: 3}, [])
    assert not await registry.catalogue({}, [d])
    assert not await registry.catalogue({d: 2}, [])
    assert (await registry.live()).topics == ((a, 4), (c, 1))


async def test_nodes_adding_one_topic_at_once_enter_it_once_and_read_one_catalogue(
    state_url: str,
):
    engines = [create_engine(state_url) for _ in range(2)]
    try:
        one, two = (NodeRecords(e) for e in engines)
        [t] = _ids(7)
        await one.live()  # read (and remembered) before the other node changes it
        changed = await asyncio.gather(one.catalogue({t: 3}, []), two.catalogue({t: 3}, []))
        assert True in changed
        views = [await one.live(), await two.live()]
        assert views[0] == views[1] and views[0].topics == ((t, 3),)
    finally:
        for engine in engines:
            await engine.dispose()


async def test_nodes_spread_catalogued_topics_evenly_and_place_by_the_oldest_rule_live(
    registry: NodeRecords, state_url: str
):
    topics = {UUID(int=100 + i): 6 for i in range(4)}
    upstream: tuple[dict[UUID, int], list[UUID]] = (topics, [])
    one = ClusterNodes(registry, 1, 60_000, lambda why: None)
    two = ClusterNodes(registry, 2, 60_000, lambda why: None)
    for node, port in ((one, 9092), (two, 9093)):
        node.cataloguing.source = lambda: upstream
        await node.join({"PLAINTEXT": ("127.0.0.1", port)})
        await node.rounds.stop()
    try:
        await one.renew()
        await two.renew()
        assert one.placement == two.placement and one.placement.catalogue == tuple(
            sorted(topics.items(), key=lambda item: item[0].bytes)
        )
        for t in topics:  # three partitions of each on each node
            assert (
                sorted(one.placement.partition_leader(t, p) for p in range(6)) == [1] * 3 + [2] * 3
            )
            assert sum(one.leads(t, p) for p in range(6)) == sum(two.leads(t, p) for p in range(6))
        # a node of an older build joins: every node places by rendezvous hashing again
        older = ClusterNodes(registry, 3, 60_000, lambda why: None)
        await older.join({"PLAINTEXT": ("127.0.0.1", 9094)})
        await older.rounds.stop()
        await _placement_rule(state_url, 3, 1)
        await one.renew()
        assert one.placement.catalogue == () and one.placement.nodes == (1, 2, 3)
        await older.leave()
        await one.renew()
        assert len(one.placement.catalogue) == len(topics)
    finally:
        await one.leave()
        await two.leave()


async def _placement_rule(state_url: str, node_id: int, rule: int) -> None:
    """Register a node as a build that knows only ``rule`` would (builds before the column
    get its default, 1)."""
    from sqlalchemy import update

    from shareproxy.persistence.tables import proxy_nodes

    engine = create_engine(state_url)
    try:
        async with engine.begin() as conn:
            await conn.execute(
                update(proxy_nodes)
                .where(proxy_nodes.c.node_id == node_id)
                .values(placement_rule=rule)
            )
    finally:
        await engine.dispose()
