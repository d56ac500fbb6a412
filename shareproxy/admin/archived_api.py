"""REST resources for a share group's archived records: the archive log listed, and redrives
that copy archived records back to their source topic once. The store is shared by every node,
so any node answers; what waits for the dead-letter topic is each node's own."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated
from uuid import UUID

from fastapi import APIRouter, Depends, Query
from pydantic import BaseModel, Field

from shareproxy.admin.answering import GroupCall, this_node
from shareproxy.admin.params import Strict, TopicName
from shareproxy.core.acl import Operation, ResourceType
from shareproxy.core.errors import ErrorCode, ShareError
from shareproxy.core.names import MAX_INT32, MAX_INT64
from shareproxy.core.redrive import LIST_LIMIT_DEFAULT, LIST_LIMIT_MAX
from shareproxy.runtime.archive import (
    ArchivedRecords,
    RedriveAsk,
    RedriveOutcome,
    RedriveResult,
    result_of,
)
from shareproxy.runtime.groups import GroupAdmin

REDRIVE_MAX_SELECTIONS = 100  # selections in one redrive request


class FirstRecord(BaseModel):
    key: str | None = Field(description='up to 120 characters, "…" after; null: no key')
    value: str | None = Field(description='as key; "(binary, N bytes)" when not UTF-8')


class ArchivedRange(BaseModel):
    topic: str | None = Field(description="null: the cluster no longer has the topic")
    topic_id: UUID
    partition: int
    first_offset: int
    last_offset: int
    records: int
    reason: str = Field(
        description="rejected, rejected: HTTP {status} (by a push endpoint), delivery-limit, "
        "operator-rejected, or unknown (archived earlier)"
    )
    delivery_count: int
    archived_at: datetime
    redriven_at: datetime | None = Field(description="when a redrive copied it back; null: never")
    first_record: FirstRecord | None = Field(
        default=None,
        description="with preview=true: the range's first record (null: not asked for, no Read "
        "on the topic, beyond the first 100 ranges, or no longer in the log)",
    )


class WaitingDeadLetters(BaseModel):
    topic: str
    partition: int
    waiting: int = Field(description="records not yet in the dead-letter topic")
    problem: str | None = Field(description="why not yet (retried)")


class ArchivedList(BaseModel):
    group_id: str
    archived: list[ArchivedRange]
    next_from: int | None = Field(
        description="with topic and partition given and more to list: the next page's from"
    )
    more: bool = Field(description="the page was cut at the limit")
    dead_letter_topic: str | None
    dead_letters_waiting: list[WaitingDeadLetters] = Field(
        description="this node's share-partitions with records waiting for the dead-letter "
        "topic (its writer's progress is not stored: the records listed above that are not "
        "among these were written, or the group had no dead-letter topic)"
    )


class RedriveSelection(Strict):
    topic: TopicName
    partition: int = Field(ge=0, le=MAX_INT32)
    first_offset: int | None = Field(
        default=None, ge=0, le=MAX_INT64, description="with last_offset"
    )
    last_offset: int | None = Field(
        default=None, ge=0, le=MAX_INT64, description="absent both: all archived"
    )


class RedriveRequest(Strict):
    records: list[RedriveSelection] = Field(min_length=1, max_length=REDRIVE_MAX_SELECTIONS)
    dry_run: bool = True


class ProducedRange(BaseModel):
    first_offset: int
    last_offset: int
    new_offsets: list[int] = Field(description="the copies' offsets in the source partition")


class RedrivePartition(BaseModel):
    topic: str
    partition: int
    redrive: list[tuple[int, int]] = Field(description="offset ranges redriven (or, dry, to be)")
    already_redriven: list[tuple[int, int]]
    produced: list[ProducedRange]
    not_in_log: list[int] = Field(description="claimed, but retention removed the original")


class RedriveAnswer(BaseModel):
    group_id: str
    dry_run: bool
    result: RedriveResult
    records: int = Field(description="records redriven (or, dry, that would be)")
    partitions: list[RedrivePartition]


def router(archived: ArchivedRecords, admin: GroupAdmin) -> APIRouter:
    r = APIRouter(prefix="/v1/share-groups", tags=["archived records"])

    @r.get("/{group_id:name}/archived", response_model=ArchivedList)
    async def list_archived(
        call: Annotated[GroupCall, Depends(this_node(Operation.DESCRIBE))],
        topic: TopicName | None = None,
        partition: Annotated[int | None, Query(ge=0, le=MAX_INT32)] = None,
        from_: Annotated[int, Query(alias="from", ge=0, le=MAX_INT64)] = 0,
        limit: Annotated[int, Query(ge=1, le=LIST_LIMIT_MAX)] = LIST_LIMIT_DEFAULT,
        preview: bool = False,
    ) -> ArchivedList:
        """The group's archived ranges in topic, partition and offset order, those ending at or
        after ``from``; one partition is paged with ``next_from``."""
        group_id, caller = call.group_id, call.caller
        if partition is not None and topic is None:
            raise ShareError(ErrorCode.INVALID_REQUEST, "partition is given only with topic")

        def readable(t: str) -> bool:  # records' contents: as for consuming them, Read
            return caller.allowed(Operation.READ, ResourceType.TOPIC, t, audit=False)

        views = await archived.archived(
            group_id, topic, partition, from_, limit + 1, readable if preview else None
        )
        more = len(views) > limit
        rows = [
            ArchivedRange(
                topic=v.topic,
                topic_id=v.entry.key.topic_id,
                partition=v.entry.key.partition,
                first_offset=v.entry.first_offset,
                last_offset=v.entry.last_offset,
                records=v.entry.last_offset - v.entry.first_offset + 1,
                reason=v.entry.reason or "unknown",
                delivery_count=v.entry.delivery_count,
                archived_at=v.entry.archived_at,
                redriven_at=v.entry.redriven_at,
                first_record=FirstRecord(key=v.first_record.key, value=v.first_record.value)
                if v.first_record
                else None,
            )
            for v in views[:limit]
            # topics the caller may not Describe are left out
            if v.topic is None
            or caller.allowed(Operation.DESCRIBE, ResourceType.TOPIC, v.topic, audit=False)
        ]
        one_partition = topic is not None and partition is not None
        next_from = views[limit - 1].entry.last_offset + 1 if more and one_partition else None
        settings = admin.settings_for(group_id)
        return ArchivedList(
            group_id=group_id,
            archived=rows,
            next_from=next_from,
            more=more,
            dead_letter_topic=settings.dead_letter_topic or None,
            dead_letters_waiting=[
                WaitingDeadLetters(
                    topic=p.topic,
                    partition=p.partition,
                    waiting=p.records,
                    problem=p.problem.message if p.problem else None,
                )
                for p in await admin.dead_letters(group_id)
                if caller.allowed(Operation.DESCRIBE, ResourceType.TOPIC, p.topic, audit=False)
            ],
        )

    @r.post("/{group_id:name}/archived/redrive", response_model=RedriveAnswer)
    async def redrive(
        call: Annotated[GroupCall, Depends(this_node(Operation.READ))], request: RedriveRequest
    ) -> RedriveAnswer:
        """Copy archived records back to their source topic, once; ``dry_run`` (the default)
        only says what would be copied. Read on the group, Write on each source topic."""
        group_id, caller = call.group_id, call.caller
        outcomes = await archived.redrive(
            group_id,
            [
                RedriveAsk(s.topic, s.partition, s.first_offset, s.last_offset)
                for s in request.records
            ],
            dry_run=request.dry_run,
            principal=caller.principal,
            authorize=lambda topics: caller.require_topics(Operation.WRITE, topics),
        )
        return RedriveAnswer(
            group_id=group_id,
            dry_run=request.dry_run,
            result=result_of(outcomes, request.dry_run),
            records=sum(o.plan.records for o in outcomes),
            partitions=[_partition(o) for o in outcomes],
        )

    return r


def _partition(o: RedriveOutcome) -> RedrivePartition:
    return RedrivePartition(
        topic=o.topic,
        partition=o.partition,
        redrive=o.plan.redrive,
        already_redriven=o.plan.already,
        produced=[
            ProducedRange(first_offset=a, last_offset=b, new_offsets=n) for (a, b), n in o.produced
        ],
        not_in_log=o.gone,
    )
