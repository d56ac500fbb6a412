"""ShareFetch v1-v2: the request translated into one ``share_fetch`` call of the runtime, and its
outcome into the response (acquired records as the batches that hold them)."""

from __future__ import annotations

from typing import Any

from shareproxy.core.errors import ErrorCode, ShareError, partition_error_message
from shareproxy.core.states import AcquireMode
from shareproxy.kafka.client_software import fetch_wait_ms
from shareproxy.kafka.context import Connection
from shareproxy.kafka.contexts import ShareConsumersContext
from shareproxy.kafka.share_requests import ConnectionAccess, acks_of, session_of, share_answer
from shareproxy.protocol.codec import EncodedResponse, Request
from shareproxy.protocol.share_responses import FetchedPartition, share_fetch
from shareproxy.runtime.consuming import Fetched, FetchLimits, TopicPartition


async def handle(ctx: ShareConsumersContext, conn: Connection, request: Request) -> EncodedResponse:
    body = request.body
    group_id, member_id = body.group_id or "", body.member_id or ""
    mode = _acquire_mode(body)
    if mode is None:
        refused = ShareError(ErrorCode.INVALID_REQUEST, "ShareAcquireMode must be 0 or 1")
        return _response(ctx, conn, request, group_id, Fetched(refused))
    if _renews_but_fetches(body):
        refused = ShareError(ErrorCode.INVALID_REQUEST, RENEW_ONLY)
        return _response(ctx, conn, request, group_id, Fetched(refused))
    limits = FetchLimits(
        max_wait_ms=fetch_wait_ms(
            int(body.max_wait.total_seconds() * 1000),
            conn.one_leader_at_a_time,
            ctx.live_nodes,
            ctx.node_id,
            ctx.librdkafka_fetch_wait_ms,
        ),
        max_records=body.max_records,
        max_bytes=body.max_bytes,
        min_bytes=body.min_bytes,
        mode=mode,
    )
    fetched = await ctx.consumers.share_fetch(
        group_id,
        member_id,
        session_of(conn, body.share_session_epoch),
        acks_of(body.topics),
        fetch=[(t.topic_id, p.partition_index) for t in body.topics for p in t.partitions],
        forget=[(t.topic_id, p) for t in body.forgotten_topics_data for p in t.partitions],
        limits=limits,
        access=ConnectionAccess(ctx, conn),
    )
    return _response(ctx, conn, request, group_id, fetched)


# KIP-1222: a ShareFetch carrying Renew acknowledgements (v2's IsRenewAck) fetches nothing
RENEW_ONLY = (
    "a ShareFetch with IsRenewAck set must have MaxWaitMs, MinBytes, MaxBytes and MaxRecords 0"
)


def _renews_but_fetches(body: Any) -> bool:
    """Kafka refuses a renewing ShareFetch that also asks for records: renewing a lock must not
    wait on, or acquire, anything."""
    return bool(getattr(body, "is_renew_ack", False)) and bool(
        body.max_wait.total_seconds() or body.min_bytes or body.max_bytes or body.max_records
    )


def _acquire_mode(body: Any) -> AcquireMode | None:
    """v2's ShareAcquireMode (v1: batch_optimized); None for a value Kafka does not define."""
    try:
        return AcquireMode(getattr(body, "share_acquire_mode", 0))
    except ValueError:
        return None


def _response(
    ctx: ShareConsumersContext, conn: Connection, request: Request, group_id: str, fetched: Fetched
) -> EncodedResponse:
    acks, errors, got = fetched.acknowledged, fetched.errors, fetched.acquired

    def entry(tp: TopicPartition, leader: int, epoch: int) -> FetchedPartition:
        code = int(errors.get(tp, 0))
        ack = int(acks.get(tp, 0))
        a = got.get(tp)
        return FetchedPartition(
            tp[1],
            code,
            partition_error_message(code) if code else None,
            ack,
            partition_error_message(ack) if ack else None,
            leader,
            epoch,
            a.records if a else b"",
            a.acquired if a else (),
        )

    return share_answer(
        ctx,
        conn,
        request,
        group_id,
        [*got, *acks, *errors],
        entry,
        share_fetch,
        codes=[*errors.items(), *acks.items()],
        refusal=fetched.refusal,
    )
