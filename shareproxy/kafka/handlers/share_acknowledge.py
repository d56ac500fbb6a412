"""ShareAcknowledge v1-v2: the request translated into one ``share_acknowledge`` call of the
runtime, and each partition's outcome into the response."""

from __future__ import annotations

from typing import Any

from shareproxy.broker.consumers import Acknowledged, TopicPartition
from shareproxy.core.errors import partition_error_message
from shareproxy.kafka.context import BrokerContext, Connection, error, schema_module
from shareproxy.kafka.share_requests import ConnectionAccess, acks_of, session_of, share_answer
from shareproxy.protocol.codec import Request, response_type


async def handle(ctx: BrokerContext, conn: Connection, request: Request) -> Any:
    body = request.body
    group_id = body.group_id or ""
    acknowledged = await ctx.consumers.share_acknowledge(
        group_id,
        body.member_id or "",
        session_of(conn, body.share_session_epoch),
        acks_of(body.topics),
        access=ConnectionAccess(ctx, conn),
    )
    return _response(ctx, conn, request, group_id, acknowledged)


def _response(
    ctx: BrokerContext, conn: Connection, request: Request, group_id: str, done: Acknowledged
) -> Any:
    cls = response_type(request.api_key, request.api_version)
    m = schema_module(cls)
    codes = done.codes

    def entry(tp: TopicPartition, leader: Any) -> Any:
        return m.PartitionData(
            partition_index=tp[1],
            error_code=error(codes[tp]),
            error_message=partition_error_message(codes[tp]),
            current_leader=leader,
        )

    return share_answer(
        ctx,
        conn,
        cls,
        m,
        m.ShareAcknowledgeTopicResponse,
        group_id,
        codes,
        entry,
        codes=codes.items(),
        refusal=done.refusal,
    )
