"""Share-group membership as the expiry rules need it: what the live group subscribes to, since
when, and since when it has had no members. The coordinator records it; the batch jobs read it."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from shareproxy.core.store import GroupMembership
from shareproxy.persistence.engine import aware_utc
from shareproxy.persistence.tables import share_groups


class MembershipRecords:
    """The membership columns of ``share_groups``."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    async def record_membership(
        self, group_id: str, subscribed_topics: Sequence[str], now: datetime
    ) -> None:
        """The live group's subscribed topics (empty: it has no members). Only a change moves
        ``subscription_changed_at``; ``empty_since`` is set when the group becomes empty.
        A group the store no longer has is left deleted."""
        topics = sorted(set(subscribed_topics))
        async with self.engine.begin() as conn:
            row = (
                await conn.execute(
                    select(
                        share_groups.c.subscribed_topics,
                        share_groups.c.empty_since,
                    )
                    .where(share_groups.c.group_id == group_id)
                    .with_for_update()
                )
            ).first()
            if row is None:  # deleted (its coordinator created it first): not brought back
                return
            values: dict[str, Any] = {}
            if row.subscribed_topics is None or sorted(row.subscribed_topics) != topics:
                values.update(subscribed_topics=topics, subscription_changed_at=now)
            if not topics and row.empty_since is None:
                values["empty_since"] = now
            elif topics and row.empty_since is not None:
                values["empty_since"] = None
            if values:
                await conn.execute(
                    update(share_groups).where(share_groups.c.group_id == group_id).values(**values)
                )

    async def memberships(self) -> list[GroupMembership]:
        async with self.engine.connect() as conn:
            rows = await conn.execute(select(share_groups).order_by(share_groups.c.group_id))
            return [
                GroupMembership(
                    r.group_id,
                    dict(r.configs),
                    None if r.subscribed_topics is None else tuple(r.subscribed_topics),
                    aware_utc(r.subscription_changed_at),
                    aware_utc(r.empty_since),
                )
                for r in rows
            ]
