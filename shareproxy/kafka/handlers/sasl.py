"""SaslHandshake v1 and SaslAuthenticate v0-v2: the client picks a mechanism, then exchanges
tokens until the SaslExchange names its principal. A failure is answered with
SASL_AUTHENTICATION_FAILED and the connection is closed after the answer (as Kafka does)."""

from __future__ import annotations

import logging
from datetime import timedelta

from shareproxy.core.errors import ErrorCode
from shareproxy.kafka.context import Connection
from shareproxy.kafka.contexts import SaslContext
from shareproxy.kafka.responses import KioEntity, build, error
from shareproxy.protocol.codec import Request, response_type
from shareproxy.security.guard import AUDIT_LOGGER
from shareproxy.security.sasl import SaslExchange, SaslFailed
from shareproxy.telemetry import metrics

log = logging.getLogger(AUDIT_LOGGER)


async def handshake(ctx: SaslContext, conn: Connection, request: Request) -> KioEntity:
    cls = response_type(request.api_key, request.api_version)
    mechanisms = tuple(ctx.sasl_mechanisms)
    code = ErrorCode.NONE
    if conn.authenticated or conn.sasl is not None:
        code = ErrorCode.ILLEGAL_SASL_STATE
    elif request.body.mechanism not in mechanisms:
        code = ErrorCode.UNSUPPORTED_SASL_MECHANISM
    else:
        conn.sasl = SaslExchange(request.body.mechanism, ctx.credential)
    if code != ErrorCode.NONE:
        conn.close_after_response = True
    return build(cls, error_code=error(code), mechanisms=mechanisms)


async def authenticate(ctx: SaslContext, conn: Connection, request: Request) -> KioEntity:
    cls = response_type(request.api_key, request.api_version)

    def reply(code: ErrorCode, message: str | None, token: bytes = b"") -> KioEntity:
        return build(
            cls,
            error_code=error(code),
            error_message=message,
            auth_bytes=token,
            session_lifetime=timedelta(0),
        )

    exchange = conn.sasl
    if exchange is None or conn.authenticated:
        conn.close_after_response = True
        return reply(ErrorCode.ILLEGAL_SASL_STATE, "SaslHandshake must come first, once")
    try:
        token = exchange.step(request.body.auth_bytes)
    except SaslFailed as exc:
        conn.close_after_response = True
        metrics.AUTHENTICATION_FAILURES.labels(conn.listener, exchange.mechanism).inc()
        log.warning(
            "authentication failed on %s from %s (%s): %s",
            conn.listener,
            conn.client_host,
            exchange.mechanism,
            exc,
            extra={"host": conn.client_host, "mechanism": exchange.mechanism},
        )
        return reply(ErrorCode.SASL_AUTHENTICATION_FAILED, str(exc))
    if exchange.principal is not None:
        conn.principal = exchange.principal
        conn.authenticated = True
        conn.sasl = None
        metrics.CONNECTIONS.labels(conn.listener, conn.principal).inc()
    return reply(ErrorCode.NONE, None, token)
