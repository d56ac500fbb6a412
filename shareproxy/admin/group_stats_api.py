"""REST resource for a share group's counters: first deliveries, redeliveries,
acquisition-lock timeouts and records archived since each node started, summed over the
nodes (each counts for the share-partitions it leads). The console samples it on every refresh
and draws the increase; nothing keeps a history on the server."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends
from pydantic import BaseModel, Field

from shareproxy.admin.answering import GroupGathering, every_node
from shareproxy.core.acl import Operation
from shareproxy.runtime.groups import GroupAdmin
from shareproxy.telemetry import metrics


class GroupStats(BaseModel):
    group_id: str
    deliveries: int = Field(description="records delivered for the first time")
    redeliveries: int = Field(description="records delivered again (delivery count above 1)")
    lock_timeouts: int = Field(description="acquisition locks that expired unacknowledged")
    archived: int = Field(description="records archived: rejected or at the delivery limit")
    unreached: list[str] = Field(
        default_factory=list, description="nodes that could not be asked (not counted)"
    )


def router(admin: GroupAdmin) -> APIRouter:
    r = APIRouter(prefix="/v1/share-groups", tags=["share groups"])

    @r.get("/{group_id:name}/stats", response_model=GroupStats)
    async def stats(
        call: Annotated[GroupGathering, Depends(every_node(Operation.DESCRIBE))],
    ) -> GroupStats:
        """Totals since each node started (a node that restarted counts from 0 again)."""
        group_id = call.group_id
        await admin.require(group_id)
        totals = metrics.group_totals(group_id)
        others, unreached = await call.others.answers(GroupStats.model_validate)
        for answer in others:
            for name in totals:
                totals[name] += getattr(answer, name)
        return GroupStats(group_id=group_id, unreached=unreached, **totals)

    return r
