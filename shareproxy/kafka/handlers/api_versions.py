"""ApiVersions: exactly what the proxy serves (a client believes it). The client software it
names (v3+) is kept on the connection: librdkafka fetches one node at a time and is answered
sooner by a node with nothing for it (kafka.client_software)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta

from shareproxy.core.errors import ErrorCode
from shareproxy.kafka.client_software import fetches_one_leader_at_a_time
from shareproxy.kafka.context import Connection
from shareproxy.kafka.contexts import VersionsContext
from shareproxy.kafka.responses import KioEntity, build, error, schema_module
from shareproxy.protocol.api_keys import ApiKey
from shareproxy.protocol.codec import Request, response_type


def response(
    served: Mapping[int, tuple[int, int]], api_version: int, code: int = ErrorCode.NONE
) -> KioEntity:
    cls = response_type(ApiKey.API_VERSIONS, api_version)
    module = schema_module(cls)
    keys = tuple(
        module.ApiVersion(api_key=k, min_version=lo, max_version=hi)
        for k, (lo, hi) in sorted(served.items())
    )
    return build(cls, error_code=error(code), api_keys=keys, throttle_time=timedelta(0))


async def handle(ctx: VersionsContext, conn: Connection, request: Request) -> KioEntity:
    name = getattr(request.body, "client_software_name", None)  # v3+
    if name is not None:
        version = getattr(request.body, "client_software_version", None)
        conn.one_leader_at_a_time = fetches_one_leader_at_a_time(name, version)
    return response(ctx.served, request.api_version)
