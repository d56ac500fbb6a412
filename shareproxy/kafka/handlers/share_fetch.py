"""ShareFetch v1-v2: acknowledgements first (durable before the answer), then acquisition from
every partition of the share session, held up to MaxWaitMs while there is nothing to give."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from shareproxy.broker.consumption import TopicPartition
from shareproxy.broker.leader import Acquisition
from shareproxy.core.acl import Operation, ResourceType
from shareproxy.core.errors import ErrorCode, ShareError, partition_error_message
from shareproxy.core.share_session import CLOSE_EPOCH, OPEN_EPOCH
from shareproxy.core.states import AcquireMode
from shareproxy.kafka.acknowledging import apply_acks, denied_topics, not_a_member
from shareproxy.kafka.client_software import fetch_wait_ms
from shareproxy.kafka.context import BrokerContext, Connection
from shareproxy.kafka.responses import build, by_topic, error, schema_module, share_response
from shareproxy.protocol.codec import Request, response_type


async def handle(ctx: BrokerContext, conn: Connection, request: Request) -> Any:
    cls = response_type(request.api_key, request.api_version)
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
    mode = _acquire_mode(body)
    if mode is None:
        return top_level(ErrorCode.INVALID_REQUEST, "ShareAcquireMode must be 0 or 1")
    if not ctx.allowed(conn, Operation.READ, ResourceType.GROUP, group_id):
        return top_level(
            ErrorCode.GROUP_AUTHORIZATION_FAILED, f"not authorized to read group {group_id!r}"
        )
    key = (group_id, member_id, ctx.node_id)
    # membership is known only where the group is coordinated; a partition leader elsewhere
    # trusts the share session, as a Kafka broker that is not the coordinator does
    member = not ctx.cluster.coordinates(group_id) or ctx.coordinator.is_member(group_id, member_id)
    if not member and (epoch == OPEN_EPOCH or ctx.sessions.get(key) is None):
        # a member id the group does not know opens nothing and acquires nothing; one that
        # has just left may still finish its open session (its last acknowledgements)
        return top_level(ErrorCode.UNKNOWN_MEMBER_ID, not_a_member(group_id, member_id))
    try:
        session = ctx.sessions.begin(key, epoch, ctx.clock_ms(), (conn.principal, conn.client_host))
    except ShareError as e:
        return top_level(e.code, e.message)

    denied = denied_topics(
        ctx, conn, [*(t.topic_id for t in body.topics), *(tid for tid, _ in session.partitions)]
    )
    ack_codes = await apply_acks(ctx, group_id, member_id, body.topics, denied)
    if epoch == CLOSE_EPOCH:
        ctx.sessions.close(key)
        await ctx.consumption.release(group_id, member_id)
        return _response(ctx, conn, m, cls, lock_timeout, {}, ack_codes, {})

    session.add((t.topic_id, p.partition_index) for t in body.topics for p in t.partitions)
    session.forget((t.topic_id, p) for t in body.forgotten_topics_data for p in t.partitions)
    errors: dict[TopicPartition, int] = {
        tp: ErrorCode.TOPIC_AUTHORIZATION_FAILED for tp in session.partitions if tp[0] in denied
    }
    leaders, unled = await ctx.consumption.leaders(
        group_id, [tp for tp in session.partitions if tp[0] not in denied]
    )
    errors.update(unled)
    # Like a Kafka broker, the partition leader does not check assignments: a member fetching
    # a partition that a rebalance moved away is served until its next heartbeat tells it.
    # (Serving only the member's target stalled clients that fetch from one node at a time,
    # librdkafka, for MaxWaitMs whenever their target and their fetches disagreed.)
    got = await ctx.consumption.acquire(
        leaders,
        member_id,
        max_wait_ms=fetch_wait_ms(
            int(body.max_wait.total_seconds() * 1000),
            conn.one_leader_at_a_time,
            ctx.cluster.serving().nodes,
            ctx.node_id,
            ctx.librdkafka_fetch_wait_ms,
        ),
        max_records=body.max_records,  # zero or less acquires nothing, as Kafka
        max_bytes=body.max_bytes,
        min_bytes=body.min_bytes,
        mode=mode,
    )
    return _response(ctx, conn, m, cls, lock_timeout, got, ack_codes, errors)


def _acquire_mode(body: Any) -> AcquireMode | None:
    """v2's ShareAcquireMode (v1: batch_optimized); None for a value Kafka does not define."""
    try:
        return AcquireMode(getattr(body, "share_acquire_mode", 0))
    except ValueError:
        return None


def _response(
    ctx: BrokerContext,
    conn: Connection,
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
            error_code=error(errors.get(tp, ErrorCode.NONE)),
            error_message=partition_error_message(errors.get(tp, ErrorCode.NONE)),
            acknowledge_error_code=ack_codes.get(tp, ErrorCode.NONE),
            acknowledge_error_message=partition_error_message(ack_codes.get(tp, ErrorCode.NONE)),
            current_leader=m.LeaderIdAndEpoch(
                leader_id=ctx.leader_of(*tp), leader_epoch=ctx.leader_epoch
            ),
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
    moved = [
        ctx.leader_of(*tp)
        for tp, code in (*errors.items(), *ack_codes.items())
        if code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    ]
    return share_response(
        cls,
        m.ShareFetchableTopicResponse,
        topics,
        lock_timeout,
        node_endpoints=ctx.node_endpoints(m.NodeEndpoint, conn, moved),
    )
