"""FindCoordinator: the proxy coordinates every group it is asked about."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from kio.index import load_response_schema

from shareproxy.broker.context import BrokerContext, Connection, build, error
from shareproxy.protocol.codec import Request


async def handle(ctx: BrokerContext, conn: Connection, request: Request) -> Any:
    cls = load_response_schema(10, request.api_version)
    return build(
        cls,
        throttle_time=timedelta(0),
        error_code=error(0),
        error_message=None,
        node_id=ctx.node_id,
        host=ctx.host,
        port=ctx.port,
    )
