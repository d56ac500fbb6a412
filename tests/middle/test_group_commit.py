"""The group committer (on the in-memory store, on the virtual clock): writes that arrive
together commit together, each gets its own outcome, and a failing store answers every write in
its batch without stopping the committer. tests/integration/test_store.py shows the SQL stores
commit such a batch in one transaction with the same outcomes."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from shareproxy.core.errors import ErrorCode
from shareproxy.core.persisted import StateDelta
from shareproxy.core.store import PartitionWrite, SharePartitionKey
from shareproxy.runtime.consuming.group_commit import GroupCommitter
from tests.support.memory_store import MemoryStore
from tests.support.virtual_clock import virtual_clock

TOPIC = uuid.UUID("3b0e8a52-7a55-4a0e-9c57-2f6e1f4b9d30")


async def claimed(store: MemoryStore, n: int) -> list[tuple[SharePartitionKey, int]]:
    """``n`` share-partitions at SPSO 0, each with the state epoch a writer must hold."""
    out = []
    for p in range(n):
        key = SharePartitionKey("g-commit", TOPIC, p)
        await store.initialize(key, 0)
        loaded = await store.claim(key)
        assert loaded is not None
        out.append((key, loaded.state_epoch))
    return out


@virtual_clock
async def test_writes_arriving_together_commit_in_one_transaction() -> None:
    store = MemoryStore()
    committer = GroupCommitter(store)
    committer.start()
    try:
        keys = await claimed(store, 50)
        codes = await asyncio.gather(
            *(
                committer.commit(PartitionWrite(key, epoch, StateDelta(start_offset=7)))
                for key, epoch in keys
            )
        )
        assert codes == [ErrorCode.NONE] * 50
        assert (committer.commits, committer.writes) == (1, 50)
        for key, _ in keys:
            stored = await store.read(key)
            assert stored is not None and stored.state.start_offset == 7
    finally:
        await committer.stop()


@virtual_clock
async def test_a_fenced_write_is_refused_alone() -> None:
    store = MemoryStore()
    committer = GroupCommitter(store)
    committer.start()
    try:
        (stale, stale_epoch), (fresh, fresh_epoch) = await claimed(store, 2)
        await store.claim(stale)  # a newer writer took this one over
        codes = await asyncio.gather(
            committer.commit(PartitionWrite(stale, stale_epoch, StateDelta(start_offset=3))),
            committer.commit(PartitionWrite(fresh, fresh_epoch, StateDelta(start_offset=3))),
        )
        assert codes == [ErrorCode.FENCED_STATE_EPOCH, ErrorCode.NONE]
        refused = await store.read(stale)
        assert refused is not None and refused.state.start_offset == 0
    finally:
        await committer.stop()


@virtual_clock
async def test_a_failing_store_answers_its_batch_and_the_committer_goes_on() -> None:
    store = MemoryStore()
    committer = GroupCommitter(store)
    committer.start()
    try:
        [(key, epoch)] = await claimed(store, 1)
        write = PartitionWrite(key, epoch, StateDelta(start_offset=5))
        store.outage = True  # the database went away
        assert await committer.commit(write) == ErrorCode.COORDINATOR_NOT_AVAILABLE  # retriable
        store.outage = False
        assert await committer.commit(write) == ErrorCode.NONE
        stored = await store.read(key)
        assert stored is not None and stored.state.start_offset == 5
    finally:
        await committer.stop()


@virtual_clock
async def test_stopping_commits_what_is_queued_first() -> None:
    store = MemoryStore()
    committer = GroupCommitter(store)
    committer.start()
    keys = await claimed(store, 3)
    pending = [
        asyncio.create_task(committer.commit(PartitionWrite(k, e, StateDelta(start_offset=2))))
        for k, e in keys
    ]
    await asyncio.sleep(0)  # each write is queued
    await committer.stop()
    assert [t.result() for t in pending] == [ErrorCode.NONE] * 3
    with pytest.raises(RuntimeError):
        await committer.commit(PartitionWrite(keys[0][0], keys[0][1], StateDelta(start_offset=4)))


@virtual_clock
async def test_stopping_waits_for_the_transaction_under_way() -> None:
    store = MemoryStore()
    committer = GroupCommitter(store)
    committer.start()
    [(key, epoch)] = await claimed(store, 1)
    store.delay_s = 0.3  # a busy database
    pending = asyncio.create_task(
        committer.commit(PartitionWrite(key, epoch, StateDelta(start_offset=2)))
    )
    await asyncio.sleep(0.05)  # taken from the queue, being written
    await committer.stop()
    assert pending.done(), "a write under way was left unanswered"
    assert pending.result() == ErrorCode.NONE
    stored = await store.read(key)
    assert stored is not None and stored.state.start_offset == 2
