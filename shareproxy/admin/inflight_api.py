"""REST resources for single in-flight records: a share-partition's ranges page by page, a
release, accept (skip) or reject of chosen offsets, and the release of a member's locks.

A call about one share-partition is answered by the node leading its partition, from whichever
node it reaches (``answering.partition_call``); a member's release is made on every live node,
since each holds the locks of the partitions it leads. Every change is written to the
``shareproxy.audit`` log with its outcome, where it is made.
"""

from __future__ import annotations

from collections.abc import Awaitable
from datetime import UTC, datetime
from typing import Annotated, TypeVar

from fastapi import APIRouter, Depends, Path, Query
from pydantic import BaseModel, Field

from shareproxy.admin.answering import (
    GroupGathering,
    PartitionCall,
    every_node,
    partition_call,
)
from shareproxy.admin.auth import Caller
from shareproxy.admin.params import Strict
from shareproxy.core.acl import Operation
from shareproxy.core.errors import ShareError
from shareproxy.core.record_actions import DEFAULT_PAGE, MAX_PAGE, RecordAction, RecordsPage
from shareproxy.runtime.groups import GroupAdmin
from shareproxy.security.guard import audit_change

T = TypeVar("T")


class RecordRange(BaseModel):
    first_offset: int
    last_offset: int
    state: str = Field(description="Available, Acquired, Acknowledged, Archiving or Archived")
    delivery_count: int
    member_id: str | None = Field(description="the member holding an Acquired range")
    lock_expires_at: datetime | None = Field(description="when its acquisition lock ends")
    deliverable_at: datetime | None = Field(
        default=None,
        description="an Available range's delivery time, or the end of its redelivery "
        "back-off: no member acquires it before; null: at once",
    )


class Records(BaseModel):
    group_id: str
    topic: str
    partition: int
    start_offset: int = Field(description="SPSO")
    end_offset: int = Field(description="SPEO (exclusive)")
    records: list[RecordRange]
    next_offset: int | None = Field(description="from_offset of the next page; null: no more")


class OffsetRange(Strict):
    first_offset: int = Field(ge=0)
    last_offset: int | None = Field(default=None, ge=0, description="default: first_offset")


class PartitionReleased(BaseModel):
    topic: str
    partition: int
    offsets: list[tuple[int, int]] = Field(description="[first, last] runs made Available")


class MemberReleased(BaseModel):
    group_id: str
    member_id: str
    released: list[PartitionReleased]
    unreached: list[str] = Field(
        description="nodes that did not release (their locks end when they time out)"
    )
    member_known: bool | None = Field(
        default=None,
        description="whether the group has the member, by its coordinator (null: not known)",
    )


def router(admin: GroupAdmin) -> APIRouter:
    r = APIRouter(prefix="/v1/share-groups", tags=["share groups"])
    records = admin.records

    @r.get("/{group_id:name}/partitions/{topic:name}/{partition}/records", response_model=Records)
    async def view(
        call: Annotated[PartitionCall, Depends(partition_call(Operation.DESCRIBE))],
        from_offset: Annotated[int | None, Query(ge=0, description="default: SPSO")] = None,
        limit: Annotated[int, Query(ge=1, le=MAX_PAGE, description="ranges")] = DEFAULT_PAGE,
    ) -> Records:
        """The in-flight records from SPSO to SPEO, a range per run sharing one state."""
        page = await records.page(call.group_id, call.topic, call.partition, from_offset, limit)
        return _records(call, page)

    @r.post(
        "/{group_id:name}/partitions/{topic:name}/{partition}/records/{action}",
        response_model=Records,
    )
    async def act(
        call: Annotated[PartitionCall, Depends(partition_call(Operation.READ))],
        action: RecordAction,
        offsets: OffsetRange,
    ) -> Records:
        """release: Acquired → Available; accept (skip): Available or Acquired → Acknowledged;
        reject: Available or Acquired → Archived. All the offsets or none (409
        INVALID_RECORD_STATE); durable before the answer, which shows them as they are now."""
        first = offsets.first_offset
        last = first if offsets.last_offset is None else offsets.last_offset
        fields = {"group": call.group_id, "topic": call.topic, "partition": call.partition}
        changed = records.act(call.group_id, call.topic, call.partition, action, first, last)
        page = await _audited(
            call.caller, f"records {action.value}", changed, **fields, offsets=f"{first}-{last}"
        )
        return _records(call, page)

    @r.post(
        "/{group_id:name}/members/{member_id:name_to_end}/release", response_model=MemberReleased
    )
    async def release_member(
        call: Annotated[GroupGathering, Depends(every_node(Operation.READ))],
        member_id: Annotated[str, Path(min_length=1, max_length=255)],
    ) -> MemberReleased:
        """Every lock the member holds in the group ends: its records are Available again,
        delivery counts kept (a consumer that hangs while it heartbeats). Made on every node;
        404 UNKNOWN_MEMBER_ID when none released anything and the group has no such member."""
        group_id, caller = call.group_id, call.caller
        released = await _audited(
            caller,
            "member release",
            records.release_member(
                group_id,
                member_id,
                lambda topics: caller.require_topics(Operation.READ, topics),
            ),
            group=group_id,
            member=member_id,
        )
        rows = [
            PartitionReleased(topic=x.topic, partition=x.partition, offsets=x.offsets)
            for x in released
        ]
        known = admin.member_known(group_id, member_id)
        others, unreached = await call.others.answers(MemberReleased.model_validate)
        for answer in others:
            rows += answer.released
        if not call.others.passed_on:  # the node asked first answers for them all
            said = [known, *(answer.member_known for answer in others)]
            records.require_released_or_member(group_id, member_id, len(rows), said)
        rows.sort(key=lambda x: (x.topic, x.partition))
        return MemberReleased(
            group_id=group_id,
            member_id=member_id,
            released=rows,
            unreached=unreached,
            member_known=known,
        )

    return r


async def _audited(caller: Caller, action: str, change: Awaitable[T], **fields: object) -> T:
    """Await the change, and put it in the audit log with its outcome."""
    try:
        result = await change
    except ShareError as e:
        audit_change(caller.principal, caller.host, action, e.code.name, **fields)
        raise
    done = fields
    if isinstance(result, list):  # a member's release: what it released, where
        done = {**fields, "released": [(x.topic, x.partition, x.offsets) for x in result]}
    audit_change(caller.principal, caller.host, action, "OK", **done)
    return result


def _records(call: PartitionCall, page: RecordsPage) -> Records:
    return Records(
        group_id=call.group_id,
        topic=call.topic,
        partition=call.partition,
        start_offset=page.spso,
        end_offset=page.speo,
        records=[
            RecordRange(
                first_offset=run.first,
                last_offset=run.last,
                state=run.state.name.capitalize(),
                delivery_count=run.delivery_count,
                member_id=run.member_id,
                lock_expires_at=(
                    None
                    if run.lock_deadline_ms is None
                    else datetime.fromtimestamp(run.lock_deadline_ms / 1000, tz=UTC)
                ),
                deliverable_at=(
                    datetime.fromtimestamp(run.available_at_ms / 1000, tz=UTC)
                    if run.available_at_ms
                    else None
                ),
            )
            for run in page.runs
        ],
        next_offset=page.next_offset,
    )
