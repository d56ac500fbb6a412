"""A server's store keeps one Postgres connection for its state writes (a checkout from the
pool and its return cost twice the statement's CPU): it is the same one write after write,
another write at the same time takes one from the pool, a connection the server closed is
replaced without a failed write, and ``close`` gives it back."""

from __future__ import annotations

import asyncio
import uuid

from sqlalchemy import text

from shareproxy.core.errors import ErrorCode
from shareproxy.core.persisted import StateDelta
from shareproxy.core.store import PartitionWrite, SharePartitionKey
from shareproxy.persistence.engine import create_engine
from shareproxy.persistence.repository import SqlShareStateStore
from tests.support.kip_tables import AV, pb

TOPIC = uuid.UUID("0b3f5a8e-1f0c-4d3e-9a57-6c1d2e3f4a5b")


def _write(k: SharePartitionKey, first: int) -> list[PartitionWrite]:
    return [PartitionWrite(k, 0, StateDelta(-1, (pb(first, first + 9, AV, 1),)))]


async def _writer_pids(engine) -> set[int]:
    async with engine.connect() as conn:
        rows = await conn.execute(
            text(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
                " AND pid <> pg_backend_pid() AND query LIKE 'WITH counted AS%'"
            )
        )
        return {pid for (pid,) in rows}


async def test_writes_share_one_kept_connection_until_closed(postgres):
    url = postgres.create_database(f"k{uuid.uuid4().hex[:8]}", "template_migrated")
    engine, watcher = create_engine(url), create_engine(url)
    store = SqlShareStateStore(engine, keep_connection=True)
    keys = [SharePartitionKey("g", TOPIC, p) for p in range(2)]
    try:
        for k in keys:
            await store.initialize(k, 0)
        for first in range(0, 50, 10):
            assert (await store.write(_write(keys[0], first)))[keys[0]] == ErrorCode.NONE
            assert engine.pool.checkedout() == 1
        assert len(await _writer_pids(watcher)) == 1
        # two at once: the second takes a connection from the pool and gives it back
        both = await asyncio.gather(
            store.write(_write(keys[0], 50)), store.write(_write(keys[1], 0))
        )
        assert [r[k] for r, k in zip(both, keys, strict=True)] == [ErrorCode.NONE] * 2
        assert engine.pool.checkedout() == 1
        await store.close()
        assert engine.pool.checkedout() == 0
        assert (await store.write(_write(keys[1], 10)))[keys[1]] == ErrorCode.NONE
        assert engine.pool.checkedout() == 0  # closed: from the pool, write by write
        batches = [pb(f, f + 9, AV, 1) for f in range(0, 60, 10)]
        assert (await store.read(keys[0])).state.batches == batches
    finally:
        await engine.dispose()
        await watcher.dispose()


async def test_a_kept_connection_the_server_closed_is_replaced_before_a_write(postgres):
    url = postgres.create_database(f"k{uuid.uuid4().hex[:8]}", "template_migrated")
    engine, watcher = create_engine(url), create_engine(url)
    store = SqlShareStateStore(engine, keep_connection=True)
    k = SharePartitionKey("g", TOPIC, 0)
    try:
        await store.initialize(k, 0)
        assert (await store.write(_write(k, 0)))[k] == ErrorCode.NONE
        [pid] = await _writer_pids(watcher)
        async with watcher.connect() as conn:
            await conn.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
        await asyncio.sleep(0.5)  # the kept connection learns it was closed
        assert (await store.write(_write(k, 10)))[k] == ErrorCode.NONE
        assert engine.pool.checkedout() == 1
        assert (await _writer_pids(watcher)) - {pid}
    finally:
        await store.close()
        await engine.dispose()
        await watcher.dispose()
