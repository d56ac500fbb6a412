"""ShareGroupDescribe v1: the group view GroupAdmin builds (the REST API answers with it too)."""

from __future__ import annotations

from kio.schema.share_group_describe.v1 import response as r

from shareproxy.core.acl import UNREQUESTED_OPERATIONS, Operation, ResourceType
from shareproxy.core.errors import ErrorCode, ShareError
from shareproxy.core.names import group_id_problem
from shareproxy.kafka.context import Connection
from shareproxy.kafka.contexts import GroupAdminContext
from shareproxy.kafka.responses import error
from shareproxy.protocol.codec import Request
from shareproxy.protocol.kio_types import (
    NO_THROTTLE,
    as_group_id,
    as_i32,
    as_i32s,
    as_topic_name,
    as_topic_names,
)
from shareproxy.runtime.groups import GroupView


async def handle(
    ctx: GroupAdminContext, conn: Connection, request: Request
) -> r.ShareGroupDescribeResponse:
    described = []
    for group_id in request.body.group_ids:
        problem = group_id_problem(group_id)
        if problem is not None:
            described.append(_refused(group_id, ErrorCode.INVALID_GROUP_ID, problem))
        elif not ctx.allowed(conn, Operation.DESCRIBE, ResourceType.GROUP, group_id):
            described.append(
                _refused(group_id, ErrorCode.GROUP_AUTHORIZATION_FAILED, "not authorized")
            )
        else:
            try:
                ops = (
                    ctx.authorized_operations(conn, ResourceType.GROUP, group_id)
                    if request.body.include_authorized_operations
                    else UNREQUESTED_OPERATIONS
                )
                described.append(_described(await ctx.admin.describe(group_id), ops))
            except ShareError as e:
                described.append(_refused(group_id, e.code, e.message))
    return r.ShareGroupDescribeResponse(throttle_time=NO_THROTTLE, groups=tuple(described))


def _described(view: GroupView, authorized_operations: int) -> r.DescribedGroup:
    return r.DescribedGroup(
        error_code=error(ErrorCode.NONE),
        group_id=as_group_id(view.group_id),
        group_state=view.state,
        group_epoch=as_i32(view.group_epoch),
        assignment_epoch=as_i32(view.assignment_epoch),
        assignor_name=view.assignor,
        members=tuple(
            r.Member(
                member_id=m.member_id,
                rack_id=m.rack_id,
                member_epoch=as_i32(m.member_epoch),
                client_id=m.client_id,
                client_host=m.client_host,
                subscribed_topic_names=as_topic_names(m.subscribed_topics),
                assignment=r.Assignment(
                    topic_partitions=tuple(
                        r.TopicPartitions(
                            topic_id=a.topic_id,
                            topic_name=as_topic_name(a.name),
                            partitions=as_i32s(a.partitions),
                        )
                        for a in m.assignment
                    )
                ),
            )
            for m in view.members
        ),
        authorized_operations=as_i32(authorized_operations),
    )


def _refused(group_id: str, code: ErrorCode, message: str) -> r.DescribedGroup:
    return r.DescribedGroup(
        error_code=error(code),
        error_message=message,
        group_id=as_group_id(group_id),
        group_state="Dead",
        group_epoch=as_i32(-1),
        assignment_epoch=as_i32(-1),
        assignor_name="",
        members=(),
    )
