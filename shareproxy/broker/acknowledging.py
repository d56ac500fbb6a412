"""Acknowledgements as ShareFetch and ShareAcknowledge carry them: per partition, committed
together (so group commit takes them in one transaction), each with its own error code."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any
from uuid import UUID

from shareproxy.broker.context import BrokerContext, Connection
from shareproxy.broker.upstream import UpstreamError
from shareproxy.core.acknowledgement import AckBatch
from shareproxy.core.acl import Operation, ResourceType
from shareproxy.core.errors import ErrorCode, ShareError

TopicPartition = tuple[UUID, int]


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
    jobs: dict[TopicPartition, Any] = {}
    refused: dict[TopicPartition, int] = {}
    for topic in topics:
        for p in topic.partitions:
            if not p.acknowledgement_batches:
                continue
            if topic.topic_id in denied:
                refused[(topic.topic_id, p.partition_index)] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                continue
            batches = [
                AckBatch(b.first_offset, b.last_offset, tuple(b.acknowledge_types))
                for b in p.acknowledgement_batches
            ]
            jobs[(topic.topic_id, p.partition_index)] = _ack_one(
                ctx, group_id, member_id, topic.topic_id, p.partition_index, batches
            )
    codes = await asyncio.gather(*jobs.values())
    return {**dict(zip(jobs, codes, strict=True)), **refused}


async def _ack_one(
    ctx: BrokerContext,
    group_id: str,
    member_id: str,
    topic_id: UUID,
    partition: int,
    batches: list[AckBatch],
) -> int:
    try:
        leader = await ctx.partitions.leader(group_id, topic_id, partition)
    except ShareError as e:
        return int(e.code)
    except UpstreamError as e:
        return e.error_code
    return int(await ctx.partitions.acknowledge(leader, member_id, batches))


async def release_session(ctx: BrokerContext, group_id: str, member_id: str) -> None:
    """Share session closed (epoch -1): the member's remaining locks end now."""
    await ctx.partitions.release_member(member_id, group_id)
