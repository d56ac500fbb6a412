"""ShareAcknowledge v1-v2: acknowledgements outside a fetch, durable before the answer;
epoch -1 also closes the share session and releases the member's remaining locks."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from shareproxy.core.acl import Operation, ResourceType
from shareproxy.core.errors import ErrorCode, ShareError, partition_error_message
from shareproxy.core.share_session import CLOSE_EPOCH
from shareproxy.kafka.acknowledging import apply_acks, denied_topics, not_a_member
from shareproxy.kafka.context import BrokerContext, Connection
from shareproxy.kafka.responses import by_topic, error, schema_module, share_response
from shareproxy.protocol.codec import Request, response_type


async def handle(ctx: BrokerContext, conn: Connection, request: Request) -> Any:
    cls = response_type(request.api_key, request.api_version)
    m = schema_module(cls)
    body = request.body
    group_id, member_id = body.group_id or "", body.member_id or ""
    lock_timeout = timedelta(milliseconds=ctx.settings_for(group_id).record_lock_duration_ms)

    def reply(code: int, message: str | None, codes: dict) -> Any:
        topics = by_topic(
            codes,
            lambda tp: m.PartitionData(
                partition_index=tp[1],
                error_code=error(codes[tp]),
                error_message=partition_error_message(codes[tp]),
                current_leader=m.LeaderIdAndEpoch(
                    leader_id=ctx.leader_of(*tp), leader_epoch=ctx.leader_epoch
                ),
            ),
        )
        moved = [
            ctx.leader_of(*tp) for tp, c in codes.items() if c == ErrorCode.NOT_LEADER_OR_FOLLOWER
        ]
        endpoints = ctx.node_endpoints(m.NodeEndpoint, conn, moved)
        return share_response(
            cls, m.ShareAcknowledgeTopicResponse, topics, lock_timeout, code, message, endpoints
        )

    if not group_id or not member_id:
        return reply(ErrorCode.INVALID_REQUEST, "GroupId and MemberId must be set", {})
    if not ctx.allowed(conn, Operation.READ, ResourceType.GROUP, group_id):
        return reply(
            ErrorCode.GROUP_AUTHORIZATION_FAILED, f"not authorized to read group {group_id!r}", {}
        )
    key = (group_id, member_id, ctx.node_id)
    member = not ctx.cluster.coordinates(group_id) or ctx.coordinator.is_member(
        group_id, member_id
    )  # known only where the group is coordinated: elsewhere the share session is trusted
    if not member and ctx.sessions.get(key) is None:
        return reply(ErrorCode.UNKNOWN_MEMBER_ID, not_a_member(group_id, member_id), {})
    try:
        ctx.sessions.begin(
            key,
            body.share_session_epoch,
            ctx.clock_ms(),
            (conn.principal, conn.client_host),
            acknowledging_only=True,
        )
    except ShareError as e:
        return reply(e.code, e.message, {})
    denied = denied_topics(ctx, conn, (t.topic_id for t in body.topics))
    codes = await apply_acks(ctx, group_id, member_id, body.topics, denied)
    if body.share_session_epoch == CLOSE_EPOCH:
        ctx.sessions.close(key)
        await ctx.consumption.release(group_id, member_id)
    return reply(ErrorCode.NONE, None, codes)
