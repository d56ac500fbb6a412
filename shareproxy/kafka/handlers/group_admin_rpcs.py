"""The Kafka admin RPCs for share groups, on GroupAdmin (the REST API's implementation too):
ListGroups v5, DescribeShareGroupOffsets v0-v1, AlterShareGroupOffsets, DeleteShareGroupOffsets
and DeleteGroups, so the Kafka Admin client and kafka-share-groups.sh work against the proxy."""

from __future__ import annotations

import dataclasses
from typing import Any
from uuid import UUID

from shareproxy.core.acl import CLUSTER_NAME, Operation, ResourceType
from shareproxy.core.errors import ErrorCode, ShareError, partition_error_message
from shareproxy.core.names import group_id_problem
from shareproxy.kafka.context import Connection
from shareproxy.kafka.contexts import AdminRpcContext
from shareproxy.kafka.handlers import relay, upstream_groups
from shareproxy.kafka.responses import KioEntity, build, error, schema_module
from shareproxy.kafka.routes import UPSTREAM_DELETE_GROUPS, UPSTREAM_DELETE_GROUPS_SPLIT
from shareproxy.protocol.codec import RawResponse, Request, reader_for, response_type
from shareproxy.protocol.kio_types import NO_THROTTLE
from shareproxy.upstream.client import UpstreamError

UNKNOWN_LAG = -1  # DescribeShareGroupOffsets' lag when it cannot be computed


def _module(api_key: int, request: Request) -> tuple[type, Any]:
    cls = response_type(request.api_key, request.api_version)
    return cls, schema_module(cls)


async def list_groups(ctx: AdminRpcContext, conn: Connection, request: Request) -> KioEntity:
    """The proxy's share groups and every group the upstream brokers coordinate (each broker
    lists its own), filtered by the principal's Describe permission, as Kafka does; with
    several proxy nodes, each lists the groups it coordinates."""
    cls, m = _module(16, request)
    body = request.body
    types = {t.lower() for t in getattr(body, "types_filter", ()) or ()}
    listed: list[Any] = []
    if not types or "share" in types:  # the proxy has share groups only
        shares = await ctx.admin.list_groups(getattr(body, "states_filter", ()) or ())
        listed = [
            build(
                m.ListedGroup, group_id=g, protocol_type="share", group_state=s, group_type="share"
            )
            for g, s in shares
        ]
    if types != {"share"}:
        listed += await upstream_groups.listed(ctx, conn, request)
    # Describe on the cluster lists every group; otherwise only those the principal may
    # Describe, silently (KafkaApis.handleListGroupsRequest)
    everything = ctx.allowed(
        conn, Operation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME, audit=False
    )
    visible = tuple(
        g
        for g in listed
        # admin clients ask every broker and join the answers: each group is listed by the
        # node that coordinates it (FindCoordinator's answer), so once
        if ctx.group_coordinator(g.group_id) == ctx.node_id
        and (
            everything
            or ctx.allowed(conn, Operation.DESCRIBE, ResourceType.GROUP, g.group_id, audit=False)
        )
    )
    return build(cls, throttle_time=NO_THROTTLE, error_code=error(0), groups=visible)


async def describe_share_group_offsets(
    ctx: AdminRpcContext, conn: Connection, request: Request
) -> KioEntity:
    cls, m = _module(90, request)
    out = []
    for g in request.body.groups:
        wanted = None if g.topics is None else {t.topic_name: set(t.partitions) for t in g.topics}
        unknown: list[str] = []  # named topics the cluster does not have: theirs is the error
        try:
            if not ctx.allowed(conn, Operation.DESCRIBE, ResourceType.GROUP, g.group_id):
                raise ShareError(ErrorCode.GROUP_AUTHORIZATION_FAILED, "not authorized")
            if wanted is None:
                rows = await ctx.admin.offsets(g.group_id)
            else:
                rows = []
                for name in wanted:
                    try:
                        rows += await ctx.admin.offsets(g.group_id, [name])
                    except ShareError as e:
                        if e.code != ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                            raise
                        unknown.append(name)
        except (ShareError, UpstreamError) as e:  # upstream: a topic named could not be looked up
            code, message = e.code, e.message
            out.append(
                build(
                    m.DescribeShareGroupOffsetsResponseGroup,
                    group_id=g.group_id,
                    topics=(),
                    error_code=error(code),
                    error_message=message,
                )
            )
            continue
        topics: dict[str, tuple[Any, list[Any]]] = {}
        for row in rows:
            if wanted is not None and row.partition not in wanted.get(row.topic, set()):
                continue
            o = row.offsets
            code = row.error
            if not ctx.allowed(conn, Operation.DESCRIBE, ResourceType.TOPIC, row.topic):
                o, code = None, ErrorCode.TOPIC_AUTHORIZATION_FAILED
            entry = build(
                m.DescribeShareGroupOffsetsResponsePartition,
                partition_index=row.partition,
                start_offset=o.spso if o else -1,
                leader_epoch=row.leader_epoch,
                lag=o.lag if o and o.lag is not None else UNKNOWN_LAG,
                error_code=error(code),
                error_message=None,
            )
            topics.setdefault(row.topic, (row.topic_id, []))[1].append(entry)
        asked = wanted or {}
        for name in unknown:  # as Kafka's coordinator: the topic's partitions, not the group, fail
            topics[name] = (
                UUID(int=0),
                [
                    build(
                        m.DescribeShareGroupOffsetsResponsePartition,
                        partition_index=partition,
                        start_offset=-1,
                        leader_epoch=0,
                        lag=UNKNOWN_LAG,
                        error_code=error(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
                        error_message=partition_error_message(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
                    )
                    for partition in sorted(asked[name])
                ],
            )
        out.append(
            build(
                m.DescribeShareGroupOffsetsResponseGroup,
                group_id=g.group_id,
                topics=tuple(
                    build(
                        m.DescribeShareGroupOffsetsResponseTopic,
                        topic_name=name,
                        topic_id=topic_id,
                        partitions=tuple(parts),
                    )
                    for name, (topic_id, parts) in topics.items()
                ),
                error_code=error(0),
                error_message=None,
            )
        )
    return build(cls, throttle_time=NO_THROTTLE, groups=tuple(out))


def _offsets_envelope(
    cls: type, responses: tuple[Any, ...], code: int = 0, message: str | None = None
) -> KioEntity:
    """The top level AlterShareGroupOffsets and DeleteShareGroupOffsets responses share."""
    return build(
        cls,
        throttle_time=NO_THROTTLE,
        error_code=error(code),
        error_message=message,
        responses=responses,
    )


def _readable(ctx: AdminRpcContext, conn: Connection, names: set[str]) -> set[str]:
    return {n for n in names if ctx.allowed(conn, Operation.READ, ResourceType.TOPIC, n)}


def _topic_id(ctx: AdminRpcContext, name: str) -> UUID:
    info = ctx.topic(name)
    return info.topic_id if info is not None else UUID(int=0)


async def alter_share_group_offsets(
    ctx: AdminRpcContext, conn: Connection, request: Request
) -> KioEntity:
    cls, m = _module(91, request)
    body = request.body
    if not ctx.allowed(conn, Operation.READ, ResourceType.GROUP, body.group_id):
        return _offsets_envelope(cls, (), ErrorCode.GROUP_AUTHORIZATION_FAILED, "not authorized")
    readable = _readable(ctx, conn, {t.topic_name for t in body.topics})
    wanted = {
        (t.topic_name, p.partition_index): p.start_offset
        for t in body.topics
        for p in t.partitions
        if t.topic_name in readable
    }
    try:
        results = await ctx.admin.alter_offsets(body.group_id, wanted) if wanted else {}
    except ShareError as e:
        return _offsets_envelope(cls, (), e.code, e.message)
    for t in body.topics:
        if t.topic_name not in readable:
            for p in t.partitions:
                results[(t.topic_name, p.partition_index)] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
    by_topic: dict[str, list[Any]] = {}
    for (topic, partition), code in results.items():
        by_topic.setdefault(topic, []).append(
            build(
                m.AlterShareGroupOffsetsResponsePartition,
                partition_index=partition,
                error_code=error(code),
                error_message=None,
            )
        )
    return _offsets_envelope(
        cls,
        tuple(
            build(
                m.AlterShareGroupOffsetsResponseTopic,
                topic_name=topic,
                topic_id=_topic_id(ctx, topic),
                partitions=tuple(parts),
            )
            for topic, parts in by_topic.items()
        ),
    )


async def delete_share_group_offsets(
    ctx: AdminRpcContext, conn: Connection, request: Request
) -> KioEntity:
    cls, m = _module(92, request)
    body = request.body
    if not ctx.allowed(conn, Operation.READ, ResourceType.GROUP, body.group_id):
        return _offsets_envelope(cls, (), ErrorCode.GROUP_AUTHORIZATION_FAILED, "not authorized")
    names = [t.topic_name for t in body.topics]
    readable = _readable(ctx, conn, set(names))
    try:
        results = await ctx.admin.delete_offsets(body.group_id, [n for n in names if n in readable])
    except ShareError as e:
        return _offsets_envelope(cls, (), e.code, e.message)
    results.update(
        {n: (ErrorCode.TOPIC_AUTHORIZATION_FAILED, None) for n in names if n not in readable}
    )
    return _offsets_envelope(
        cls,
        tuple(
            build(
                m.DeleteShareGroupOffsetsResponseTopic,
                topic_name=topic,
                topic_id=_topic_id(ctx, topic),
                error_code=error(code),
                error_message=message,
            )
            for topic, (code, message) in results.items()
        ),
    )


async def delete_groups(ctx: AdminRpcContext, conn: Connection, request: Request) -> KioEntity:
    """Share groups are deleted here; any other group id is the upstream cluster's."""
    cls, m = _module(42, request)
    names = request.body.groups_names
    results: dict[str, Any] = {}
    for group_id in names:  # a name no group can have is answered here, never sent upstream
        problem = group_id_problem(group_id)
        if problem is not None:
            results[group_id] = build(
                m.DeletableGroupResult,
                group_id=group_id,
                error_code=error(ErrorCode.INVALID_GROUP_ID),
            )
    ours = [g for g in names if g not in results and await ctx.admin.exists(g)]
    for group_id in ours:
        try:
            if not ctx.allowed(conn, Operation.DELETE, ResourceType.GROUP, group_id):
                raise ShareError(ErrorCode.GROUP_AUTHORIZATION_FAILED, "not authorized")
            await ctx.admin.delete_group(group_id)
            code = ErrorCode.NONE
        except ShareError as e:
            code = e.code
        results[group_id] = build(m.DeletableGroupResult, group_id=group_id, error_code=error(code))
    theirs = tuple(g for g in names if g not in results)
    if theirs:
        asked = dataclasses.replace(  # without the client's bytes, which name every group
            request, body=dataclasses.replace(request.body, groups_names=theirs), raw_body=b""
        )
        answer = await relay.split(
            ctx, conn, asked, UPSTREAM_DELETE_GROUPS, UPSTREAM_DELETE_GROUPS_SPLIT
        )
        if isinstance(answer, RawResponse):
            answer, _ = reader_for(cls)(bytes(answer.body), 0)
        for entry in answer.results:
            results[entry.group_id] = entry
    return build(cls, throttle_time=NO_THROTTLE, results=tuple(results[g] for g in names))
