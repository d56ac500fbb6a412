"""FindCoordinator v0-v6: the proxy is the coordinator of every group and transactional id a
client asks about: share groups it coordinates itself; consumer groups and transactions it
relays to the upstream coordinator (``relay.py``), which clients never see. Other key types
get COORDINATOR_NOT_AVAILABLE."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from shareproxy.core.acl import Operation, ResourceType
from shareproxy.core.errors import ErrorCode
from shareproxy.kafka.context import BrokerContext, Connection, build, error, schema_module
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


async def handle(ctx: BrokerContext, conn: Connection, request: Request) -> Any:
    cls = response_type(request.api_key, request.api_version)
    body = request.body
    key_type = getattr(body, "key_type", CoordinatorType.GROUP)
    served = key_type in _KEYS
    resource, denied = _KEYS.get(key_type, (ResourceType.GROUP, ErrorCode.NONE))
    host, port = ctx.address(conn)
    code = ErrorCode.NONE if served else ErrorCode.COORDINATOR_NOT_AVAILABLE
    message = None if served else "shareproxy coordinates groups and transactions only"
    if request.api_version < 4:
        if served and not ctx.allowed(conn, Operation.DESCRIBE, resource, body.key):
            code, message = denied, "not authorized"
            served = False
        return build(
            cls,
            throttle_time=timedelta(0),
            error_code=error(code),
            error_message=message,
            node_id=ctx.node_id if served else -1,
            host=host if served else "",
            port=port if served else -1,
        )
    m = schema_module(cls)

    def coordinator(key: str) -> Any:
        ok, c, why = served, code, message
        if ok and not ctx.allowed(conn, Operation.DESCRIBE, resource, key):
            ok, c, why = False, denied, "not authorized"
        return m.Coordinator(
            key=key,
            node_id=ctx.node_id if ok else -1,
            host=host if ok else "",
            port=port if ok else -1,
            error_code=error(c),
            error_message=why,
        )

    return cls(
        throttle_time=timedelta(0),
        coordinators=tuple(coordinator(key) for key in body.coordinator_keys),
    )
