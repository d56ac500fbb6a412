"""Configs of the upstream cluster's resources (topics, brokers, broker loggers, client
metrics) in DescribeConfigs, AlterConfigs and IncrementalAlterConfigs: checked against the
principal's ACLs, then sent to the upstream broker that owns them; group configs stay with the
proxy (``group_configs_rpcs.py``). Clients know one broker, the proxy: a BROKER resource that
names the proxy's node id is asked of one upstream broker, and answered under the proxy's id."""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from typing import Any

from shareproxy.core.acl import CLUSTER_NAME, Operation, ResourceType
from shareproxy.core.errors import ErrorCode
from shareproxy.kafka.context import Connection
from shareproxy.kafka.contexts import RelayContext
from shareproxy.kafka.routes import DENIED
from shareproxy.protocol.api_keys import ApiKey
from shareproxy.protocol.codec import Request, response_type
from shareproxy.protocol.error_response import error_entity, list_entry_type
from shareproxy.upstream.client import UpstreamError

TOPIC, BROKER, BROKER_LOGGER = 2, 4, 8  # ConfigResource.Type
PER_BROKER = (BROKER, BROKER_LOGGER)

# the response list and its entry type per API
_RESULTS = {
    ApiKey.DESCRIBE_CONFIGS: "results",
    ApiKey.ALTER_CONFIGS: "responses",
    ApiKey.INCREMENTAL_ALTER_CONFIGS: "responses",
}
_OPERATION = {
    ApiKey.DESCRIBE_CONFIGS: Operation.DESCRIBE_CONFIGS,
    ApiKey.ALTER_CONFIGS: Operation.ALTER_CONFIGS,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: Operation.ALTER_CONFIGS,
}


async def answer(
    ctx: RelayContext, conn: Connection, request: Request, resources: list[Any]
) -> dict[int, Any]:
    """Each resource's result entry, keyed by ``id()`` of the request's resource entry."""
    cls = response_type(request.api_key, request.api_version)
    results_field = _RESULTS[ApiKey(request.api_key)]
    entry_cls = list_entry_type(cls, results_field)
    out: dict[int, Any] = {}
    by_node: dict[int, list[Any]] = defaultdict(list)
    upstream_name: dict[int, str] = {}
    for resource in resources:
        refused = _refused(ctx, conn, request.api_key, resource)
        if refused is not None:
            out[id(resource)] = error_entity(entry_cls, *refused, resource)
            continue
        try:
            node = await _node(ctx, resource)
        except UpstreamError as e:
            out[id(resource)] = error_entity(entry_cls, e.code, e.message, resource)
            continue
        if resource.resource_type in PER_BROKER and resource.resource_name:
            upstream_name[id(resource)] = str(node)
        by_node[node].append(resource)
    link = ctx.link(conn)
    for node, asked in by_node.items():
        sent = tuple(
            dataclasses.replace(r, resource_name=upstream_name[id(r)])
            if id(r) in upstream_name
            else r
            for r in asked
        )
        try:
            got = await link.send(node, dataclasses.replace(request.body, resources=sent))
        except UpstreamError as e:
            for r in asked:
                out[id(r)] = error_entity(entry_cls, e.code, e.message, r)
            continue
        for r, result in zip(asked, getattr(got, results_field), strict=False):
            out[id(r)] = dataclasses.replace(result, resource_name=r.resource_name)
    return out


def _refused(
    ctx: RelayContext, conn: Connection, api_key: int, resource: Any
) -> tuple[int, str] | None:
    operation = _OPERATION[ApiKey(api_key)]
    if resource.resource_type == TOPIC:
        kind, name = ResourceType.TOPIC, resource.resource_name
    else:
        kind, name = ResourceType.CLUSTER, CLUSTER_NAME
    if ctx.allowed(conn, operation, kind, name):
        return None
    return DENIED[kind], f"not authorized to {operation.name} {resource.resource_name!r}"


async def _node(ctx: RelayContext, resource: Any) -> int:
    """The upstream broker to ask: for a broker's own configs, one broker stands for the
    proxy's node; a resource with no name (cluster-wide defaults) or a topic: any broker."""
    named = resource.resource_type in PER_BROKER and resource.resource_name
    if named and resource.resource_name != str(ctx.node_id):
        raise UpstreamError(
            f"broker {resource.resource_name} is not known here (the proxy is node {ctx.node_id})",
            ErrorCode.INVALID_REQUEST,
        )
    return await ctx.any_upstream_node()
