"""ShareGroupHeartbeat v1: join (epoch 0), stay (current epoch), leave (-1)."""

from __future__ import annotations

from datetime import timedelta

from kio.schema.share_group_heartbeat.v1 import response as r

from shareproxy.core.acl import Operation, ResourceType
from shareproxy.core.errors import ErrorCode
from shareproxy.core.names import group_id_problem, subscribed_name_problem
from shareproxy.core.share_session import INVALID_MEMBER_ID, valid_member_id
from shareproxy.kafka.context import Connection
from shareproxy.kafka.contexts import ShareGroupContext
from shareproxy.kafka.responses import error
from shareproxy.protocol.codec import Request
from shareproxy.protocol.kio_types import NO_THROTTLE, as_i32, as_i32_timedelta, as_i32s


async def handle(
    ctx: ShareGroupContext, conn: Connection, request: Request
) -> r.ShareGroupHeartbeatResponse:
    body = request.body
    settings = ctx.settings_for(body.group_id)
    interval = as_i32_timedelta(timedelta(milliseconds=settings.heartbeat_interval_ms))

    def refuse(code: ErrorCode, message: str) -> r.ShareGroupHeartbeatResponse:
        return r.ShareGroupHeartbeatResponse(
            throttle_time=NO_THROTTLE,
            error_code=error(code),
            error_message=message,
            member_id=body.member_id,
            member_epoch=body.member_epoch,
            heartbeat_interval=interval,
        )

    if not body.group_id:
        return refuse(ErrorCode.INVALID_REQUEST, "GroupId must be set")
    problem = group_id_problem(body.group_id)
    if problem is not None:
        return refuse(ErrorCode.INVALID_GROUP_ID, problem)
    bad_topics = [p for p in map(subscribed_name_problem, body.subscribed_topic_names or ()) if p]
    if bad_topics:
        return refuse(ErrorCode.INVALID_REQUEST, f"SubscribedTopicNames: {bad_topics[0]}")
    if not ctx.allowed(conn, Operation.READ, ResourceType.GROUP, body.group_id):
        return refuse(
            ErrorCode.GROUP_AUTHORIZATION_FAILED, f"not authorized to read group {body.group_id!r}"
        )
    if not valid_member_id(body.member_id):  # after the group's ACL, as KafkaApis checks
        return refuse(ErrorCode.INVALID_REQUEST, INVALID_MEMBER_ID)
    result = await ctx.coordinator.heartbeat(
        body.group_id,
        body.member_id,
        body.member_epoch,
        subscribed=body.subscribed_topic_names,
        rack_id=body.rack_id,
        client_id=request.client_id or "",
        client_host=conn.client_host,
    )
    assignment = None
    if result.assignment is not None:
        assignment = r.Assignment(
            topic_partitions=tuple(
                r.TopicPartitions(topic_id=tid, partitions=as_i32s(parts))
                for tid, parts in sorted(result.assignment.items())
            )
        )
    if result.heartbeat_interval_ms is not None:  # shorter while the group's targets settle
        interval = as_i32_timedelta(timedelta(milliseconds=result.heartbeat_interval_ms))
    return r.ShareGroupHeartbeatResponse(
        throttle_time=NO_THROTTLE,
        error_code=error(result.error.value if result.error else 0),
        error_message=result.message,
        member_id=body.member_id,
        member_epoch=as_i32(result.member_epoch),
        heartbeat_interval=interval,
        assignment=assignment,
    )
