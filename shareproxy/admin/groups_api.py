"""REST resources for share groups: list, describe, offsets and lag, reset, delete offsets,
delete, and group configs. The logic is GroupAdmin's, shared with the Kafka admin RPCs. A call
about one group is answered by the node that coordinates it, from whichever node it reaches
(``forwarding.py``); the dead letters are each node's own (those of the partitions it leads)."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Query, Response
from pydantic import BaseModel, Field

from shareproxy.admin.answering import (
    Gathering,
    GroupCall,
    GroupGathering,
    anyone_every_node,
    every_node,
    group_call,
)
from shareproxy.admin.params import Strict
from shareproxy.core import group_config
from shareproxy.core.acl import Operation, ResourceType
from shareproxy.core.errors import ErrorCode, ShareError
from shareproxy.core.reset_plan import ResetTo
from shareproxy.core.share_group import GroupState
from shareproxy.runtime.groups import GroupAdmin


class GroupSummary(BaseModel):
    group_id: str
    state: str
    members: int = Field(description="members now, as the group's coordinator holds them")
    topics: list[str] = Field(description="topics it has state for or subscribes to")
    lag: int | None = Field(
        description="records not yet acknowledged or archived, summed over its "
        "share-partitions; null while one share-partition's is unknown"
    )
    oldest_unacked_age_seconds: float | None = Field(
        description="how long its oldest record not yet acknowledged has waited, by its "
        "record batch's timestamp; 0 when nothing waits, null while unknown"
    )


class Member(BaseModel):
    member_id: str
    member_epoch: int
    client_id: str
    host: str
    rack: str | None
    subscriptions: list[str]
    assignment: dict[str, list[int]]
    last_heartbeat: datetime = Field(
        description="when its coordinator last heard it (by the coordinator's clock; every "
        "node answers the same, so no age that would differ from call to call)"
    )


class GroupDetail(BaseModel):
    group_id: str
    state: str
    group_epoch: int
    assignment_epoch: int
    assignor: str = Field(description="the assignor that computed the members' targets")
    members: list[Member]


class PartitionState(BaseModel):
    topic: str
    partition: int
    start_offset: int | None = Field(description="SPSO")
    end_offset: int | None = Field(description="SPEO (exclusive)")
    high_watermark: int | None
    lag: int | None
    in_flight: dict[str, int] = Field(default_factory=dict)
    waiting: int = Field(
        0,
        description="records whose delivery time is still ahead (in_flight's available ones; "
        "not in the lag)",
    )
    next_delivery_at: datetime | None = Field(
        None, description="the earliest delivery time of those records; null: none waits"
    )
    error_code: str | None = None


class GroupOffsets(BaseModel):
    group_id: str
    partitions: list[PartitionState]
    total_lag: int | None = Field(description="null while a partition's lag is unknown")


class DeadLetterPartition(BaseModel):
    topic: str
    partition: int
    waiting: int = Field(description="records Archiving: not yet in the dead-letter topic")
    problem: str | None = Field(description="why they are not written yet (retried)")
    failing_since: datetime | None
    next_attempt: datetime | None


class DeadLetters(BaseModel):
    group_id: str
    topic: str | None = Field(description="errors.deadletterqueue.topic.name (null: none)")
    copy_record: bool
    partitions: list[DeadLetterPartition] = Field(
        description="share-partitions with records waiting for the topic, from every node"
    )
    unreached: list[str] = Field(
        default_factory=list, description="nodes that could not be asked (their rows are missing)"
    )


class PlannedOffset(Strict):
    topic: str
    partition: int = Field(ge=0)
    offset: int = Field(ge=0)


class ResetRequest(Strict):
    to: ResetTo = Field(
        description="earliest, latest, datetime, offset, duration (now less it), shift (the "
        "current start offset plus it), current, or offsets (one per partition, as a plan "
        "exported from Kafka's tools)"
    )
    topics: list[str] | None = Field(
        default=None,
        description="topics to reset, each `name` or `name:0,2` (only those partitions); all "
        "topics the group has state for if absent",
    )
    at: datetime | None = Field(
        default=None, alias="datetime", description="with to=datetime (ISO 8601; UTC if no zone)"
    )
    offset: int | None = Field(default=None, ge=0, description="with to=offset")
    duration: str | None = Field(
        default=None, description="with to=duration: ISO-8601, such as PT30M or P1DT2H"
    )
    shift: int | None = Field(default=None, description="with to=shift: offsets, + or -")
    offsets: list[PlannedOffset] | None = Field(
        default=None, description="with to=offsets: the start offset of each partition"
    )
    dry_run: bool = True


class ResetStep(BaseModel):
    topic: str
    partition: int
    current_start_offset: int | None
    new_start_offset: int


class ResetResult(BaseModel):
    group_id: str
    dry_run: bool
    partitions: list[ResetStep]


class DeletedOffsets(BaseModel):
    group_id: str
    topics: list[str]


class ConfigEntry(BaseModel):
    value: str
    source: Literal["group", "default"]
    type: str
    doc: str
    min: int | None = Field(None, description="the least value this node accepts (null: any)")
    max: int | None = Field(None, description="the greatest value this node accepts")


class GroupConfig(BaseModel):
    group_id: str
    configs: dict[str, ConfigEntry]


class ConfigChange(Strict):
    configs: dict[str, str | int | bool | None] = Field(
        description="config name → new value; null removes the group's value (back to default)"
    )


def router(admin: GroupAdmin) -> APIRouter:
    r = APIRouter(prefix="/v1/share-groups", tags=["share groups"])

    @r.get("", response_model=list[GroupSummary])
    async def list_groups(
        call: Annotated[Gathering, Depends(anyone_every_node)],
        state: Annotated[list[str] | None, Query(description="Empty, Stable or Dead")] = None,
    ) -> list[GroupSummary]:
        caller = call.caller
        valid = [s.value for s in GroupState]
        for s in state or []:
            if s.lower() not in {v.lower() for v in valid}:
                known = ", ".join(valid)
                raise ShareError(ErrorCode.INVALID_REQUEST, f"unknown state {s!r} (valid: {known})")
        groups = await admin.summaries(
            state or (),
            await call.others.listed(),
            now_ms=int(time.time() * 1000),
            backlog=not call.others.passed_on,
        )
        return [
            GroupSummary(
                group_id=g.group_id,
                state=g.state,
                members=g.members,
                topics=g.topics,
                lag=g.lag,
                oldest_unacked_age_seconds=g.oldest_unacked_age_s,
            )
            for g in groups
            if caller.allowed(Operation.DESCRIBE, ResourceType.GROUP, g.group_id, audit=False)
        ]

    @r.get("/{group_id:name}", response_model=GroupDetail)
    async def describe(
        call: Annotated[GroupCall, Depends(group_call(Operation.DESCRIBE))],
    ) -> GroupDetail:
        g = await admin.describe(call.group_id)
        return GroupDetail(
            group_id=g.group_id,
            state=g.state,
            group_epoch=g.group_epoch,
            assignment_epoch=g.assignment_epoch,
            assignor=g.assignor,
            members=[
                Member(
                    member_id=m.member_id,
                    member_epoch=m.member_epoch,
                    client_id=m.client_id,
                    host=m.client_host,
                    rack=m.rack_id,
                    subscriptions=m.subscribed_topics,
                    assignment={a.name or str(a.topic_id): a.partitions for a in m.assignment},
                    last_heartbeat=_when(m.last_heartbeat_ms),
                )
                for m in g.members
            ],
        )

    @r.get("/{group_id:name}/dead-letters", response_model=DeadLetters)
    async def dead_letters(
        call: Annotated[GroupGathering, Depends(every_node(Operation.DESCRIBE))],
    ) -> DeadLetters:
        """What waits for the dead-letter topic on every node: each node's writer holds the
        share-partitions it leads, so the others are asked too."""
        group_id = call.group_id
        settings = admin.settings_for(group_id)
        rows = []
        for p in await admin.dead_letters(group_id):
            problem = p.problem
            rows.append(
                DeadLetterPartition(
                    topic=p.topic,
                    partition=p.partition,
                    waiting=p.records,
                    problem=problem.message if problem else None,
                    failing_since=_when(problem.since_ms) if problem else None,
                    next_attempt=_when(problem.retry_ms) if problem else None,
                )
            )
        others, unreached = await call.others.answers(DeadLetters.model_validate)
        for answer in others:
            rows += answer.partitions
        rows.sort(key=lambda x: (x.topic, x.partition))
        return DeadLetters(
            group_id=group_id,
            topic=settings.dead_letter_topic or None,
            copy_record=settings.dead_letter_copy,
            partitions=rows,
            unreached=unreached,
        )

    @r.get("/{group_id:name}/offsets", response_model=GroupOffsets)
    async def offsets(
        call: Annotated[GroupCall, Depends(group_call(Operation.DESCRIBE))],
        topic: Annotated[list[str] | None, Query()] = None,
    ) -> GroupOffsets:
        caller = call.caller
        rows = []
        for p in await admin.offsets(call.group_id, topic):
            if not caller.allowed(Operation.DESCRIBE, ResourceType.TOPIC, p.topic, audit=False):
                continue  # topics the caller may not Describe are left out
            o = p.offsets
            rows.append(
                PartitionState(
                    topic=p.topic,
                    partition=p.partition,
                    start_offset=o.spso if o else None,
                    end_offset=o.speo if o else None,
                    high_watermark=o.high_watermark if o else None,
                    lag=o.lag if o else None,
                    in_flight=o.in_flight if o else {},
                    waiting=o.waiting if o else 0,
                    next_delivery_at=(
                        datetime.fromtimestamp(o.next_due_ms / 1000, UTC)
                        if o and o.next_due_ms is not None
                        else None
                    ),
                    error_code=p.error.name if p.error else None,
                )
            )
        unknown = any(p.start_offset is not None and p.lag is None for p in rows)
        total = None if unknown else sum(p.lag or 0 for p in rows)
        return GroupOffsets(group_id=call.group_id, partitions=rows, total_lag=total)

    @r.post("/{group_id:name}/offsets/reset", response_model=ResetResult)
    async def reset(
        call: Annotated[GroupCall, Depends(group_call(Operation.READ))], request: ResetRequest
    ) -> ResetResult:
        plan = await admin.reset_offsets(
            call.group_id,
            request.to,
            topics=request.topics,
            at=_aware(request.at),
            offset=request.offset,
            duration=request.duration,
            shift=request.shift,
            offsets=_planned(request.offsets),
            dry_run=request.dry_run,
            now=datetime.now(UTC),
            authorize=lambda topics: call.caller.require_topics(Operation.READ, topics),
        )
        return ResetResult(
            group_id=call.group_id,
            dry_run=request.dry_run,
            partitions=[
                ResetStep(
                    topic=s.topic,
                    partition=s.partition,
                    current_start_offset=s.current_spso,
                    new_start_offset=s.new_spso,
                )
                for s in plan
            ],
        )

    @r.delete("/{group_id:name}/offsets", response_model=DeletedOffsets)
    async def delete_offsets(
        call: Annotated[GroupCall, Depends(group_call(Operation.READ))],
        topic: Annotated[list[str], Query(min_length=1)],
    ) -> DeletedOffsets:
        call.caller.require_topics(Operation.READ, topic)
        await admin.delete_offsets(call.group_id, topic, live=True)
        return DeletedOffsets(group_id=call.group_id, topics=topic)

    @r.delete("/{group_id:name}", status_code=204)
    async def delete_group(
        call: Annotated[GroupCall, Depends(group_call(Operation.DELETE))],
    ) -> Response:
        await admin.delete_group(call.group_id)
        return Response(status_code=204)

    @r.get("/{group_id:name}/config", response_model=GroupConfig)
    async def get_config(
        call: Annotated[GroupCall, Depends(group_call(Operation.DESCRIBE_CONFIGS))],
    ) -> GroupConfig:
        await admin.require(call.group_id)
        return _config(admin, call.group_id)

    @r.put("/{group_id:name}/config", response_model=GroupConfig)
    async def put_config(
        call: Annotated[GroupCall, Depends(group_call(Operation.ALTER_CONFIGS))],
        change: ConfigChange,
    ) -> GroupConfig:
        """Set (or with null, remove) group configs; in force for the next fetch, lock and
        heartbeat. All values are validated first: one bad value changes nothing."""
        dead_letter_topic = change.configs.get(group_config.DLQ_TOPIC)
        if isinstance(dead_letter_topic, str) and dead_letter_topic:
            # the proxy writes there on the group's behalf: its configurer must be able to
            call.caller.require(Operation.WRITE, ResourceType.TOPIC, dead_letter_topic)
        changes = {k: _text(v) for k, v in change.configs.items()}
        await admin.alter_configs(call.group_id, changes)
        return _config(admin, call.group_id)

    return r


def _aware(value: datetime | None) -> datetime | None:
    """A datetime without a zone is taken as UTC."""
    if value is not None and value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value


def _planned(offsets: list[PlannedOffset] | None) -> dict[tuple[str, int], int] | None:
    if offsets is None:
        return None
    plan: dict[tuple[str, int], int] = {}
    for o in offsets:
        if (o.topic, o.partition) in plan:
            raise ShareError(
                ErrorCode.INVALID_REQUEST, f"offsets names {o.topic}-{o.partition} twice"
            )
        plan[(o.topic, o.partition)] = o.offset
    return plan


def _when(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


def _text(value: str | int | bool | None) -> str | None:
    if isinstance(value, bool):
        return "true" if value else "false"
    return None if value is None else str(value)


def _config(admin: GroupAdmin, group_id: str) -> GroupConfig:
    overrides = admin.config_overrides(group_id)
    effective = admin.settings_for(group_id).as_configs()
    return GroupConfig(
        group_id=group_id,
        configs={
            name: ConfigEntry(
                value=effective[name],
                source="group" if name in overrides else "default",
                type=d.kind,
                doc=d.doc,
                min=bound.low if (bound := admin.config_bound(name)) else None,
                max=bound.high if bound else None,
            )
            for name, d in group_config.DEFINITIONS.items()
        },
    )
