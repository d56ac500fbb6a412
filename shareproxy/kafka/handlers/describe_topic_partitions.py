"""DescribeTopicPartitions (KIP-966): Metadata's topic view in pages, which Kafka's admin client
prefers for ``describeTopics``. Every partition is led by this node, as Metadata says; the
topics, ids and partition counts are the upstream cluster's."""

from __future__ import annotations

from typing import Any

from kio.schema.describe_topic_partitions.v0 import response as r
from kio.static.constants import uuid_zero

from shareproxy.core.acl import Operation, ResourceType
from shareproxy.core.errors import ErrorCode
from shareproxy.core.names import topic_name_problem
from shareproxy.kafka.context import Connection
from shareproxy.kafka.contexts import ClusterView
from shareproxy.kafka.handlers.metadata import led_partitions
from shareproxy.kafka.responses import error
from shareproxy.protocol.codec import Request
from shareproxy.protocol.error_response import error_entity
from shareproxy.protocol.kio_types import NO_THROTTLE, as_i32, as_topic_name
from shareproxy.upstream.client import UpstreamError

# Kafka's max.request.partition.size.limit default: the most partitions one page holds
MAX_PARTITIONS_PER_PAGE = 2000


async def handle(
    ctx: ClusterView, conn: Connection, request: Request
) -> r.DescribeTopicPartitionsResponse:
    body = request.body
    every = not body.topics
    cursor = body.cursor
    after = cursor.topic_name if cursor is not None else ""
    names = None if every else sorted({t.name for t in body.topics if t.name >= after})
    if cursor is not None and (
        cursor.partition_index < 0 or (names is not None and after not in names)
    ):
        return error_entity(
            r.DescribeTopicPartitionsResponse,
            ErrorCode.INVALID_REQUEST,
            "the cursor must name a requested topic and a partition >= 0",
            body,
        )
    try:
        if every:
            await ctx.refresh_metadata()
        else:
            valid = [n for n in names or () if topic_name_problem(n) is None]
            if valid:
                await ctx.refresh_metadata(valid)
    except UpstreamError:
        pass  # answer from what is known; unknown topics get their error below
    if names is None:
        names = sorted(t.name for t in ctx.known_topics() if t.name >= after)
    refused = []
    allowed = []
    for name in names:
        if ctx.allowed(conn, Operation.DESCRIBE, ResourceType.TOPIC, name, audit=not every):
            allowed.append(name)
        elif not every:  # named but not describable: refused, its existence not disclosed
            refused.append(_topic(name, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
    topics, next_cursor = _page(ctx, conn, allowed, cursor, body.response_partition_limit, every)
    return r.DescribeTopicPartitionsResponse(
        throttle_time=NO_THROTTLE, topics=(*topics, *refused), next_cursor=next_cursor
    )


def _page(
    ctx: ClusterView,
    conn: Connection,
    names: list[str],
    cursor: Any,
    limit: int,
    every: bool,
) -> tuple[list[r.DescribeTopicPartitionsResponseTopic], r.Cursor | None]:
    """Kafka's paging: whole topics while they fit, then the cursor where the page ends."""
    remaining = max(min(MAX_PARTITIONS_PER_PAGE, limit), 1)
    topics: list[r.DescribeTopicPartitionsResponseTopic] = []
    for name in names:
        if remaining == 0:
            return topics, r.Cursor(topic_name=as_topic_name(name), partition_index=as_i32(0))
        info = ctx.topic(name)
        if info is None:
            if not every:
                problem = topic_name_problem(name)
                topics.append(
                    _topic(
                        name,
                        ErrorCode.INVALID_TOPIC_EXCEPTION
                        if problem
                        else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    )
                )
            continue
        start = cursor.partition_index if cursor is not None and cursor.topic_name == name else 0
        partitions = [
            p
            for p in led_partitions(ctx, info, r.DescribeTopicPartitionsResponsePartition)
            if p.partition_index >= start
        ]
        shown = partitions[:remaining]
        topics.append(
            r.DescribeTopicPartitionsResponseTopic(
                error_code=error(ErrorCode.NONE),
                name=as_topic_name(name),
                topic_id=info.topic_id,
                is_internal=False,
                partitions=tuple(shown),
                topic_authorized_operations=as_i32(
                    ctx.authorized_operations(conn, ResourceType.TOPIC, name)
                ),
            )
        )
        if len(partitions) > len(shown):
            return topics, r.Cursor(
                topic_name=as_topic_name(name),
                partition_index=partitions[len(shown)].partition_index,
            )
        remaining -= len(shown)
    return topics, None


def _topic(name: str, code: ErrorCode) -> r.DescribeTopicPartitionsResponseTopic:
    return r.DescribeTopicPartitionsResponseTopic(
        error_code=error(code),
        name=as_topic_name(name),
        topic_id=uuid_zero,
        is_internal=False,
        partitions=(),
    )
