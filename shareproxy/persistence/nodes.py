"""The ``proxy_nodes`` rows: each node's lease, timed by the database's clock on Postgres, so
nodes on different machines agree on when a lease passed whatever their own clocks say (SQLite
is one machine's file, so its nodes share that machine's clock). A lapsed lease is reaped by the
first reader that sees it passed, in the transaction that raises the generation, so every change
of the live set is counted exactly once."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

from sqlalchemy import delete, func, select, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from shareproxy.core.nodes import ClusterView, ProxyNode, Registration, Renewal
from shareproxy.core.placement import PLACEMENT_RULE
from shareproxy.core.store import StoreUnavailable
from shareproxy.persistence.boundary import store_boundary
from shareproxy.persistence.engine import aware_utc
from shareproxy.persistence.sql import dialect_insert
from shareproxy.persistence.tables import proxy_cluster, proxy_nodes, proxy_topics


@dataclass(frozen=True, slots=True)
class _Registrant:
    """What a process registers a node id with."""

    incarnation: str
    listeners: Mapping[str, tuple[str, int]]
    admin_url: str | None


async def _now(conn: AsyncConnection) -> datetime:
    if conn.dialect.name == "postgresql":
        now = aware_utc(await conn.scalar(select(func.now())))
        assert now is not None
        return now
    return datetime.now(UTC)


def _node(row: Any) -> ProxyNode:
    listeners = {p: (h, int(port)) for p, (h, port) in row.listeners.items()}
    expires = aware_utc(row.lease_expires_at)
    assert expires is not None
    return ProxyNode(
        row.node_id,
        row.incarnation,
        listeners,
        expires,
        row.seen_generation,
        row.admin_url,
        row.placement_rule,
    )


async def _next_generation(conn: AsyncConnection) -> None:
    """Raise the generation, in the transaction that changes the live set."""
    stmt = dialect_insert(conn)(proxy_cluster).values(id=1, generation=1)
    await conn.execute(
        stmt.on_conflict_do_update(
            index_elements=["id"], set_={"generation": proxy_cluster.c.generation + 1}
        )
    )


# reads of the live nodes and of the catalogue that saw two generations (a change committed
# between them) before the catalogue is given up on for this read
_CATALOGUE_READS = 5


@store_boundary
class NodeRecords:
    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        # the catalogue as last read, with its generation: read again only when that moved
        self._catalogue: tuple[int, tuple[tuple[UUID, int], ...]] = (-1, ())

    async def register(
        self,
        node_id: int | None,
        incarnation: str,
        listeners: Mapping[str, tuple[str, int]],
        lease_ms: int,
        replace: bool = False,
        admin_url: str | None = None,
    ) -> Registration:
        you = _Registrant(incarnation, listeners, admin_url)
        async with self.engine.begin() as conn:
            now = await _now(conn)
            if node_id is None:
                return Registration(await _lease_id(conn, you, now, lease_ms))
            before = await _live_holder(conn, node_id, now)
            if before is not None and not replace:
                return Registration(node_id, held_by=before)
            if not await _upsert(conn, node_id, you, now, lease_ms, replace):
                # registered by another process since it was read
                return Registration(node_id, held_by=await _live_holder(conn, node_id, now))
        return Registration(node_id, replaced=before)

    async def renew(
        self,
        node_id: int,
        incarnation: str,
        listeners: Mapping[str, tuple[str, int]],
        lease_ms: int,
        seen_generation: int = 0,
        admin_url: str | None = None,
    ) -> Renewal:
        async with self.engine.begin() as conn:
            now = await _now(conn)
            result = await conn.execute(
                update(proxy_nodes)
                .where(proxy_nodes.c.node_id == node_id)
                .where(proxy_nodes.c.incarnation == incarnation)
                .values(
                    lease_expires_at=now + timedelta(milliseconds=lease_ms),
                    seen_generation=func.greatest(proxy_nodes.c.seen_generation, seen_generation)
                    if conn.dialect.name == "postgresql"
                    else func.max(proxy_nodes.c.seen_generation, seen_generation),
                )
            )
            if result.rowcount > 0:
                return Renewal.RENEWED
            held = await conn.scalar(
                select(proxy_nodes.c.incarnation)
                .where(proxy_nodes.c.node_id == node_id)
                .with_for_update()
            )
            if held is not None:
                return Renewal.REPLACED
            # only if still free: a process that registered the id since it was reaped keeps it
            you = _Registrant(incarnation, listeners, admin_url)
            if not await _upsert(conn, node_id, you, now, lease_ms, False):
                return Renewal.REPLACED
            return Renewal.REJOINED

    async def seen(self, node_id: int, incarnation: str, generation: int) -> None:
        async with self.engine.begin() as conn:
            await conn.execute(
                update(proxy_nodes)
                .where(proxy_nodes.c.node_id == node_id)
                .where(proxy_nodes.c.incarnation == incarnation)
                .where(proxy_nodes.c.seen_generation < generation)
                .values(seen_generation=generation)
            )

    async def live(self) -> ClusterView:
        async with self.engine.begin() as conn:
            now = await _now(conn)
            reaped = await conn.execute(
                delete(proxy_nodes).where(proxy_nodes.c.lease_expires_at <= now)
            )
            if reaped.rowcount > 0:
                await _next_generation(conn)
            for _ in range(_CATALOGUE_READS):
                generation, nodes = await _live_nodes(conn)
                topics = await self._topics_at(conn, generation)
                if topics is not None:
                    return ClusterView(generation, nodes, topics)
            raise StoreUnavailable(
                f"the topic catalogue changed under {_CATALOGUE_READS} reads in a row"
            )

    async def _topics_at(
        self, conn: AsyncConnection, generation: int
    ) -> tuple[tuple[UUID, int], ...] | None:
        """The catalogue at ``generation``; None when it moved on since (read both again). On
        Postgres each statement sees what committed before it began, and every change of the
        catalogue raises the generation in its own transaction, so one generation read with the
        catalogue pins it."""
        if self._catalogue[0] == generation:
            return self._catalogue[1]
        rows = (
            await conn.execute(
                select(proxy_topics.c.topic_id, proxy_topics.c.partitions, _generation())
                .where(proxy_topics.c.deleted.is_(False))
                .order_by(proxy_topics.c.entered, proxy_topics.c.topic_id)
            )
        ).all()
        read_at = (
            int(rows[0].generation or 0)
            if rows
            else int(await conn.scalar(select(proxy_cluster.c.generation)) or 0)
        )
        if read_at != generation:
            return None
        topics = tuple((r.topic_id, int(r.partitions)) for r in rows)
        self._catalogue = (generation, topics)
        return topics

    async def catalogue(self, seen: Mapping[UUID, int], retired: Collection[UUID]) -> bool:
        async with self.engine.begin() as conn:
            changed = False
            gone = set(retired)
            if gone:
                marked = await conn.execute(
                    update(proxy_topics)
                    .where(proxy_topics.c.topic_id.in_(gone))
                    .where(proxy_topics.c.deleted.is_(False))
                    .values(deleted=True)
                )
                changed = marked.rowcount > 0
            entered = int(await conn.scalar(select(proxy_cluster.c.generation)) or 0) + 1
            tombstones = [
                {"topic_id": t, "partitions": 0, "entered": entered, "deleted": True} for t in gone
            ]
            fresh = [
                {"topic_id": t, "partitions": n, "entered": entered, "deleted": False}
                for t, n in sorted(seen.items(), key=lambda item: item[0].bytes)
                if t not in gone
            ]
            for rows in (tombstones, fresh):
                if rows:
                    stmt = dialect_insert(conn)(proxy_topics).values(rows)
                    added = await conn.execute(stmt.on_conflict_do_nothing())
                    changed = changed or (added.rowcount > 0 and rows is fresh)
            for topic_id, partitions in seen.items():
                if topic_id in gone:
                    continue
                grown = await conn.execute(
                    update(proxy_topics)
                    .where(proxy_topics.c.topic_id == topic_id)
                    .where(proxy_topics.c.partitions < partitions)
                    .where(proxy_topics.c.deleted.is_(False))
                    .values(partitions=partitions)
                )
                changed = changed or grown.rowcount > 0
            if changed:
                await _next_generation(conn)
            return changed

    async def leave(self, node_id: int, incarnation: str) -> None:
        async with self.engine.begin() as conn:
            gone = await conn.execute(
                delete(proxy_nodes)
                .where(proxy_nodes.c.node_id == node_id)
                .where(proxy_nodes.c.incarnation == incarnation)
            )
            if gone.rowcount > 0:
                await _next_generation(conn)


def _generation() -> Any:
    return select(proxy_cluster.c.generation).scalar_subquery().label("generation")


async def _live_nodes(conn: AsyncConnection) -> tuple[int, tuple[ProxyNode, ...]]:
    """The generation and the live nodes, from one statement: one snapshot of both."""
    rows = (
        await conn.execute(select(proxy_nodes, _generation()).order_by(proxy_nodes.c.node_id))
    ).all()
    if not rows:
        return int(await conn.scalar(select(proxy_cluster.c.generation)) or 0), ()
    return int(rows[0].generation or 0), tuple(map(_node, rows))


async def _live_holder(conn: AsyncConnection, node_id: int, now: datetime) -> ProxyNode | None:
    row = (
        await conn.execute(
            select(proxy_nodes)
            .where(proxy_nodes.c.node_id == node_id)
            .where(proxy_nodes.c.lease_expires_at > now)
        )
    ).first()
    return None if row is None else _node(row)


async def _lease_id(conn: AsyncConnection, you: _Registrant, now: datetime, lease_ms: int) -> int:
    """The lowest id (from 1) no live node holds, now this process's; one that another process
    took since it was read is passed over."""
    taken = set(
        await conn.scalars(
            select(proxy_nodes.c.node_id).where(proxy_nodes.c.lease_expires_at > now)
        )
    )
    node_id = 1
    while True:
        while node_id in taken:
            node_id += 1
        if await _upsert(conn, node_id, you, now, lease_ms, replace=False):
            return node_id
        taken.add(node_id)


async def _upsert(
    conn: AsyncConnection,
    node_id: int,
    you: _Registrant,
    now: datetime,
    lease_ms: int,
    replace: bool,
) -> bool:
    """Hold the id for this process from now on; the live set changed, so a new generation.
    Without ``replace``, only an id whose lease passed (in one statement: a process that
    registered it meanwhile keeps it); whether it was taken."""
    values = {
        "incarnation": you.incarnation,
        "listeners": {p: [h, port] for p, (h, port) in you.listeners.items()},
        "admin_url": you.admin_url,
        "registered_at": now,
        "lease_expires_at": now + timedelta(milliseconds=lease_ms),
        "seen_generation": 0,
        "placement_rule": PLACEMENT_RULE,
    }
    stmt = dialect_insert(conn)(proxy_nodes).values(node_id=node_id, **values)
    taken = await conn.execute(
        stmt.on_conflict_do_update(
            index_elements=["node_id"],
            set_=values,
            where=None if replace else proxy_nodes.c.lease_expires_at <= now,
        )
    )
    if taken.rowcount == 0:
        return False
    await _next_generation(conn)
    return True
