"""The archive log's redrive claims on a real Postgres and on SQLite: a claim marks offsets once,
splits the ranges it cuts, refuses offsets never archived, and gives back a failed produce."""

from __future__ import annotations

import asyncio
import uuid

from shareproxy.core.errors import ErrorCode
from shareproxy.core.persisted import ArchivedRun, StateDelta
from shareproxy.core.redrive import Selection
from shareproxy.core.states import ArchiveReason
from shareproxy.core.store import PartitionWrite, SharePartitionKey
from shareproxy.persistence.repository import SqlShareStateStore
from tests.support.kip_tables import ARC, pb

KEY = SharePartitionKey("g1", uuid.UUID("5b0c9f8e-1d2a-4c3b-9e8f-7a6b5c4d3e2f"), 0)
REJECTED, LIMIT = ArchiveReason.REJECTED, ArchiveReason.DELIVERY_LIMIT


async def archived(store: SqlShareStateStore, *runs: ArchivedRun) -> None:
    await store.initialize(KEY, 0, "orders")
    epoch = (await store.claim(KEY)).state_epoch
    delta = StateDelta(-1, tuple(pb(r.first, r.last, ARC, r.delivery_count) for r in runs))
    assert await store.write([PartitionWrite(KEY, epoch, delta, runs)]) == {KEY: ErrorCode.NONE}


async def rows(store: SqlShareStateStore) -> list[tuple[int, int, str | None, bool]]:
    page = await store.archived_page("g1", None, 0, 100)
    return [(e.first_offset, e.last_offset, e.reason, e.redriven_at is not None) for e in page]


async def test_a_claim_marks_part_of_a_range_once_and_a_second_finds_it_redriven(
    store: SqlShareStateStore,
):
    await archived(store, ArchivedRun(0, 2, 1, REJECTED), ArchivedRun(5, 9, 5, LIMIT))
    dry = await store.claim_redrive([Selection(KEY, 6, 7)], True, 100)
    assert (dry[0].redrive, dry[0].already, dry[0].missing) == ([(6, 7)], [], [])
    assert await rows(store) == [(0, 2, "rejected", False), (5, 9, "delivery-limit", False)]

    [claimed] = await store.claim_redrive([Selection(KEY, 6, 7)], False, 100)
    assert claimed.redrive == [(6, 7)]
    assert await rows(store) == [
        (0, 2, "rejected", False),
        (5, 5, "delivery-limit", False),
        (6, 7, "delivery-limit", True),
        (8, 9, "delivery-limit", False),
    ]
    [again] = await store.claim_redrive([Selection(KEY, 5, 9)], False, 100)
    assert (again.redrive, again.already) == ([(5, 5), (8, 9)], [(6, 7)])
    [third] = await store.claim_redrive([Selection(KEY, 5, 9)], False, 100)
    assert (third.redrive, third.already) == ([], [(5, 9)])

    await store.release_redrive(KEY, [(8, 9)])  # its produce failed
    [whole] = await store.claim_redrive([Selection(KEY)], True, 100)
    assert (whole.redrive, whole.already) == ([(0, 2), (8, 9)], [(5, 7)])


async def test_offsets_never_archived_or_too_many_mark_nothing(store: SqlShareStateStore):
    await archived(store, ArchivedRun(0, 2, 1, REJECTED), ArchivedRun(5, 9, 5, LIMIT))
    before = await rows(store)
    plans = await store.claim_redrive([Selection(KEY, 0, 1), Selection(KEY, 2, 6)], False, 100)
    assert plans[1].missing == [(3, 4)]
    too_many = await store.claim_redrive([Selection(KEY)], False, 7)
    assert too_many[0].records == 8
    other = SharePartitionKey("g1", KEY.topic_id, 1)
    [none] = await store.claim_redrive([Selection(other)], False, 100)
    assert none.empty
    assert await rows(store) == before


async def test_concurrent_claims_of_the_same_offsets_redrive_them_once(
    store: SqlShareStateStore,
):
    await archived(store, ArchivedRun(0, 99, 5, LIMIT))
    results = await asyncio.gather(
        *(store.claim_redrive([Selection(KEY, 10, 59)], False, 1000) for _ in range(4)),
        return_exceptions=True,
    )
    plans = [r[0] for r in results if not isinstance(r, BaseException)]
    assert sum(p.records for p in plans) == 50
    assert await rows(store) == [
        (0, 9, "delivery-limit", False),
        (10, 59, "delivery-limit", True),
        (60, 99, "delivery-limit", False),
    ]


async def test_selections_of_one_call_that_overlap_redrive_each_offset_once(
    store: SqlShareStateStore,
):
    await archived(store, ArchivedRun(0, 4, 1, REJECTED))
    first, second, whole = await store.claim_redrive(
        [Selection(KEY, 0, 2), Selection(KEY, 1, 3), Selection(KEY)], False, 100
    )
    assert (first.redrive, first.already) == ([(0, 2)], [])
    assert (second.redrive, second.already) == ([(3, 3)], [(1, 2)])
    assert (whole.redrive, whole.already) == ([(4, 4)], [(0, 3)])
    assert await rows(store) == [
        (0, 2, "rejected", True),
        (3, 3, "rejected", True),
        (4, 4, "rejected", True),
    ]
