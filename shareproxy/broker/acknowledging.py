"""Acknowledgements as ShareFetch and ShareAcknowledge carry them: per partition, committed
together (so group commit takes them in one transaction), each with its own error code."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any
from uuid import UUID

from shareproxy.broker.context import BrokerContext
from shareproxy.broker.upstream import UpstreamError
from shareproxy.core.acknowledgement import AckBatch
from shareproxy.core.errors import ShareError

TopicPartition = tuple[UUID, int]


async def apply_acks(
    ctx: BrokerContext, group_id: str, member_id: str, topics: Iterable[Any]
) -> dict[TopicPartition, int]:
    jobs: dict[TopicPartition, Any] = {}
    for topic in topics:
        for p in topic.partitions:
            if not p.acknowledgement_batches:
                continue
            batches = [
                AckBatch(b.first_offset, b.last_offset, tuple(b.acknowledge_types))
                for b in p.acknowledgement_batches
            ]
            jobs[(topic.topic_id, p.partition_index)] = _ack_one(
                ctx, group_id, member_id, topic.topic_id, p.partition_index, batches
            )
    codes = await asyncio.gather(*jobs.values())
    return dict(zip(jobs, codes, strict=True))


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
