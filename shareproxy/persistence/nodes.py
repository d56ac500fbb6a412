"""The ``proxy_nodes`` rows: each node's lease, timed by the database's clock on Postgres, so
nodes on different machines agree on when a lease passed whatever their own clocks say (SQLite
is one machine's file, so its nodes share that machine's clock)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import delete, func, select, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from shareproxy.core.nodes import ProxyNode
from shareproxy.persistence.engine import aware_utc
from shareproxy.persistence.sql import dialect_insert
from shareproxy.persistence.tables import proxy_nodes


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
    return ProxyNode(row.node_id, row.incarnation, listeners, expires)


class NodeRecords:
    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    async def register(
        self,
        node_id: int,
        incarnation: str,
        listeners: Mapping[str, tuple[str, int]],
        lease_ms: int,
    ) -> ProxyNode | None:
        async with self.engine.begin() as conn:
            now = await _now(conn)
            before = (
                await conn.execute(
                    select(proxy_nodes).where(proxy_nodes.c.node_id == node_id).with_for_update()
                )
            ).first()
            values = {
                "incarnation": incarnation,
                "listeners": {p: [h, port] for p, (h, port) in listeners.items()},
                "registered_at": now,
                "lease_expires_at": now + timedelta(milliseconds=lease_ms),
            }
            stmt = dialect_insert(conn)(proxy_nodes).values(node_id=node_id, **values)
            await conn.execute(stmt.on_conflict_do_update(index_elements=["node_id"], set_=values))
        if before is None:
            return None
        replaced = _node(before)
        return replaced if replaced.lease_expires_at > now else None

    async def renew(self, node_id: int, incarnation: str, lease_ms: int) -> bool:
        async with self.engine.begin() as conn:
            now = await _now(conn)
            result = await conn.execute(
                update(proxy_nodes)
                .where(proxy_nodes.c.node_id == node_id)
                .where(proxy_nodes.c.incarnation == incarnation)
                .values(lease_expires_at=now + timedelta(milliseconds=lease_ms))
            )
            return result.rowcount > 0

    async def live(self) -> list[ProxyNode]:
        async with self.engine.connect() as conn:
            now = await _now(conn)
            rows = await conn.execute(select(proxy_nodes).order_by(proxy_nodes.c.node_id))
            return [n for n in map(_node, rows) if n.lease_expires_at > now]

    async def leave(self, node_id: int, incarnation: str) -> None:
        async with self.engine.begin() as conn:
            await conn.execute(
                delete(proxy_nodes)
                .where(proxy_nodes.c.node_id == node_id)
                .where(proxy_nodes.c.incarnation == incarnation)
            )
