"""ShareGroupDescribe v1: live membership as the coordinator holds it."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from kio.schema.share_group_describe.v1 import response as r

from shareproxy.broker.context import BrokerContext, Connection, error
from shareproxy.core.acl import Operation, ResourceType
from shareproxy.core.errors import ErrorCode
from shareproxy.protocol.codec import Request

GROUP_ID_NOT_FOUND = 69


async def handle(ctx: BrokerContext, conn: Connection, request: Request) -> Any:
    names = {t.topic_id: t.name for t in ctx.upstream.topics.values()}
    described = []
    for group_id in request.body.group_ids:
        group = ctx.coordinator.groups.get(group_id)
        refused = not ctx.allowed(conn, Operation.DESCRIBE, ResourceType.GROUP, group_id)
        if refused or (
            group is None and not (ctx.admin is not None and await ctx.admin.exists(group_id))
        ):
            described.append(
                r.DescribedGroup(
                    error_code=error(
                        ErrorCode.GROUP_AUTHORIZATION_FAILED if refused else GROUP_ID_NOT_FOUND
                    ),
                    error_message="not authorized" if refused else "no such share group",
                    group_id=group_id,
                    group_state="Dead",
                    group_epoch=-1,
                    assignment_epoch=-1,
                    assignor_name="",
                    members=(),
                )
            )
            continue
        members = ()
        if group is not None:
            members = tuple(
                r.Member(
                    member_id=m.member_id,
                    rack_id=m.rack_id,
                    member_epoch=m.member_epoch,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    subscribed_topic_names=tuple(m.subscribed_topics),
                    assignment=r.Assignment(
                        topic_partitions=tuple(
                            r.TopicPartitions(
                                topic_id=t, topic_name=names.get(t, ""), partitions=ps
                            )
                            for t, ps in sorted(m.assignment.items())
                        )
                    ),
                )
                for m in group.members.values()
            )
        described.append(
            r.DescribedGroup(
                error_code=error(0),
                group_id=group_id,
                group_state=group.state.value if group else "Empty",
                group_epoch=group.group_epoch if group else 0,
                assignment_epoch=group.assignment_epoch if group else 0,
                assignor_name="simple",
                members=members,
            )
        )
    return r.ShareGroupDescribeResponse(throttle_time=timedelta(0), groups=tuple(described))
