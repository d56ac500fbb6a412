"""SaslHandshake v1 and SaslAuthenticate v0-v2: the client picks a mechanism, then exchanges
tokens until the SaslExchange names its principal. A failure is answered with
SASL_AUTHENTICATION_FAILED and the connection is closed after the answer (as Kafka does); so
is a step the connection's state does not allow now, with ILLEGAL_SASL_STATE. The handlers
answer; the connection's state alone records where it stands."""

from __future__ import annotations

import logging
from datetime import timedelta

from shareproxy.core.errors import ErrorCode
from shareproxy.kafka.connection_state import Intent
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
    state = conn.state
    code = ErrorCode.NONE
    if not state.allows(Intent.HANDSHAKE):  # open, authenticated, or a handshake already
        code = ErrorCode.ILLEGAL_SASL_STATE
    elif request.body.mechanism not in mechanisms:
        code = ErrorCode.UNSUPPORTED_SASL_MECHANISM
    else:
        state.handshake(SaslExchange(request.body.mechanism, ctx.credential))
    if code != ErrorCode.NONE:
        state.refuse()
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

    state = conn.state
    exchange = state.exchange  # there only between the handshake and its outcome
    if exchange is None:
        state.refuse()
        return reply(ErrorCode.ILLEGAL_SASL_STATE, "SaslHandshake must come first, once")
    try:
        token = exchange.step(request.body.auth_bytes)
    except SaslFailed as exc:
        state.refuse()
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
        state.authenticated_as(exchange.principal)
        metrics.CONNECTIONS.labels(conn.listener, state.principal).inc()
    return reply(ErrorCode.NONE, None, token)
