"""ApiVersions: exactly what the proxy serves (a client believes it)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from kio.index import load_response_schema

from shareproxy.broker.context import BrokerContext, Connection, build, error, schema_module
from shareproxy.protocol.codec import Request

UNSUPPORTED_VERSION = 35


def response(served: dict[int, tuple[int, int]], api_version: int, error_code: int = 0) -> Any:
    cls = load_response_schema(18, api_version)
    module = schema_module(cls)
    keys = tuple(
        module.ApiVersion(api_key=k, min_version=lo, max_version=hi)
        for k, (lo, hi) in sorted(served.items())
    )
    return build(cls, error_code=error(error_code), api_keys=keys, throttle_time=timedelta(0))


async def handle(ctx: BrokerContext, conn: Connection, request: Request) -> Any:
    from shareproxy.broker.dispatch import SERVED

    return response(SERVED, request.api_version)
