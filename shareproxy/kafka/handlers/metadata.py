"""Metadata: the brokers are the live proxy nodes, and each partition's leader is the node that
placement gives it (with one node, that node leads everything); topic ids are the
upstream cluster's."""

from __future__ import annotations

from datetime import timedelta
from types import ModuleType
from typing import Any, TypeVar

from shareproxy.core.acl import UNREQUESTED_OPERATIONS, Operation, ResourceType
from shareproxy.core.errors import ErrorCode
from shareproxy.core.names import topic_name_problem
from shareproxy.kafka.context import Connection
from shareproxy.kafka.contexts import ClusterView
from shareproxy.kafka.responses import KioEntity, build, build_loose, error, schema_module
from shareproxy.protocol.codec import Request, response_type
from shareproxy.upstream.client import TopicInfo, UpstreamError

T = TypeVar("T")


async def handle(ctx: ClusterView, conn: Connection, request: Request) -> KioEntity:
    cls = response_type(request.api_key, request.api_version)
    m = schema_module(cls)
    body = request.body
    wanted = body.topics
    if (
        wanted
        and request.api_version < 12
        and any(t.name is None or getattr(t, "topic_id", None) is not None for t in wanted)
    ):  # as Kafka: no topic ids before v12, so every name must be given
        return _invalid(cls, m, wanted)
    try:
        if wanted is None:
            await ctx.refresh_metadata()
        else:
            names = [t.name for t in wanted if t.name and topic_name_problem(t.name) is None]
            ids = [t.topic_id for t in wanted if getattr(t, "topic_id", None)]
            if ids and any(ctx.topic_by_id(i) is None for i in ids):
                await ctx.refresh_metadata()
            elif names:
                await ctx.refresh_metadata(names)
    except UpstreamError:
        pass  # answer from what is known; unknown topics get their error below
    topics = []
    if wanted is None:  # all topics: those the principal may Describe, silently
        chosen = [
            info
            for info in ctx.known_topics()
            if ctx.allowed(conn, Operation.DESCRIBE, ResourceType.TOPIC, info.name, audit=False)
        ]
    else:
        chosen = []
        for t in wanted:
            tid = getattr(t, "topic_id", None)
            info = ctx.topic_by_id(tid) if tid is not None else ctx.topic(t.name)
            name = info.name if info is not None else t.name
            if info is None and name and topic_name_problem(name) is not None:
                code = ErrorCode.INVALID_TOPIC_EXCEPTION  # never asked of the cluster
            elif name and not ctx.allowed(conn, Operation.DESCRIBE, ResourceType.TOPIC, name):
                code = ErrorCode.TOPIC_AUTHORIZATION_FAILED  # whether or not it exists
            elif info is not None:
                chosen.append(info)
                continue
            else:
                code = (
                    ErrorCode.UNKNOWN_TOPIC_ID
                    if tid is not None
                    else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                )
            topics.append(
                build(
                    m.MetadataResponseTopic,
                    error_code=error(code),
                    name=t.name,
                    topic_id=tid,
                    is_internal=False,
                    partitions=(),
                    topic_authorized_operations=UNREQUESTED_OPERATIONS,
                )
            )
    for info in chosen:
        partitions = led_partitions(ctx, info, m.MetadataResponsePartition)
        topics.append(
            build(
                m.MetadataResponseTopic,
                error_code=error(0),
                name=info.name,
                topic_id=info.topic_id,
                is_internal=False,
                partitions=partitions,
                topic_authorized_operations=(
                    ctx.authorized_operations(conn, ResourceType.TOPIC, info.name)
                    if getattr(body, "include_topic_authorized_operations", False)
                    else UNREQUESTED_OPERATIONS
                ),
            )
        )
    brokers = tuple(
        build(m.MetadataResponseBroker, node_id=node_id, host=host, port=port, rack=None)
        for node_id, host, port in ctx.nodes(conn)
    )
    return build(
        cls,
        throttle_time=timedelta(0),
        brokers=brokers,
        cluster_id=ctx.cluster_id,
        controller_id=ctx.controller_id,
        topics=tuple(topics),
        cluster_authorized_operations=(
            ctx.cluster_operations(conn)
            if getattr(body, "include_cluster_authorized_operations", False)
            else UNREQUESTED_OPERATIONS
        ),
        error_code=error(0),
    )


# the partitions last described, per topic, entry type and placement: every client asks for
# the same topics while nothing changes; forgotten at this many, as topics come and go
_LED_REMEMBERED = 1_000
_led: dict[tuple[Any, ...], tuple[Any, ...]] = {}


def led_partitions(ctx: ClusterView, info: TopicInfo, entry: type[T]) -> tuple[T, ...]:
    """A topic's partitions as a client sees them: each led and held by its placed node, at
    the cluster's generation as leader epoch. Metadata's and DescribeTopicPartitions' entries
    differ, hence ``build_loose``. The placement is a function of the live nodes, so an answer
    is remembered for as long as they, the generation and the topic's partitions stay."""
    key = (entry, info.topic_id, ctx.leader_epoch, tuple(ctx.live_nodes), tuple(info.leaders))
    found = _led.get(key)
    if found is None:
        found = _described(ctx, info, entry)
        if len(_led) >= _LED_REMEMBERED:
            _led.clear()
        _led[key] = found
    return found


def _described(ctx: ClusterView, info: TopicInfo, entry: type[T]) -> tuple[T, ...]:
    none, epoch, topic_id = error(0), ctx.leader_epoch, info.topic_id
    return tuple(
        build_loose(
            entry,
            {
                "error_code": none,
                "partition_index": p,
                "leader_id": (leader := ctx.leader_of(topic_id, p)),
                "leader_epoch": epoch,
                "replica_nodes": (leader,),
                "isr_nodes": (leader,),
                # DescribeTopicPartitions: Kafka sends empty lists, its client reads them
                "eligible_leader_replicas": (),
                "last_known_elr": (),
                "offline_replicas": (),
            },
        )
        for p in sorted(info.leaders)
    )


def _invalid(cls: type, m: ModuleType, wanted: Any) -> KioEntity:
    """Kafka's answer to topic ids before v12: INVALID_REQUEST for every topic asked for."""
    topics = tuple(
        build(
            m.MetadataResponseTopic,
            error_code=error(ErrorCode.INVALID_REQUEST),
            name=t.name or "",
            topic_id=getattr(t, "topic_id", None),
            is_internal=False,
            partitions=(),
            topic_authorized_operations=UNREQUESTED_OPERATIONS,
        )
        for t in wanted
    )
    return build(
        cls,
        throttle_time=timedelta(0),
        brokers=(),
        cluster_id=None,
        controller_id=-1,
        topics=topics,
        cluster_authorized_operations=UNREQUESTED_OPERATIONS,
    )
