"""ShareFetch v1-v2: the request translated into one ``share_fetch`` call of the runtime, and its
outcome into the response (acquired records as the batches that hold them)."""

from __future__ import annotations

from typing import Any

from shareproxy.broker.consumers import Fetched, FetchLimits, TopicPartition
from shareproxy.core.errors import ErrorCode, ShareError, partition_error_message
from shareproxy.core.states import AcquireMode
from shareproxy.kafka.client_software import fetch_wait_ms
from shareproxy.kafka.context import BrokerContext, Connection, build, error, schema_module
from shareproxy.kafka.share_requests import ConnectionAccess, acks_of, session_of, share_answer
from shareproxy.protocol.codec import Request, response_type


async def handle(ctx: BrokerContext, conn: Connection, request: Request) -> Any:
    body = request.body
    group_id, member_id = body.group_id or "", body.member_id or ""
    mode = _acquire_mode(body)
    if mode is None:
        refused = ShareError(ErrorCode.INVALID_REQUEST, "ShareAcquireMode must be 0 or 1")
        return _response(ctx, conn, request, group_id, Fetched(refused))
    limits = FetchLimits(
        max_wait_ms=fetch_wait_ms(
            int(body.max_wait.total_seconds() * 1000),
            conn.one_leader_at_a_time,
            ctx.cluster.serving().nodes,
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


def _acquire_mode(body: Any) -> AcquireMode | None:
    """v2's ShareAcquireMode (v1: batch_optimized); None for a value Kafka does not define."""
    try:
        return AcquireMode(getattr(body, "share_acquire_mode", 0))
    except ValueError:
        return None


def _response(
    ctx: BrokerContext, conn: Connection, request: Request, group_id: str, fetched: Fetched
) -> Any:
    cls = response_type(request.api_key, request.api_version)
    m = schema_module(cls)
    acks, errors, got = fetched.acknowledged, fetched.errors, fetched.acquired

    def entry(tp: TopicPartition, leader: Any) -> Any:
        a = got.get(tp)
        return build(
            m.PartitionData,
            partition_index=tp[1],
            error_code=error(errors.get(tp, ErrorCode.NONE)),
            error_message=partition_error_message(errors.get(tp, ErrorCode.NONE)),
            acknowledge_error_code=acks.get(tp, ErrorCode.NONE),
            acknowledge_error_message=partition_error_message(acks.get(tp, ErrorCode.NONE)),
            current_leader=leader,
            records=a.records if a else b"",
            acquired_records=tuple(
                m.AcquiredRecords(
                    first_offset=r.first_offset,
                    last_offset=r.last_offset,
                    delivery_count=r.delivery_count,
                )
                for r in (a.acquired if a else ())
            ),
        )

    return share_answer(
        ctx,
        conn,
        cls,
        m,
        m.ShareFetchableTopicResponse,
        group_id,
        [*got, *acks, *errors],
        entry,
        codes=[*errors.items(), *acks.items()],
        refusal=fetched.refusal,
    )
