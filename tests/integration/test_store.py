"""The store's contract, on a real Postgres, on SQLite and on the middle tier's in-memory store
(which the runtime tests stand on, so it must keep the same rules): writes, folding, fencing,
reload, the archive log and membership. What only the SQL store does follows them."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import pytest
from sqlalchemy import text

from shareproxy.core.acknowledgement import AckBatch
from shareproxy.core.acquisition import BatchHeader
from shareproxy.core.errors import ErrorCode
from shareproxy.core.persisted import ArchivedRun, PersistedBatch, PersistedState, StateDelta
from shareproxy.core.share_partition import SharePartition
from shareproxy.core.states import ArchiveReason
from shareproxy.core.store import PartitionWrite, SharePartitionKey
from shareproxy.persistence import groups
from shareproxy.persistence.engine import create_engine
from shareproxy.persistence.repository import SqlShareStateStore
from tests.support.kip_tables import ACK, ARC, AV, pb
from tests.support.memory_store import MemoryStore
from tests.support.stores import migrated_url

TOPIC = uuid.UUID("9f2c1e4a-55e1-4f1b-a0a2-0c4e2d7b7d11")


@pytest.fixture(params=["postgres", "sqlite", "memory"])
def store_kind(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A migrated, empty SQL store's URL; or "memory"."""
    return "memory" if request.param == "memory" else migrated_url(request, request.param, tmp_path)


@pytest.fixture
async def store(store_kind: str) -> AsyncIterator[SqlShareStateStore | MemoryStore]:
    """An empty store of each kind, folding every 5 updates."""
    if store_kind == "memory":
        yield MemoryStore(fold_every=5)
        return
    engine = create_engine(store_kind)
    try:
        yield SqlShareStateStore(engine, fold_every=5)
    finally:
        await engine.dispose()


@pytest.fixture
async def sql_store(state_url: str) -> AsyncIterator[SqlShareStateStore]:
    engine = create_engine(state_url)
    try:
        yield SqlShareStateStore(engine, fold_every=5)
    finally:
        await engine.dispose()


def key(p: int = 0, group: str = "g1") -> SharePartitionKey:
    return SharePartitionKey(group, TOPIC, p)


async def test_a_redelivery_back_off_is_stored_folded_and_read_back(store: SqlShareStateStore):
    await store.initialize(key(), 0)
    deltas = [
        StateDelta(-1, (PersistedBatch(0, 9, AV, 1, 1_700_000_000_123),)),
        StateDelta(-1, (PersistedBatch(4, 5, AV, 2, 1_700_000_009_999),)),
    ] + [StateDelta(-1, (pb(10 + i, 10 + i, ACK, 1),)) for i in range(5)]  # past a fold
    model = PersistedState(0, [])
    for d in deltas:
        assert await store.write([PartitionWrite(key(), 0, d)]) == {key(): ErrorCode.NONE}
        model.apply(d)
    loaded = await store.read(key())
    assert loaded.snapshot_epoch == 1 and loaded.state == model
    assert loaded.state.batches[:3] == [
        PersistedBatch(0, 3, AV, 1, 1_700_000_000_123),
        PersistedBatch(4, 5, AV, 2, 1_700_000_009_999),
        PersistedBatch(6, 9, AV, 1, 1_700_000_000_123),
    ]


async def test_initialize_is_idempotent_and_records_the_group(store: SqlShareStateStore):
    first = await store.initialize(key(), 100)
    again = await store.initialize(key(), 999)  # an existing state is never overwritten
    assert first == again
    assert (first.state_epoch, first.state.start_offset, first.state.batches) == (0, 100, [])
    assert [g.group_id for g in await store.list_groups()] == ["g1"]
    assert await store.list_partitions("g1") == [key()]


async def test_claim_new_creates_then_fences_and_never_resets(store: SqlShareStateStore):
    """A leader's first load of a new share-partition, in one transaction: created at the
    start offset and claimed; on a state that exists (another node created it first), the
    state is kept and only the epoch moves on, fencing whoever held it."""
    first = await store.claim_new(key(), 100, "orders")
    assert (first.state_epoch, first.state.start_offset, first.state.batches) == (1, 100, [])
    assert [g.group_id for g in await store.list_groups()] == ["g1"]
    delta = StateDelta(-1, (pb(100, 104, ACK, 1),))
    assert await store.write([PartitionWrite(key(), 1, delta)]) == {key(): ErrorCode.NONE}
    again = await store.claim_new(key(), 999, "orders")
    assert (again.state_epoch, again.state.start_offset) == (2, 100)
    assert again.state.batches == [pb(100, 104, ACK, 1)]
    stale = PartitionWrite(key(), 1, StateDelta(-1, (pb(105, 105, ACK, 1),)))
    assert await store.write([stale]) == {key(): ErrorCode.FENCED_STATE_EPOCH}


async def test_writes_fold_into_snapshots_and_read_back_exactly(store: SqlShareStateStore):
    await store.initialize(key(), 0)
    model = PersistedState(0, [])
    deltas = [
        StateDelta(-1, (pb(0, 4, AV, 1),)),
        StateDelta(-1, (pb(2, 2, ACK, 1),)),
        StateDelta(-1, (pb(5, 9, AV, 0), pb(10, 10, ARC, 3))),
        StateDelta(3, ()),
        StateDelta(-1, (pb(3, 6, ACK, 2),)),
        StateDelta(-1, (pb(11, 11, AV, 2),)),
        StateDelta(7, (pb(8, 8, ACK, 1),)),
    ]
    for i, d in enumerate(deltas):
        assert await store.write([PartitionWrite(key(), 0, d)]) == {key(): ErrorCode.NONE}
        model.apply(d)
        loaded = await store.read(key())
        assert loaded.state == model, f"after delta {i}"
    # fold_every=5: one fold happened, so the snapshot epoch moved on
    assert (await store.read(key())).snapshot_epoch == 1
    assert model.start_offset == 7
    assert model.batches == [
        pb(7, 7, AV, 0),
        pb(8, 8, ACK, 1),
        pb(9, 9, AV, 0),
        pb(10, 10, ARC, 3),
        pb(11, 11, AV, 2),
    ]


async def test_a_stale_state_epoch_is_fenced_and_writes_nothing(store: SqlShareStateStore):
    await store.initialize(key(), 0)
    old_leader = await store.claim(key())
    new_leader = await store.claim(key())
    assert new_leader.state_epoch == old_leader.state_epoch + 1

    stale = PartitionWrite(key(), old_leader.state_epoch, StateDelta(-1, (pb(0, 0, ACK, 1),)))
    assert await store.write([stale]) == {key(): ErrorCode.FENCED_STATE_EPOCH}
    assert (await store.read(key())).state.batches == []

    fresh = PartitionWrite(key(), new_leader.state_epoch, StateDelta(-1, (pb(0, 0, AV, 1),)))
    assert await store.write([fresh]) == {key(): ErrorCode.NONE}
    assert (await store.read(key())).state.batches == [pb(0, 0, AV, 1)]


async def test_two_writers_racing_a_claim_never_both_win(store: SqlShareStateStore):
    """Writer A writes while B takes the partition over; A's write is either before B's claim
    (and B loads it) or fenced — never lost after B loaded."""
    await store.initialize(key(), 0)
    a = await store.claim(key())
    for i in range(20):
        delta = StateDelta(-1, (pb(i, i, ACK, 1),))
        write = store.write([PartitionWrite(key(), a.state_epoch, delta)])
        result, b = await asyncio.gather(write, store.claim(key()))
        if result[key()] == ErrorCode.NONE:
            assert pb(i, i, ACK, 1) in b.state.batches
        else:
            assert result[key()] == ErrorCode.FENCED_STATE_EPOCH
            assert pb(i, i, ACK, 1) not in b.state.batches
        # B fenced A: further writes by A fail
        late = PartitionWrite(key(), a.state_epoch, StateDelta(-1, (pb(i, i, ARC, 9),)))
        assert (await store.write([late]))[key()] == ErrorCode.FENCED_STATE_EPOCH
        a = b


async def test_several_deltas_for_one_partition_in_one_write_replay_in_order(
    store: SqlShareStateStore,
):
    """Group commit hands the store several deltas of one share-partition at once (and empty
    ones that only check the epoch); they must be stored in the order they were made."""
    await store.initialize(key(), 0)
    model = PersistedState(0, [])
    for round_ in range(4):  # crosses fold_every=5 twice
        base = round_ * 10
        deltas = [
            StateDelta(-1, (pb(base, base + 9, AV, 1),)),
            StateDelta(-1, ()),
            StateDelta(-1, (pb(base + 2, base + 2, ACK, 1),)),
            StateDelta(-1, (pb(base + 2, base + 2, ARC, 1),)),  # later wins
        ]
        writes = [PartitionWrite(key(), 0, d) for d in deltas]
        assert await store.write(writes) == {key(): ErrorCode.NONE}
        for d in deltas:
            model.apply(d)
        assert (await store.read(key())).state == model
    assert pb(32, 32, ARC, 1) in model.batches
    assert await store.write([PartitionWrite(key(), 0, StateDelta(-1, ()))]) == {
        key(): ErrorCode.NONE
    }


async def test_many_partitions_commit_in_one_transaction(store: SqlShareStateStore):
    keys = [key(p) for p in range(200)]
    for k in keys:
        await store.initialize(k, 10)
    fenced = await store.claim(keys[7])
    writes = [PartitionWrite(k, 0, StateDelta(-1, (pb(10, 19, AV, 1),))) for k in keys]
    writes.append(PartitionWrite(key(999), 0, StateDelta(11, ())))  # never initialized
    results = await store.write(writes)
    assert results[keys[7]] == ErrorCode.FENCED_STATE_EPOCH
    assert results[key(999)] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert sum(r == ErrorCode.NONE for r in results.values()) == 199
    assert (await store.read(keys[7])).state.batches == []
    assert fenced.state_epoch == 1
    for k in (keys[0], keys[199]):
        assert (await store.read(k)).state.batches == [pb(10, 19, AV, 1)]


async def test_reset_and_delete(store: SqlShareStateStore):
    await store.initialize(key(), 0)
    await store.write([PartitionWrite(key(), 0, StateDelta(-1, (pb(0, 3, ACK, 1),)))])
    reset = await store.reset(key(), 50)
    assert (reset.state_epoch, reset.state.start_offset, reset.state.batches) == (1, 50, [])
    stale = PartitionWrite(key(), 0, StateDelta(60, ()))
    assert await store.write([stale]) == {key(): ErrorCode.FENCED_STATE_EPOCH}
    assert await store.delete([key(), key(5)]) == 1
    assert await store.read(key()) is None
    assert await store.claim(key()) is None


async def test_state_epochs_tell_a_leader_its_state_was_replaced(store: SqlShareStateStore):
    keys = [key(p) for p in range(3)]
    for k in keys:
        await store.initialize(k, 0)
    held = {k: (await store.claim(k)).state_epoch for k in keys}  # a proxy's leaders
    await store.reset(keys[1], 40)  # a batch repair elsewhere
    await store.delete([keys[2]])
    stored = await store.state_epochs(keys)
    assert [k for k in keys if stored.get(k) != held[k]] == keys[1:]
    assert stored == {keys[0]: 1, keys[1]: 2}
    many = [key(p) for p in range(1200)]  # past one IN list
    assert set(await store.state_epochs(many)) == {keys[0], keys[1]}


async def test_group_configs_are_merged_and_removed(store: SqlShareStateStore):
    await store.set_group_configs("g2", {"share.record.lock.duration.ms": "15000"})
    group = await store.set_group_configs(
        "g2", {"share.delivery.count.limit": "3", "share.record.lock.duration.ms": None}
    )
    assert dict(group.configs) == {"share.delivery.count.limit": "3"}
    assert (await store.get_group("g2")).configs == {"share.delivery.count.limit": "3"}
    assert await store.get_group("nope") is None


async def test_a_push_is_kept_with_its_group_and_goes_with_it(store: SqlShareStateStore):
    """Set (True: the group had none), changed, read back, removed; every change raises the
    configs version that tells the other nodes; deleting the group deletes its push."""
    before = await store.configs_version()
    spec = {"url": "https://hooks.example.com/in", "topics": ["orders"], "authorization": "x"}
    assert await store.set_push("pg", spec) is True
    assert await store.get_group("pg") is not None  # the group is created with it
    assert await store.set_push("pg", {**spec, "max_in_flight": 4}) is False
    assert (await store.pushes())["pg"] == {**spec, "max_in_flight": 4}
    assert await store.configs_version() == before + 2
    assert await store.remove_push("pg") is True
    assert await store.remove_push("pg") is False
    assert "pg" not in await store.pushes()
    await store.set_push("pg", spec)
    assert await store.delete_group("pg")
    assert await store.pushes() == {}


async def test_engine_state_survives_a_restart_through_the_store(store: SqlShareStateStore):
    """The engine's deltas written to the store rebuild the same engine state."""
    sp, init = SharePartition.initialized(0)
    loaded = await store.initialize(key(), init.start_offset)
    epoch = (await store.claim(key())).state_epoch
    assert loaded.state.start_offset == 0
    log = [BatchHeader(0, 49), BatchHeader(50, 99)]
    sp.acquire("m1", log, now_ms=0, max_records=30)
    sp.acquire("m2", log, now_ms=0, max_records=500)
    deltas = [
        sp.acknowledge("m1", [AckBatch(0, 9, (1,)), AckBatch(20, 29, (2,))], now_ms=1),
        sp.acknowledge("m2", [AckBatch(60, 61, (3,)), AckBatch(70, 72, (1, 2, 1))], now_ms=1),
        sp.expire_locks(now_ms=10**9),
    ]
    for d in deltas:
        result = await store.write([PartitionWrite(key(), epoch, d)])
        assert result == {key(): ErrorCode.NONE}
    stored = (await store.read(key())).state
    assert stored.canonical() == sp.persisted_view().canonical()
    reloaded = SharePartition.from_persisted(stored)
    assert reloaded.spso == sp.spso == 10
    assert reloaded.persisted_view().canonical() == sp.persisted_view().canonical()


async def _archive_some(store: SqlShareStateStore | MemoryStore) -> None:
    """Writes that archive records, then one fenced write that must log nothing."""
    await store.initialize(key(), 0, "orders")
    claimed = await store.claim(key())
    epoch = claimed.state_epoch
    writes = [
        (StateDelta(-1, (pb(0, 2, ACK, 1), pb(3, 3, ARC, 5))), (ArchivedRun(3, 3, 5, LIMIT),)),
        # rejected on its first delivery
        (StateDelta(-1, (pb(7, 7, ARC, 1),)), (ArchivedRun(7, 7, 1, REJECTED),)),
        # SPSO moved past them; 3 again
        (StateDelta(10, ()), (ArchivedRun(8, 9, 5, LIMIT), ArchivedRun(3, 3, 5, LIMIT))),
    ]
    for d, archived in writes:
        w = PartitionWrite(key(), epoch, d, archived)
        assert await store.write([w]) == {key(): ErrorCode.NONE}
    fenced = PartitionWrite(
        key(), epoch - 1, StateDelta(-1, (pb(10, 10, ARC, 5),)), (ArchivedRun(10, 10, 5, LIMIT),)
    )
    assert await store.write([fenced]) == {key(): ErrorCode.FENCED_STATE_EPOCH}


LIMIT, REJECTED = ArchiveReason.DELIVERY_LIMIT, ArchiveReason.REJECTED
# what _archive_some leaves in the archive log: nothing of the fenced write
ARCHIVED = [(3, 3, 5, LIMIT), (7, 7, 1, REJECTED), (8, 9, 5, LIMIT)]


async def test_archived_records_that_were_delivered_are_logged_with_the_state(
    store: SqlShareStateStore,
):
    await _archive_some(store)
    page = await store.archived_page("g1", None, 0, 100)
    assert [(e.first_offset, e.last_offset, e.delivery_count, e.reason) for e in page] == ARCHIVED
    assert [e.first_offset for e in await store.archived_page("g1", [key()], 8, 100)] == [8]
    await store.delete([key()])
    assert await store.archived_page("g1", None, 0, 100) == []


async def test_a_rejection_is_explained_only_for_a_record_rejected_alone(
    store: SqlShareStateStore,
):
    await _archive_some(store)
    assert not await store.explain_rejection(key(), 3, "rejected: HTTP 400")  # the limit
    assert not await store.explain_rejection(key(), 8, "rejected: HTTP 400")  # not alone
    assert await store.explain_rejection(key(), 7, "rejected: HTTP 422")
    reasons = {e.first_offset: e.reason for e in await store.archived_page("g1", None, 0, 100)}
    assert reasons == {3: LIMIT, 7: "rejected: HTTP 422", 8: LIMIT}


async def test_a_redrive_claims_archived_offsets_once_and_a_release_frees_them(
    store: SqlShareStateStore,
):
    from shareproxy.core.redrive import Selection

    await _archive_some(store)
    [dry] = await store.claim_redrive([Selection(key(), 8, 8)], dry_run=True, max_records=10)
    assert (dry.redrive, dry.already, dry.missing) == ([(8, 8)], [], [])
    [p] = await store.claim_redrive([Selection(key(), 8, 8)], dry_run=False, max_records=10)
    assert p.redrive == [(8, 8)]
    [again] = await store.claim_redrive([Selection(key())], dry_run=False, max_records=10)
    assert (again.redrive, again.already) == ([(3, 3), (7, 7), (9, 9)], [(8, 8)])
    page = await store.archived_page("g1", None, 0, 100)
    assert [(e.first_offset, e.last_offset, e.redriven_at is not None) for e in page] == [
        (3, 3, True),
        (7, 7, True),
        (8, 8, True),
        (9, 9, True),
    ]
    await store.release_redrive(key(), [(8, 9)])
    [freed] = await store.claim_redrive([Selection(key(), 0, 9)], dry_run=True, max_records=10)
    assert freed.redrive == [(8, 9)] and freed.missing == [(0, 2), (4, 6)]


async def test_the_batch_scans_read_the_archive_log_and_the_state(sql_store: SqlShareStateStore):
    store = sql_store
    await _archive_some(store)
    logged = [
        (a.first_offset, a.last_offset, a.delivery_count, a.reason)
        for a in await store.archived(["g1"])
    ]
    assert logged == ARCHIVED
    [stored] = await store.scan(["g1"])
    assert (stored.key, stored.topic_name) == (key(), "orders")
    assert stored.loaded == await store.read(key())
    await store.delete([key()])
    assert await store.archived(["g1"]) == []


async def test_membership_moves_only_on_change_and_marks_the_group_empty(
    store: SqlShareStateStore,
):
    from datetime import UTC, datetime, timedelta

    t0 = datetime(2026, 11, 1, tzinfo=UTC)
    await store.ensure_group("g1")  # the coordinator creates the group, then records
    await store.record_membership("g1", ["b", "a"], t0)
    await store.record_membership("g1", ["a", "b"], t0 + timedelta(hours=1))  # same set
    [m] = await store.memberships()
    assert (m.subscribed_topics, m.subscription_changed_at, m.empty_since) == (("a", "b"), t0, None)
    await store.record_membership("g1", ["a"], t0 + timedelta(hours=2))
    await store.record_membership("g1", [], t0 + timedelta(hours=3))
    [m] = await store.memberships()
    assert m.subscribed_topics == ()
    assert m.empty_since == t0 + timedelta(hours=3)
    await store.record_membership("g1", ["a"], t0 + timedelta(hours=4))  # a member is back
    [m] = await store.memberships()
    assert (m.subscribed_topics, m.empty_since) == (("a",), None)


async def test_a_group_is_deleted_as_empty_only_if_still_empty_since_the_moment_judged(
    store: SqlShareStateStore,
):
    """What expiry and the reconcile job rely on: a member that joined (through any proxy)
    after the decision keeps the group; otherwise the group goes with its state."""
    from datetime import UTC, datetime, timedelta

    t0 = datetime(2026, 11, 1, tzinfo=UTC)
    await store.ensure_group("g1")
    await store.record_membership("g1", ["orders"], t0)
    await store.record_membership("g1", [], t0 + timedelta(hours=1))
    await store.initialize(key(), 0, "orders")
    [judged] = await store.memberships()
    await store.record_membership("g1", ["orders"], t0 + timedelta(hours=2))  # joined again
    await store.record_membership("g1", [], t0 + timedelta(hours=3))  # and left again
    assert not await store.delete_group("g1", judged.empty_since)
    assert await store.read(key()) is not None
    [now] = await store.memberships()
    assert await store.delete_group("g1", now.empty_since)
    assert await store.read(key()) is None
    assert await store.memberships() == []


async def test_membership_is_not_recorded_for_a_group_the_store_no_longer_has(
    store: SqlShareStateStore,
):
    from datetime import UTC, datetime

    await store.record_membership("gone", ["a"], datetime(2026, 11, 1, tzinfo=UTC))
    assert await store.memberships() == []


async def test_a_group_deleted_while_ensured_is_created_again(postgres, monkeypatch):
    """HTTP consumption ensures its group exists while an admin may delete it: a delete that
    commits between the insert (the row was there) and the read back leaves the group created
    again, as if the delete had come first, never a missing row."""
    url = postgres.create_database(f"t{uuid.uuid4().hex[:8]}", "template_migrated")
    engine, other = create_engine(url), create_engine(url)
    store = SqlShareStateStore(engine)
    await store.ensure_group("g1")
    read_back = groups._group
    deleted = []

    async def deleted_first(conn, group_id, for_update=False):
        if not deleted:  # another transaction deletes the group and commits, right now
            async with other.begin() as c:
                await c.execute(text("DELETE FROM share_groups WHERE group_id = 'g1'"))
            deleted.append(group_id)
        return await read_back(conn, group_id, for_update)

    monkeypatch.setattr(groups, "_group", deleted_first)
    try:
        record = await store.ensure_group("g1")
        assert deleted == ["g1"] and record.group_id == "g1"
        assert await store.get_group("g1") is not None
    finally:
        await other.dispose()
        await engine.dispose()


async def test_a_group_deleted_while_its_share_partition_is_created_is_none(postgres, monkeypatch):
    """A load creates a new share-partition's state while an admin may delete the group: a
    delete that commits between the group's insert (the row was there) and the snapshot's
    makes the claim None, and the load starts over; nothing is left half made."""
    url = postgres.create_database(f"t{uuid.uuid4().hex[:8]}", "template_migrated")
    engine, other = create_engine(url), create_engine(url)
    store = SqlShareStateStore(engine)
    await store.ensure_group("g1")
    execute = asyncpg.Connection.execute
    deleted = []

    async def deleted_after_the_group_insert(self, query, *args, **kwargs):
        done = await execute(self, query, *args, **kwargs)
        if query.startswith("INSERT INTO share_groups") and not deleted:
            async with other.begin() as c:  # another transaction, committed right now
                await c.execute(text("DELETE FROM share_groups WHERE group_id = 'g1'"))
            deleted.append(args[0])
        return done

    monkeypatch.setattr(asyncpg.Connection, "execute", deleted_after_the_group_insert)
    try:
        assert await store.claim_new(key(), 5, "orders") is None
        assert deleted == ["g1"]
        assert await store.read(key()) is None and await store.get_group("g1") is None
        monkeypatch.undo()
        claimed = await store.claim_new(key(), 5, "orders")  # the load's next try
        assert claimed is not None and claimed.state_epoch == 1
        assert claimed.state.start_offset == 5
    finally:
        await other.dispose()
        await engine.dispose()


async def test_state_this_build_cannot_read_is_not_claimed(postgres):
    """A state written by a newer build (a rolling upgrade) that this one cannot read fails
    the claim without taking the state epoch: its current leader is not fenced by a node
    that cannot lead it."""
    url = postgres.create_database(f"t{uuid.uuid4().hex[:8]}", "template_migrated")
    engine = create_engine(url)
    store = SqlShareStateStore(engine)
    try:
        assert (await store.claim_new(key(), 0, "orders")).state_epoch == 1
        async with engine.begin() as c:
            await c.execute(text("UPDATE share_snapshots SET state_batches = '[[0, 4, 99, 1]]'"))
        with pytest.raises(KeyError):
            await store.claim(key())
        assert await store.state_epochs([key()]) == {key(): 1}
    finally:
        await engine.dispose()


async def test_writes_past_the_pools_size_close_their_connections_cleanly(postgres, caplog):
    """Writes at once on more connections than the pool keeps: each connection past its size
    is closed when handed back, which on asyncpg awaits; done outside a greenlet it failed,
    logged a traceback and left the connection open."""
    url = postgres.create_database(f"t{uuid.uuid4().hex[:8]}", "template_migrated")
    engine = create_engine(url, pool_size=1, max_overflow=4)
    store = SqlShareStateStore(engine)
    keys = [key(p) for p in range(5)]
    try:
        for k in keys:
            await store.initialize(k, 10)
        caplog.set_level(logging.ERROR, logger="sqlalchemy.pool")
        writes = [[PartitionWrite(k, 0, StateDelta(-1, (pb(10, 19, AV, 1),)))] for k in keys]
        results = await asyncio.gather(*(store.write(w) for w in writes))
        assert all(r[k] == ErrorCode.NONE for r, k in zip(results, keys, strict=True))
        assert [r.getMessage() for r in caplog.records if r.name.startswith("sqlalchemy")] == []
        assert engine.pool.checkedout() == 0
        for k in keys:
            assert (await store.read(k)).state.batches == [pb(10, 19, AV, 1)]
    finally:
        await engine.dispose()
