"""Share groups' pushes, one row per group beside its ``share_groups`` row (deleting the group
deletes it). A change raises the configs version in its own transaction, so every node reads
the pushes again, as it reads changed group configs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import delete, func, select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from shareproxy.persistence.groups import configs_changed, insert_group
from shareproxy.persistence.sql import insert_ignore
from shareproxy.persistence.tables import share_group_push


class PushRecords:
    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    async def set_push(self, group_id: str, spec: Mapping[str, Any]) -> bool:
        async with self.engine.begin() as conn:
            await insert_group(conn, group_id)
            inserted = await conn.execute(
                insert_ignore(conn, share_group_push, ["group_id"]).values(
                    group_id=group_id, spec=dict(spec)
                )
            )
            created = inserted.rowcount > 0
            if not created:
                await conn.execute(
                    update(share_group_push)
                    .where(share_group_push.c.group_id == group_id)
                    .values(spec=dict(spec), updated_at=func.now())
                )
            await configs_changed(conn)
            return created

    async def remove_push(self, group_id: str) -> bool:
        async with self.engine.begin() as conn:
            result = await conn.execute(
                delete(share_group_push).where(share_group_push.c.group_id == group_id)
            )
            if result.rowcount > 0:
                await configs_changed(conn)
            return result.rowcount > 0

    async def pushes(self) -> dict[str, dict[str, Any]]:
        async with self.engine.connect() as conn:
            rows = await conn.execute(select(share_group_push.c.group_id, share_group_push.c.spec))
            return {r.group_id: dict(r.spec) for r in rows}
