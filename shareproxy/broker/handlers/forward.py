"""Produce, Fetch and ListOffsets pass through to the upstream leaders, so the one endpoint also
serves producers and plain readers. The request is split by upstream leader and the answers
joined; Fetch goes sessionless upstream (the client is told session id 0)."""

from __future__ import annotations

import asyncio
import dataclasses
from collections import defaultdict
from datetime import timedelta
from typing import Any

from kio.index import load_response_schema

from shareproxy.broker.context import BrokerContext, Connection, build, error, schema_module
from shareproxy.broker.upstream import UpstreamError
from shareproxy.core.acl import Operation, ResourceType
from shareproxy.protocol.codec import Request

# api key -> (request topics field, topic name field, partitions field, partition index field,
#             response topics field)
_SHAPES = {
    0: ("topic_data", "name", "partition_data", "index", "responses"),
    1: ("topics", "topic", "partitions", "partition", "responses"),
    2: ("topics", "name", "partitions", "partition_index", "topics"),
}


# Produce needs Write, Fetch Read, ListOffsets Describe on each topic.
_OPERATION = {0: Operation.WRITE, 1: Operation.READ, 2: Operation.DESCRIBE}
TOPIC_AUTHORIZATION_FAILED = 29


async def handle(ctx: BrokerContext, conn: Connection, request: Request) -> Any:
    topics_f, name_f, parts_f, index_f, resp_f = _SHAPES[request.api_key]
    body = request.body
    if request.api_key == 1:
        body = dataclasses.replace(body, session_id=0, session_epoch=-1)
    by_leader: dict[int, dict[int, list[Any]]] = defaultdict(lambda: defaultdict(list))
    topics = getattr(body, topics_f)
    refused: list[Any] = []
    for ti, topic in enumerate(topics):
        name = _topic_name(ctx, topic, name_f)
        if not ctx.allowed(conn, _OPERATION[request.api_key], ResourceType.TOPIC, name):
            refused.append(topic)
            continue
        for part in getattr(topic, parts_f):
            leader = await _leader(ctx, name, getattr(part, index_f))
            by_leader[leader][ti].append(part)
    if refused and not by_leader:  # nothing left to forward
        if request.api_key == 0 and getattr(body, "acks", 1) == 0:
            return None
        return _refusal(request, [], refused)
    if not by_leader:
        node = ctx.upstream.client.get_random_node()
        by_leader[node if node is not None else -1] = {}
    calls = []
    for leader, parts in by_leader.items():
        sub = dataclasses.replace(
            body,
            **{
                topics_f: tuple(
                    dataclasses.replace(topics[ti], **{parts_f: tuple(ps)})
                    for ti, ps in parts.items()
                )
            },
        )
        calls.append(_send(ctx, leader, sub, request))
    responses = [r for r in await asyncio.gather(*calls) if r is not None]
    if not responses:
        return None  # acks=0 produce: no response
    first = responses[0]
    if len(responses) == 1 and not refused:
        return first
    merged = tuple(t for r in responses for t in getattr(r, resp_f))
    if refused:
        return _refusal(request, merged, refused, first)
    return dataclasses.replace(first, **{resp_f: merged})


def _refusal(request: Request, answered: Any, refused: list[Any], base: Any = None) -> Any:
    """The response with TOPIC_AUTHORIZATION_FAILED for every partition of ``refused``."""
    resp_f = _SHAPES[request.api_key][4]
    cls = load_response_schema(request.api_key, request.api_version)
    m = schema_module(cls)
    code = error(TOPIC_AUTHORIZATION_FAILED)
    out = list(answered)
    for topic in refused:
        if request.api_key == 0:
            parts = tuple(
                build(
                    m.PartitionProduceResponse,
                    index=p.index,
                    error_code=code,
                    base_offset=-1,
                    log_append_time=None,
                    log_start_offset=-1,
                    record_errors=(),
                    error_message="not authorized to write to the topic",
                )
                for p in topic.partition_data
            )
            out.append(build(m.TopicProduceResponse, name=topic.name, partition_responses=parts))
        elif request.api_key == 1:
            parts = tuple(
                build(
                    m.PartitionData,
                    partition_index=p.partition,
                    error_code=code,
                    high_watermark=-1,
                    last_stable_offset=-1,
                    log_start_offset=-1,
                    aborted_transactions=None,
                    preferred_read_replica=-1,
                    records=None,
                )
                for p in topic.partitions
            )
            out.append(
                build(
                    m.FetchableTopicResponse,
                    topic=getattr(topic, "topic", None),
                    topic_id=getattr(topic, "topic_id", None),
                    partitions=parts,
                )
            )
        else:
            parts = tuple(
                build(
                    m.ListOffsetsPartitionResponse,
                    partition_index=p.partition_index,
                    error_code=code,
                    timestamp=-1,
                    offset=-1,
                    leader_epoch=-1,
                    old_style_offsets=(),
                )
                for p in topic.partitions
            )
            out.append(build(m.ListOffsetsTopicResponse, name=topic.name, partitions=parts))
    if base is not None:
        return dataclasses.replace(base, **{resp_f: tuple(out)})
    return build(
        cls,
        throttle_time=timedelta(0),
        error_code=error(0),
        session_id=0,
        node_endpoints=(),
        **{resp_f: tuple(out)},
    )


def _topic_name(ctx: BrokerContext, topic: Any, name_f: str) -> str:
    name = getattr(topic, name_f, None)
    if name:
        return name
    info = ctx.upstream.topics_by_id.get(getattr(topic, "topic_id", None))
    return info.name if info else ""


async def _leader(ctx: BrokerContext, topic: str, partition: int) -> int:
    try:
        return await ctx.upstream.leader_for(topic, partition)
    except UpstreamError:
        node = ctx.upstream.client.get_random_node()
        return node if node is not None else -1


async def _send(ctx: BrokerContext, node: int, body: Any, request: Request) -> Any:
    if request.api_key == 0 and getattr(body, "acks", 1) == 0:
        from shareproxy.broker.kio_over_aiokafka import KioRequest

        conn = await ctx.upstream.client._get_conn(node)
        if conn is not None:
            await conn.send(KioRequest(body), expect_response=False)
        return None
    return await ctx.upstream.send(node, body)
