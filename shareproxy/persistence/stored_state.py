"""The stored state read back: a share-partition's snapshot row with its update rows replayed in
the order they were written, as KIP-932's share coordinator rebuilds it from ShareSnapshot and
ShareUpdate records. Loading, the batch scans and folding all replay the same way."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncConnection

from shareproxy.core.persisted import PersistedState, StateDelta, batches_from_rows
from shareproxy.core.store import LoadedState, SharePartitionKey
from shareproxy.persistence.sql import SNAPSHOT_KEY, UPDATE_KEY, key_in, key_is, key_of
from shareproxy.persistence.tables import share_snapshots, share_updates


def replayed(snapshot: Any, deltas: Iterable[StateDelta]) -> PersistedState:
    """The snapshot row's state with ``deltas`` applied on top, in order."""
    state = PersistedState(snapshot.start_offset, batches_from_rows(snapshot.state_batches))
    for delta in deltas:
        state.apply(delta)
    return state


async def stored_updates(
    conn: AsyncConnection, keys: Sequence[SharePartitionKey]
) -> dict[SharePartitionKey, list[StateDelta]]:
    """Each share-partition's update rows not yet folded into its snapshot, oldest first."""
    rows = await conn.execute(
        select(*UPDATE_KEY, share_updates.c.start_offset, share_updates.c.state_batches)
        .where(key_in(UPDATE_KEY, keys))
        .order_by(share_updates.c.id)
    )
    out: dict[SharePartitionKey, list[StateDelta]] = defaultdict(list)
    for r in rows:
        out[key_of(r)].append(StateDelta(r.start_offset, tuple(batches_from_rows(r.state_batches))))
    return out


async def load(conn: AsyncConnection, key: SharePartitionKey) -> LoadedState | None:
    """ReadShareGroupState: the replayed state and its epochs, or None if none is stored."""
    row = (await conn.execute(select(share_snapshots).where(key_is(SNAPSHOT_KEY, key)))).first()
    if row is None:
        return None
    deltas = (await stored_updates(conn, [key])).get(key, [])
    return LoadedState(row.state_epoch, row.snapshot_epoch, replayed(row, deltas))


async def locked_snapshots(
    conn: AsyncConnection, keys: Sequence[SharePartitionKey]
) -> dict[SharePartitionKey, Any]:
    """The snapshot rows of ``keys``, locked until the transaction ends (SELECT … FOR UPDATE)."""
    query = select(share_snapshots).where(key_in(SNAPSHOT_KEY, keys)).with_for_update()
    return {key_of(r): r for r in await conn.execute(query)}


async def state_epochs(
    conn: AsyncConnection, keys: Sequence[SharePartitionKey]
) -> dict[SharePartitionKey, int]:
    """The stored state epoch of each of ``keys`` that has state."""
    rows = await conn.execute(
        select(*SNAPSHOT_KEY, share_snapshots.c.state_epoch).where(key_in(SNAPSHOT_KEY, keys))
    )
    return {key_of(r): r.state_epoch for r in rows}
