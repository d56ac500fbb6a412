"""What ShareFetch and ShareAcknowledge share before the runtime: their acknowledgements read
from the request and checked against the topic ACLs, then committed through ``consumption``
(together, so group commit takes them in one transaction), each with its own error code."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any
from uuid import UUID

from shareproxy.broker.consumption import TopicPartition
from shareproxy.core.acknowledgement import AckBatch
from shareproxy.core.acl import Operation, ResourceType
from shareproxy.core.errors import ErrorCode
from shareproxy.kafka.context import BrokerContext, Connection


def not_a_member(group_id: str, member_id: str) -> str:
    """The message of UNKNOWN_MEMBER_ID for a ShareFetch or ShareAcknowledge."""
    return f"{member_id!r} is not a member of share group {group_id!r}: join with a heartbeat"


def denied_topics(ctx: BrokerContext, conn: Connection, topic_ids: Iterable[UUID]) -> set[UUID]:
    """The topics (by id) the connection's principal may not Read. Unknown ids pass: they get
    their own error where they are used."""
    denied: set[UUID] = set()
    if not ctx.security.enabled:
        return denied
    for tid in set(topic_ids):
        info = ctx.upstream.topics_by_id.get(tid)
        if info is not None and not ctx.allowed(
            conn, Operation.READ, ResourceType.TOPIC, info.name
        ):
            denied.add(tid)
    return denied


async def apply_acks(
    ctx: BrokerContext,
    group_id: str,
    member_id: str,
    topics: Iterable[Any],
    denied: frozenset[UUID] | set[UUID] = frozenset(),
) -> dict[TopicPartition, int]:
    acks: dict[TopicPartition, list[AckBatch]] = {}
    refused: dict[TopicPartition, int] = {}
    for topic in topics:
        for p in topic.partitions:
            if not p.acknowledgement_batches:
                continue
            if topic.topic_id in denied:
                refused[(topic.topic_id, p.partition_index)] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                continue
            acks[(topic.topic_id, p.partition_index)] = [
                AckBatch(b.first_offset, b.last_offset, tuple(b.acknowledge_types))
                for b in p.acknowledgement_batches
            ]
    codes = await ctx.consumption.acknowledge(group_id, member_id, acks)
    return {**codes, **refused}
