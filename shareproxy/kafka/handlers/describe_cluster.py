"""DescribeCluster: the cluster a client sees is the live proxy nodes, named under the upstream
cluster's id, as Metadata answers (Kafka's admin client asks this first)."""

from __future__ import annotations

from datetime import timedelta

from shareproxy.core.acl import UNREQUESTED_OPERATIONS
from shareproxy.core.errors import ErrorCode
from shareproxy.kafka.context import Connection
from shareproxy.kafka.contexts import ClusterView
from shareproxy.kafka.responses import KioEntity, build, error, schema_module
from shareproxy.protocol.codec import Request, response_type

BROKERS_ENDPOINT = 1  # KIP-919's EndpointType: 1 brokers, 2 controllers
CONTROLLERS_ENDPOINT = 2


async def handle(ctx: ClusterView, conn: Connection, request: Request) -> KioEntity:
    cls = response_type(request.api_key, request.api_version)
    body = request.body
    endpoint = getattr(body, "endpoint_type", BROKERS_ENDPOINT)
    if endpoint != BROKERS_ENDPOINT:  # as a broker's listener: controllers are not served here
        code = (
            ErrorCode.MISMATCHED_ENDPOINT_TYPE
            if endpoint == CONTROLLERS_ENDPOINT
            else ErrorCode.UNSUPPORTED_ENDPOINT_TYPE
        )
        return build(
            cls,
            throttle_time=timedelta(0),
            error_code=error(code),
            error_message=f"endpoint type {endpoint} is not served here; brokers are (1)",
            endpoint_type=endpoint,
            cluster_id="",
            controller_id=-1,
            brokers=(),
            cluster_authorized_operations=UNREQUESTED_OPERATIONS,
        )
    brokers = tuple(
        build(
            schema_module(cls).DescribeClusterBroker,
            broker_id=node_id,
            host=host,
            port=port,
            rack=None,
            is_fenced=False,
        )
        for node_id, host, port in ctx.nodes(conn)
    )
    return build(
        cls,
        throttle_time=timedelta(0),
        error_code=error(ErrorCode.NONE),
        error_message=None,
        endpoint_type=BROKERS_ENDPOINT,
        cluster_id=ctx.cluster_id,
        controller_id=ctx.controller_id,
        brokers=brokers,
        cluster_authorized_operations=(
            ctx.cluster_operations(conn)
            if body.include_cluster_authorized_operations
            else UNREQUESTED_OPERATIONS
        ),
    )
