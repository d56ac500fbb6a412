"""ShareFetch v1-v2: acknowledgements first (durable before the answer), then acquisition from
every partition of the share session, held up to MaxWaitMs while there is nothing to give."""

from __future__ import annotations

from datetime import timedelta
from typing import Any
from uuid import UUID

from kio.index import load_response_schema

from shareproxy.broker.acknowledging import apply_acks, denied_topics, release_session
from shareproxy.broker.context import (
    BrokerContext,
    Connection,
    build,
    by_topic,
    error,
    schema_module,
    share_response,
)
from shareproxy.broker.partitions import Acquisition, SharePartitionLeader
from shareproxy.broker.upstream import UpstreamError
from shareproxy.core.acl import Operation, ResourceType
from shareproxy.core.errors import ErrorCode, ShareError
from shareproxy.core.share_session import CLOSE_EPOCH, OPEN_EPOCH
from shareproxy.core.states import AcquireMode
from shareproxy.protocol.codec import Request

TopicPartition = tuple[UUID, int]


async def handle(ctx: BrokerContext, conn: Connection, request: Request) -> Any:
    cls = load_response_schema(78, request.api_version)
    m = schema_module(cls)
    body = request.body
    group_id, member_id = body.group_id or "", body.member_id or ""
    settings = ctx.settings_for(group_id)
    lock_timeout = timedelta(milliseconds=settings.record_lock_duration_ms)

    def top_level(code: int, message: str) -> Any:
        return share_response(cls, m.ShareFetchableTopicResponse, {}, lock_timeout, code, message)

    if not group_id or not member_id:
        return top_level(ErrorCode.INVALID_REQUEST, "GroupId and MemberId must be set")
    has_acks = any(p.acknowledgement_batches for t in body.topics for p in t.partitions)
    epoch = body.share_session_epoch
    if epoch == OPEN_EPOCH and has_acks:
        return top_level(ErrorCode.INVALID_REQUEST, "acknowledgements cannot open a session")
    if not ctx.allowed(conn, Operation.READ, ResourceType.GROUP, group_id):
        return top_level(
            ErrorCode.GROUP_AUTHORIZATION_FAILED, f"not authorized to read group {group_id!r}"
        )
    key = (group_id, member_id, ctx.node_id)
    try:
        session = ctx.sessions.begin(key, epoch)
    except ShareError as e:
        return top_level(e.code, e.message)

    denied = denied_topics(
        ctx, conn, [*(t.topic_id for t in body.topics), *(tid for tid, _ in session.partitions)]
    )
    ack_codes = await apply_acks(ctx, group_id, member_id, body.topics, denied)
    if epoch == CLOSE_EPOCH:
        ctx.sessions.close(key)
        await release_session(ctx, group_id, member_id)
        return _response(ctx, m, cls, lock_timeout, {}, ack_codes, {})

    session.add((t.topic_id, p.partition_index) for t in body.topics for p in t.partitions)
    session.forget((t.topic_id, p) for t in body.forgotten_topics_data for p in t.partitions)
    leaders: list[SharePartitionLeader] = []
    errors: dict[TopicPartition, int] = {}
    for tp in session.partitions:
        if tp[0] in denied:
            errors[tp] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            continue
        try:
            leaders.append(await ctx.partitions.leader(group_id, *tp))
        except ShareError as e:
            errors[tp] = int(e.code) if e.code != ErrorCode.UNKNOWN_TOPIC_OR_PARTITION else 100
        except UpstreamError as e:
            errors[tp] = e.error_code
    # A member learns a new assignment only at its next heartbeat, seconds later. Until then
    # it still fetches partitions now assigned to others: it gets no new records from those
    # (it may still acknowledge what it holds), so a rebalance takes effect at once.
    target = ctx.coordinator.target_of(group_id, member_id)
    if target is not None:
        leaders = [ld for ld in leaders if (ld.key.topic_id, ld.key.partition) in target]
    mode = AcquireMode(getattr(body, "share_acquire_mode", 0) or 0)
    got = await _acquire(ctx, leaders, member_id, body, mode)
    return _response(ctx, m, cls, lock_timeout, got, ack_codes, errors)


async def _acquire(
    ctx: BrokerContext,
    leaders: list[SharePartitionLeader],
    member_id: str,
    body: Any,
    mode: AcquireMode,
) -> dict[TopicPartition, Acquisition]:
    return await ctx.partitions.acquire_for(
        leaders,
        member_id,
        max_wait_ms=int(body.max_wait.total_seconds() * 1000),
        max_records=body.max_records if body.max_records > 0 else 500,
        max_bytes=body.max_bytes if body.max_bytes > 0 else 50 * 1024 * 1024,
        mode=mode,
    )


def _response(
    ctx: BrokerContext,
    m: Any,
    cls: type,
    lock_timeout: timedelta,
    got: dict[TopicPartition, Acquisition],
    ack_codes: dict[TopicPartition, int],
    errors: dict[TopicPartition, int],
) -> Any:
    def entry(tp: TopicPartition) -> Any:
        a = got.get(tp)
        return build(
            m.PartitionData,
            partition_index=tp[1],
            error_code=error(errors.get(tp, 0)),
            error_message=None,
            acknowledge_error_code=ack_codes.get(tp, 0),
            acknowledge_error_message=None,
            current_leader=m.LeaderIdAndEpoch(leader_id=ctx.node_id, leader_epoch=0),
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

    topics = by_topic([*got, *ack_codes, *errors], entry)
    return share_response(cls, m.ShareFetchableTopicResponse, topics, lock_timeout)
