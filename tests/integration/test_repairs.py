"""The reconcile job's repairs on a real store: each fenced so a running proxy is never
corrupted, each re-checked on the state it holds. The records-lost repair is tested here on
its own because the test broker (Tansu) cannot move a log start (no DeleteRecords, no
retention); the job's end-to-end tests cover the other drifts against the broker."""

from __future__ import annotations

import uuid

from shareproxy.batch import repair
from shareproxy.core.drift import Drift, Finding
from shareproxy.core.errors import ErrorCode
from shareproxy.core.persisted import StateDelta
from shareproxy.core.store import PartitionWrite, SharePartitionKey
from shareproxy.persistence.repository import SqlShareStateStore
from tests.support.kip_tables import ACK, ARC, AV, pb

TOPIC = uuid.UUID(int=7)
KEY = SharePartitionKey("g1", TOPIC, 0)


def finding(drift: Drift, *, epoch=None, spso=None, log_start=None, hwm=None, records=0):
    return Finding(drift, "g1", "orders", TOPIC, 0, epoch, spso, log_start, hwm, records, "")


async def test_records_lost_advance_spso_and_fence_the_leader_that_had_it(
    store: SqlShareStateStore, state_url: str
):
    await store.initialize(KEY, 10, "orders")
    leader = await store.claim(KEY)  # a running proxy's leader
    delta = StateDelta(-1, (pb(10, 12, ACK, 1), pb(13, 14, AV, 1), pb(15, 15, ARC, 5)))
    assert await store.write([PartitionWrite(KEY, leader.state_epoch, delta)]) == {
        KEY: ErrorCode.NONE
    }
    lost = finding(Drift.RECORDS_LOST, epoch=leader.state_epoch, spso=10, log_start=20, records=6)
    [outcome] = await repair.apply(state_url, [lost])
    assert outcome.applied, outcome.detail
    after = await store.read(KEY)
    assert after.state.start_offset == 20 and after.state_epoch > leader.state_epoch
    stale = PartitionWrite(KEY, leader.state_epoch, StateDelta(-1, (pb(13, 13, ACK, 2),)))
    assert await store.write([stale]) == {KEY: ErrorCode.FENCED_STATE_EPOCH}
    [again] = await repair.apply(state_url, [lost])  # re-checked: nothing to do now
    assert not again.applied and "already" in again.detail


async def test_a_delete_is_skipped_when_a_proxy_claimed_the_state_since_it_was_read(
    store: SqlShareStateStore, state_url: str
):
    read = await store.initialize(KEY, 0, "orders")
    await store.claim(KEY)  # a proxy loaded it after the job read it
    deleted = finding(Drift.TOPIC_DELETED, epoch=read.state_epoch)
    [outcome] = await repair.apply(state_url, [deleted])
    assert not outcome.applied and await store.read(KEY) is not None
    current = await store.read(KEY)
    [outcome] = await repair.apply(
        state_url, [finding(Drift.TOPIC_DELETED, epoch=current.state_epoch)]
    )
    assert outcome.applied and await store.read(KEY) is None


async def test_beyond_the_high_watermark_resets_there_and_new_partitions_start_at_the_log_start(
    store: SqlShareStateStore, state_url: str
):
    before = await store.initialize(KEY, 500, "orders")
    [reset] = await repair.apply(
        state_url, [finding(Drift.BEYOND_HIGH_WATERMARK, epoch=0, spso=500, hwm=120)]
    )
    after = await store.read(KEY)
    assert reset.applied and after.state.start_offset == 120
    assert after.state_epoch > before.state_epoch
    new = SharePartitionKey("g1", TOPIC, 1)
    fresh = Finding(Drift.NEW_PARTITION, "g1", "orders", TOPIC, 1, None, None, 3, 9, 0, "")
    [init] = await repair.apply(state_url, [fresh])
    assert init.applied and (await store.read(new)).state.start_offset == 3
    [twice] = await repair.apply(state_url, [fresh])
    assert not twice.applied  # initialized already: never overwritten


async def test_an_expired_group_is_judged_again_on_the_membership_read_at_repair(
    store: SqlShareStateStore, state_url: str
):
    """The finding was made on an old membership; a member came and went since, so the group
    has been empty only a moment: under the retention the job judged by, it stays."""
    from datetime import UTC, datetime, timedelta

    expired = Finding(Drift.GROUP_EXPIRED, "g1", None, None, None, None, None, None, None, 0, "")
    await store.ensure_group("g1")
    now = datetime.now(UTC)
    await store.record_membership("g1", ["orders"], now - timedelta(days=9))
    await store.record_membership("g1", [], now - timedelta(seconds=5))  # empty again, lately
    week = 7 * 86_400_000
    [kept] = await repair.apply(state_url, [expired], week)
    assert not kept.applied and await store.get_group("g1") is not None
    [gone] = await repair.apply(state_url, [expired], 1_000)
    assert gone.applied and await store.get_group("g1") is None
