"""Produce, Fetch, ListOffsets, DeleteRecords and OffsetForLeaderEpoch pass through to the
upstream partition leaders, so the one endpoint also serves producers and plain readers.
The request is split by upstream leader and the answers
joined; Fetch goes sessionless upstream (the client is told session id 0). Each client
connection forwards over its own upstream connections, so one client's request that breaks
a connection fails only that client's partitions, with a retriable error."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import struct
from collections import defaultdict
from datetime import timedelta
from typing import Any
from uuid import UUID

from shareproxy.core.acl import Operation, ResourceType
from shareproxy.core.errors import ErrorCode
from shareproxy.core.names import topic_name_problem
from shareproxy.kafka.context import Connection, Pending, Relayed
from shareproxy.kafka.contexts import RelayContext
from shareproxy.kafka.handlers import produce_errors
from shareproxy.kafka.responses import KioEntity, build_loose, error, schema_module
from shareproxy.protocol.api_keys import ApiKey, api_name
from shareproxy.protocol.codec import RawResponse, Request, response_type
from shareproxy.protocol.forward_rules import partition_problem, request_problem
from shareproxy.telemetry.logs import RateLimit
from shareproxy.upstream.client import UpstreamError

log = logging.getLogger(__name__)
log.addFilter(RateLimit())  # what clients send decides how often these lines come

# api key -> (request topics field, topic name field, partitions field, partition index field,
#             response topics field); keyed by the request's int api key, as are the tables below
_SHAPES: dict[int, tuple[str, str, str, str, str]] = {
    ApiKey.PRODUCE: ("topic_data", "name", "partition_data", "index", "responses"),
    ApiKey.FETCH: ("topics", "topic", "partitions", "partition", "responses"),
    ApiKey.LIST_OFFSETS: ("topics", "name", "partitions", "partition_index", "topics"),
    ApiKey.DELETE_RECORDS: ("topics", "name", "partitions", "partition_index", "topics"),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: ("topics", "topic", "partitions", "partition", "topics"),
}


# Produce needs Write, Fetch Read, ListOffsets Describe on each topic.
_OPERATION: dict[int, Operation] = {
    ApiKey.PRODUCE: Operation.WRITE,
    ApiKey.FETCH: Operation.READ,
    ApiKey.LIST_OFFSETS: Operation.DESCRIBE,
    ApiKey.DELETE_RECORDS: Operation.DELETE,
    ApiKey.OFFSET_FOR_LEADER_EPOCH: Operation.DESCRIBE,
}

# partitions answered by the proxy itself: (topic entry, its partitions, error code, message)
Failed = tuple[Any, list[Any], int, str]


async def handle(
    ctx: RelayContext, conn: Connection, request: Request
) -> KioEntity | Relayed | None:
    topics_f, name_f, parts_f, index_f, resp_f = _SHAPES[request.api_key]
    body = request.body
    if request.api_key == ApiKey.FETCH and request.api_version >= 7:  # v7 brought fetch sessions
        body = dataclasses.replace(body, session_id=0, session_epoch=-1, forgotten_topics_data=())
    by_leader: dict[int, dict[int, list[Any]]] = defaultdict(lambda: defaultdict(list))
    topics = getattr(body, topics_f)
    failed: list[Failed] = []
    routed: dict[str, UUID | None] = {}  # Produce: each topic's id as the request was routed
    refused = request_problem(request.api_key, request.api_version, body)
    if refused is not None:  # Fetch or ListOffsets: never without an answer
        return _errors_response(
            request, [], [(t, list(getattr(t, parts_f)), *refused) for t in topics]
        )
    for ti, topic in enumerate(topics):
        name = _topic_name(ctx, topic, name_f)
        parts = getattr(topic, parts_f)
        problem = topic_name_problem(name)
        if problem is not None:  # no such topic can exist: not asked of the cluster
            failed.append((topic, list(parts), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, problem))
            continue
        if not ctx.allowed(conn, _OPERATION[request.api_key], ResourceType.TOPIC, name):
            failed.append((topic, list(parts), ErrorCode.TOPIC_AUTHORIZATION_FAILED, _DENIED))
            continue
        for part in parts:
            index = getattr(part, index_f)
            wrong = partition_problem(request.api_key, request.api_version, part, index)
            if wrong is not None:
                failed.append((topic, [part], *wrong))
                continue
            leader = await _leader(ctx, name, index)
            by_leader[leader][ti].append(part)
        if request.api_key == ApiKey.PRODUCE:
            info = ctx.topic(name)
            routed[name] = info.topic_id if info is not None else None
    acks_zero = request.api_key == ApiKey.PRODUCE and getattr(body, "acks", 1) == 0
    if failed and not by_leader:  # nothing left to forward
        return None if acks_zero else _errors_response(request, [], failed)
    if not by_leader:
        by_leader[await _any_node(ctx)] = {}
    link = ctx.link(conn)
    if request.api_key == ApiKey.FETCH and request.api_version >= 7:
        request = _sessionless(request)
    if len(by_leader) == 1 and not failed and not acks_zero and request.raw_body:
        # one leader takes all of it, as sent: relayed as bytes, answered as bytes
        (leader,) = by_leader
        try:
            answer = await link.start_relay(leader, request)
        except UpstreamError as e:
            return _relay_failed(request, topics, parts_f, e)
        if request.api_key == ApiKey.PRODUCE:
            return Relayed(answer, functools.partial(_produced, ctx, request, topics, routed))
        return Relayed(answer, functools.partial(_fetched, request, topics, parts_f))
    if acks_zero:  # sent with acks=1 and the answer dropped: an upstream that answers acks=0
        body = dataclasses.replace(body, acks=1)  # anyway would otherwise desynchronise the link
    subs = [
        (
            leader,
            dataclasses.replace(
                body,
                **{
                    topics_f: tuple(
                        dataclasses.replace(topics[ti], **{parts_f: tuple(ps)})
                        for ti, ps in parts.items()
                    )
                },
            ),
        )
        for leader, parts in by_leader.items()
    ]
    results = await asyncio.gather(
        *(link.send(leader, sub) for leader, sub in subs),
        return_exceptions=True,
    )
    if acks_zero:
        return None  # no response, whatever happened
    responses = []
    for (_, sub), result in zip(subs, results, strict=True):
        if isinstance(result, UpstreamError):
            log.warning("%s: %s", api_name(request.api_key), result)
            failed += [
                (t, list(getattr(t, parts_f)), result.code, result.message)
                for t in getattr(sub, topics_f)
            ]
        elif isinstance(result, BaseException):
            raise result
        else:
            responses.append(result)
    if not failed and len(responses) == 1:
        joined = responses[0]
    else:
        merged = tuple(t for r in responses for t in getattr(r, resp_f))
        joined = _errors_response(request, merged, failed, responses[0] if responses else None)
    if request.api_key == ApiKey.PRODUCE:
        return await produce_errors.retriable_if_deleted(ctx, joined, routed)
    return joined


_DENIED = "not authorized for the topic"


# The response's (topic entry, partition entry) classes per API, and the values every field
# of a refused partition gets; ``build_loose`` keeps only the fields a version has.
_ENTRIES: dict[int, tuple[str, str, str]] = {
    ApiKey.PRODUCE: ("TopicProduceResponse", "partition_responses", "PartitionProduceResponse"),
    ApiKey.FETCH: ("FetchableTopicResponse", "partitions", "PartitionData"),
    ApiKey.LIST_OFFSETS: ("ListOffsetsTopicResponse", "partitions", "ListOffsetsPartitionResponse"),
    ApiKey.DELETE_RECORDS: (
        "DeleteRecordsTopicResult",
        "partitions",
        "DeleteRecordsPartitionResult",
    ),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: ("OffsetForLeaderTopicResult", "partitions", "EpochEndOffset"),
}
_NOTHING = {
    "base_offset": -1,
    "log_append_time": None,
    "log_start_offset": -1,
    "record_errors": (),
    "high_watermark": -1,
    "last_stable_offset": -1,
    "aborted_transactions": None,
    "preferred_read_replica": -1,
    "records": b"",  # empty, not null: librdkafka cannot read a null record set
    "timestamp": -1,
    "offset": -1,
    "leader_epoch": -1,
    "old_style_offsets": (),
    "low_watermark": -1,
    "end_offset": -1,
}


def _fetched(
    request: Request, topics: Any, parts_f: str, outcome: RawResponse | UpstreamError
) -> RawResponse | KioEntity:
    """A relayed request's response body: the broker's answer, or every partition failed with
    the upstream's retriable error."""
    if isinstance(outcome, UpstreamError):
        return _relay_failed(request, topics, parts_f, outcome)
    return outcome


def _produced(
    ctx: RelayContext,
    request: Request,
    topics: Any,
    routed: dict[str, UUID | None],
    outcome: RawResponse | UpstreamError,
) -> RawResponse | KioEntity | Pending:
    """``_fetched``, with a write failed by a deletion of its topic made retriable."""
    if isinstance(outcome, UpstreamError):
        return _relay_failed(request, topics, "partition_data", outcome)
    return produce_errors.checked(ctx, outcome, routed)


def _relay_failed(request: Request, topics: Any, parts_f: str, e: UpstreamError) -> KioEntity:
    """Every partition of a relayed request answered with the upstream's retriable error."""
    log.warning("%s: %s", api_name(request.api_key), e)
    failed: list[Failed] = [(t, list(getattr(t, parts_f)), e.code, e.message) for t in topics]
    return _errors_response(request, [], failed)


def _errors_response(
    request: Request, answered: Any, failed: list[Failed], base: Any = None
) -> KioEntity:
    """The upstream's answers plus, for every partition in ``failed``, the proxy's own error."""
    _, name_f, _, index_f, resp_f = _SHAPES[request.api_key]
    cls = response_type(request.api_key, request.api_version)
    m = schema_module(cls)
    topic_cls, topic_parts_f, part_cls = _ENTRIES[request.api_key]
    out = list(answered)
    for topic, partitions, code, message in failed:
        parts = tuple(
            build_loose(
                getattr(m, part_cls),
                {
                    **_NOTHING,
                    "index": getattr(p, index_f),
                    "partition_index": getattr(p, index_f),
                    "error_code": error(code),
                    "error_message": message,
                },
            )
            for p in partitions
        )
        name = getattr(topic, name_f, None)
        out.append(
            build_loose(
                getattr(m, topic_cls),
                {
                    "name": name,
                    "topic": name,
                    "topic_id": getattr(topic, "topic_id", None),
                    topic_parts_f: parts,
                },
            )
        )
    if base is not None:
        return dataclasses.replace(base, **{resp_f: tuple(out)})
    return build_loose(
        cls,
        {
            "throttle_time": timedelta(0),
            "error_code": error(0),
            "session_id": 0,
            "node_endpoints": (),
            resp_f: tuple(out),
        },
    )


def _topic_name(ctx: RelayContext, topic: Any, name_f: str) -> str:
    name = getattr(topic, name_f, None)
    if name:
        return name
    return ctx.topic_name(getattr(topic, "topic_id", None)) or ""


async def _leader(ctx: RelayContext, topic: str, partition: int) -> int:
    """The upstream leader; for a partition the proxy cannot place, any broker (which then
    answers UNKNOWN_TOPIC_OR_PARTITION itself)."""
    try:
        return await ctx.upstream_leader(topic, partition)
    except UpstreamError:
        return await _any_node(ctx)


async def _any_node(ctx: RelayContext) -> int:
    try:
        return await ctx.any_upstream_node()
    except UpstreamError:
        return -1  # sending there fails with NETWORK_EXCEPTION for every partition


# Fetch v7-v12 bodies start replica id, max wait, min bytes, max bytes (int32 each), isolation
# level (int8), then the session id and epoch (int32 each)
_SESSION = struct.Struct(">ii")
_SESSION_AT = 17


def _sessionless(request: Request) -> Request:
    """The Fetch as sent, but sessionless upstream (session 0, epoch -1): fetch sessions live
    per broker connection, and the client's one connection to the proxy stands for several
    upstream ones. Without raw bytes to patch safely, none (the request is re-encoded)."""
    raw = request.raw_body
    body = request.body
    if (
        request.api_version > 12
        or len(raw) < _SESSION_AT + _SESSION.size
        or body.forgotten_topics_data
    ):
        return dataclasses.replace(request, raw_body=b"")
    if _SESSION.unpack_from(raw, _SESSION_AT) != (body.session_id, body.session_epoch):
        return dataclasses.replace(request, raw_body=b"")
    patched = bytearray(raw)
    _SESSION.pack_into(patched, _SESSION_AT, 0, -1)
    return dataclasses.replace(request, raw_body=bytes(patched))
