"""Share-group rows and their dynamic configs; deleting a group takes all it owns with it."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from sqlalchemy import delete, select, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from shareproxy.core.store import ShareGroupRecord
from shareproxy.persistence.engine import aware_utc
from shareproxy.persistence.sql import dialect_insert, insert_ignore
from shareproxy.persistence.tables import (
    proxy_cluster,
    share_archived,
    share_group_push,
    share_groups,
    share_snapshots,
    share_updates,
)


async def insert_group(conn: AsyncConnection, group_id: str) -> None:
    """Record the share group unless it exists: its state and membership rows refer to it."""
    values = {"group_id": group_id, "group_type": "share", "configs": {}}
    await conn.execute(insert_ignore(conn, share_groups, ["group_id"]).values(**values))


async def _group(
    conn: AsyncConnection, group_id: str, for_update: bool = False
) -> ShareGroupRecord | None:
    query = select(share_groups).where(share_groups.c.group_id == group_id)
    if for_update:
        query = query.with_for_update()
    row = (await conn.execute(query)).first()
    return ShareGroupRecord(row.group_id, dict(row.configs)) if row else None


async def configs_changed(conn: AsyncConnection) -> None:
    """Raise the configs version, in the transaction that changes a group's configs."""
    stmt = dialect_insert(conn)(proxy_cluster).values(id=1, generation=0, configs_version=1)
    await conn.execute(
        stmt.on_conflict_do_update(
            index_elements=["id"], set_={"configs_version": proxy_cluster.c.configs_version + 1}
        )
    )


class GroupRecords:
    """The ``share_groups`` rows as the coordinator and the admin API see them."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    async def ensure_group(self, group_id: str) -> ShareGroupRecord:
        """The group, created if it is not stored. A group that exists when the insert looks
        may be deleted (committed by another transaction) before it is read back: it is then
        inserted again, as if the delete had come first."""
        async with self.engine.begin() as conn:
            while True:
                await insert_group(conn, group_id)
                group = await _group(conn, group_id)
                if group is not None:
                    return group

    async def get_group(self, group_id: str) -> ShareGroupRecord | None:
        async with self.engine.connect() as conn:
            return await _group(conn, group_id)

    async def list_groups(self) -> list[ShareGroupRecord]:
        async with self.engine.connect() as conn:
            rows = await conn.execute(select(share_groups).order_by(share_groups.c.group_id))
            return [ShareGroupRecord(r.group_id, dict(r.configs)) for r in rows]

    async def configs_version(self) -> int:
        async with self.engine.connect() as conn:
            version = await conn.scalar(
                select(proxy_cluster.c.configs_version).where(proxy_cluster.c.id == 1)
            )
            return int(version or 0)

    async def set_group_configs(
        self, group_id: str, configs: Mapping[str, str | None]
    ) -> ShareGroupRecord:
        """Merge ``configs`` into the stored ones (None removes one) under the row's lock, so
        two admins changing different configs at once both keep their change."""
        async with self.engine.begin() as conn:
            current = None
            while current is None:  # deleted since the insert looked: created again
                await insert_group(conn, group_id)
                current = await _group(conn, group_id, for_update=True)
            merged = dict(current.configs)
            for name, value in configs.items():
                if value is None:
                    merged.pop(name, None)
                else:
                    merged[name] = value
            await conn.execute(
                update(share_groups)
                .where(share_groups.c.group_id == group_id)
                .values(configs=merged)
            )
            await configs_changed(conn)
            return ShareGroupRecord(group_id, merged)

    async def delete_group(self, group_id: str, empty_since: datetime | None = None) -> bool:
        """The group's record, configs and all its share-partition state; False if unknown.
        Given ``empty_since``, only if the group is still empty since that moment: no member
        joined it through any proxy since the caller decided (the row is locked meanwhile)."""
        async with self.engine.begin() as conn:
            if empty_since is not None:
                row = (
                    await conn.execute(
                        select(share_groups.c.empty_since)
                        .where(share_groups.c.group_id == group_id)
                        .with_for_update()
                    )
                ).first()
                if row is None or aware_utc(row.empty_since) != empty_since:
                    return False
            await conn.execute(delete(share_updates).where(share_updates.c.group_id == group_id))
            await conn.execute(delete(share_archived).where(share_archived.c.group_id == group_id))
            await conn.execute(
                delete(share_group_push).where(share_group_push.c.group_id == group_id)
            )
            await conn.execute(
                delete(share_snapshots).where(share_snapshots.c.group_id == group_id)
            )
            result = await conn.execute(
                delete(share_groups).where(share_groups.c.group_id == group_id)
            )
            if result.rowcount > 0:
                await configs_changed(conn)
            return result.rowcount > 0
