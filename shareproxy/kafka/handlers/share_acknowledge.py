"""ShareAcknowledge v1-v2: the request translated into one ``share_acknowledge`` call of the
runtime, and each partition's outcome into the response."""

from __future__ import annotations

from shareproxy.core.errors import partition_error_message
from shareproxy.kafka.context import Connection
from shareproxy.kafka.contexts import ShareConsumersContext
from shareproxy.kafka.share_requests import ConnectionAccess, acks_of, session_of, share_answer
from shareproxy.protocol.codec import EncodedResponse, Request
from shareproxy.protocol.share_responses import AcknowledgedPartition, share_acknowledge
from shareproxy.runtime.consuming import Acknowledged, TopicPartition


async def handle(ctx: ShareConsumersContext, conn: Connection, request: Request) -> EncodedResponse:
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
    ctx: ShareConsumersContext,
    conn: Connection,
    request: Request,
    group_id: str,
    done: Acknowledged,
) -> EncodedResponse:
    codes = done.codes

    def entry(tp: TopicPartition, leader: int, epoch: int) -> AcknowledgedPartition:
        code = int(codes[tp])
        return AcknowledgedPartition(tp[1], code, partition_error_message(code), leader, epoch)

    return share_answer(
        ctx,
        conn,
        request,
        group_id,
        codes,
        entry,
        share_acknowledge,
        codes=codes.items(),
        refusal=done.refusal,
    )
