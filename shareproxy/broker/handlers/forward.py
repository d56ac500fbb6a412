"""Produce, Fetch and ListOffsets pass through to the upstream leaders, so the one endpoint also
serves producers and plain readers. The request is split by upstream leader and the answers
joined; Fetch goes sessionless upstream (the client is told session id 0)."""

from __future__ import annotations

import asyncio
import dataclasses
from collections import defaultdict
from typing import Any

from shareproxy.broker.context import BrokerContext, Connection
from shareproxy.broker.upstream import UpstreamError
from shareproxy.protocol.codec import Request

# api key -> (request topics field, topic name field, partitions field, partition index field,
#             response topics field)
_SHAPES = {
    0: ("topic_data", "name", "partition_data", "index", "responses"),
    1: ("topics", "topic", "partitions", "partition", "responses"),
    2: ("topics", "name", "partitions", "partition_index", "topics"),
}


async def handle(ctx: BrokerContext, conn: Connection, request: Request) -> Any:
    topics_f, name_f, parts_f, index_f, resp_f = _SHAPES[request.api_key]
    body = request.body
    if request.api_key == 1:
        body = dataclasses.replace(body, session_id=0, session_epoch=-1)
    by_leader: dict[int, dict[int, list[Any]]] = defaultdict(lambda: defaultdict(list))
    topics = getattr(body, topics_f)
    for ti, topic in enumerate(topics):
        name = _topic_name(ctx, topic, name_f)
        for part in getattr(topic, parts_f):
            leader = await _leader(ctx, name, getattr(part, index_f))
            by_leader[leader][ti].append(part)
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
    if len(responses) == 1:
        return first
    merged = tuple(t for r in responses for t in getattr(r, resp_f))
    return dataclasses.replace(first, **{resp_f: merged})


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
