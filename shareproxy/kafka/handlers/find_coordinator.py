"""FindCoordinator v0-v6: the node placement gives the key coordinates it (every node names the
same one; with one node, that node): share groups it coordinates itself; consumer groups and
transactions it relays to the upstream coordinator (``relay.py``), which clients never see.
Other key types get COORDINATOR_NOT_AVAILABLE."""

from __future__ import annotations

from datetime import timedelta

from shareproxy.core.acl import Operation, ResourceType
from shareproxy.core.errors import ErrorCode
from shareproxy.kafka.context import Connection
from shareproxy.kafka.contexts import ClusterView
from shareproxy.kafka.responses import KioEntity, build, error, schema_module
from shareproxy.protocol.api_keys import CoordinatorType
from shareproxy.protocol.codec import Request, response_type

# key type → the resource a principal must be allowed to Describe, and the error if not
_KEYS = {
    CoordinatorType.GROUP: (ResourceType.GROUP, ErrorCode.GROUP_AUTHORIZATION_FAILED),
    CoordinatorType.TRANSACTION: (
        ResourceType.TRANSACTIONAL_ID,
        ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    ),
}


async def handle(ctx: ClusterView, conn: Connection, request: Request) -> KioEntity:
    cls = response_type(request.api_key, request.api_version)
    body = request.body
    key_type = getattr(body, "key_type", CoordinatorType.GROUP)
    served = key_type in _KEYS
    resource, denied = _KEYS.get(key_type, (ResourceType.GROUP, ErrorCode.NONE))
    code = ErrorCode.NONE if served else ErrorCode.COORDINATOR_NOT_AVAILABLE
    message = None if served else "shareproxy coordinates groups and transactions only"

    def find(key: str) -> tuple[int, str, int, int, str | None]:
        """node id, host, port, error code, message"""
        if not served:
            return -1, "", -1, code, message
        if not ctx.allowed(conn, Operation.DESCRIBE, resource, key):
            return -1, "", -1, denied, "not authorized"
        node_id = ctx.group_coordinator(key)
        endpoint = ctx.node_address(node_id, conn)
        if endpoint is None:
            return -1, "", -1, ErrorCode.COORDINATOR_NOT_AVAILABLE, f"node {node_id} is away"
        return node_id, endpoint[0], endpoint[1], ErrorCode.NONE, None

    if request.api_version < 4:
        node_id, host, port, c, why = find(body.key)
        return build(
            cls,
            throttle_time=timedelta(0),
            error_code=error(c),
            error_message=why,
            node_id=node_id,
            host=host,
            port=port,
        )
    m = schema_module(cls)

    def coordinator(key: str) -> KioEntity:
        node_id, host, port, c, why = find(key)
        return m.Coordinator(
            key=key,
            node_id=node_id,
            host=host,
            port=port,
            error_code=error(c),
            error_message=why,
        )

    return cls(
        throttle_time=timedelta(0),
        coordinators=tuple(coordinator(key) for key in body.coordinator_keys),
    )
