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


# The response's (topic entry, partition entry) classes per API, and the values every field
# of a refused partition gets; ``build`` keeps only the fields a version has.
_ENTRIES = {
    0: ("TopicProduceResponse", "partition_responses", "PartitionProduceResponse"),
    1: ("FetchableTopicResponse", "partitions", "PartitionData"),
    2: ("ListOffsetsTopicResponse", "partitions", "ListOffsetsPartitionResponse"),
}
_NOTHING = {
    "base_offset": -1,
    "log_append_time": None,
    "log_start_offset": -1,
    "record_errors": (),
    "error_message": "not authorized for the topic",
    "high_watermark": -1,
    "last_stable_offset": -1,
    "aborted_transactions": None,
    "preferred_read_replica": -1,
    "records": None,
    "timestamp": -1,
    "offset": -1,
    "leader_epoch": -1,
    "old_style_offsets": (),
}


def _refusal(request: Request, answered: Any, refused: list[Any], base: Any = None) -> Any:
    """The response with TOPIC_AUTHORIZATION_FAILED for every partition of ``refused``."""
    _, name_f, parts_f, index_f, resp_f = _SHAPES[request.api_key]
    cls = load_response_schema(request.api_key, request.api_version)
    m = schema_module(cls)
    topic_cls, topic_parts_f, part_cls = _ENTRIES[request.api_key]
    code = error(TOPIC_AUTHORIZATION_FAILED)
    out = list(answered)
    for topic in refused:
        parts = tuple(
            build(
                getattr(m, part_cls),
                index=getattr(p, index_f),
                partition_index=getattr(p, index_f),
                error_code=code,
                **_NOTHING,
            )
            for p in getattr(topic, parts_f)
        )
        name = getattr(topic, name_f, None)
        out.append(
            build(
                getattr(m, topic_cls),
                name=name,
                topic=name,
                topic_id=getattr(topic, "topic_id", None),
                **{topic_parts_f: parts},
            )
        )
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
